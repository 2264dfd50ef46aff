"""Sweeps end to end: the issue's spec through litellm's real HTTP path to the local test server and
the static executor (real nvcc), killed with SIGKILL mid-sweep and resumed; the sweep's cost limit;
re-judging recorded candidates; the store rebuilt from the session files; bad input at the CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import CANARY_KEY, answer, broken_kernel, simt_kernel, warmed_build_cache, wgmma_kernel
from bench_support import run_scripted, scripted_spec
from openai_server import HttpError, OpenAIServer

from workbench.bench.folder import SweepFolder
from workbench.bench.rejudge import rejudge
from workbench.bench.runner import run_sweep
from workbench.bench.spec import parse_spec
from workbench.session.events import SessionEnd
from workbench.session.log import read_session

pytestmark = pytest.mark.nvcc
PTXWB = Path(sys.executable).parent / "ptxwb"
SMOKE = """name = "smoke"
models = ["openai/stub-a", "openai/stub-b"]
tasks = ["gemm_n7168_k5120", "gemm_n4096_k4096"]
targets = ["hopper"]
trajectories = 3
turns = 2
executor = "static"
concurrency = 4
[model_options]
api_base = "{base}"
backoff_s = 0.05
"""
# What each stub writes at each turn: stub-a never passes the static tier, stub-b does at turn 2.
PLAYS = {"stub-a": [broken_kernel, simt_kernel], "stub-b": [simt_kernel, wgmma_kernel]}


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warmed_build_cache(tmp_path_factory)


class Stubs:
    """Answers by model and turn (the count of assistant messages sent), slowly, the first one a 429."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | HttpError:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            return HttpError(429, "rate limited, slow down", "rate_limit_error")
        time.sleep(self.delay_s)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return answer(PLAYS[body["model"]][turn]())


def ptxwb(*args: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args], check=False, capture_output=True, text=True, timeout=timeout, env=env
    )


def ended(path: Path) -> bool:
    return '"type":"session_end"' in path.read_text(errors="replace")


def test_kill_nine_mid_sweep_then_resume(tmp_path: Path, build_cache: Path) -> None:
    out = tmp_path / "sweep"
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY, "PTXWB_CACHE": str(build_cache)}
    with OpenAIServer(Stubs(delay_s=0.15)) as server:
        spec = tmp_path / "smoke.toml"
        spec.write_text(SMOKE.format(base=server.base_url))
        log = (tmp_path / "first.log").open("w")
        first = subprocess.Popen(
            [str(PTXWB), "bench", "run", str(spec), "--out", str(out)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None:
            files = list((out / "sessions").glob("*.jsonl")) if (out / "sessions").is_dir() else []
            if sum(ended(f) for f in files) >= 3 and any(not ended(f) for f in files):
                break
            time.sleep(0.05)
        assert first.poll() is None, "the sweep ended before it could be killed"
        os.killpg(first.pid, signal.SIGKILL)  # kill -9: no handler runs, files are left as they are
        first.wait(timeout=30)
        log.close()
        files = sorted((out / "sessions").glob("*.jsonl"))
        done_before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files if ended(f)}
        cut = [f.name for f in files if not ended(f)]
        assert 3 <= len(done_before) < 12 and cut

        resumed = ptxwb("bench", "run", str(spec), "--out", str(out), "--resume", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        metrics = ptxwb("bench", "metrics", str(out), "--json", "--turns", "1,2", env=env)
        assert metrics.returncode == 0, metrics.stderr

    first_log = (tmp_path / "first.log").read_text()
    assert "retry 1" in first_log and "RateLimitError" in first_log
    assert f"{len(done_before)} finished before" in resumed.stdout

    # Twelve sessions, all ended; a finished one was never run again; every cut attempt kept aside.
    files = sorted((out / "sessions").glob("*.jsonl"))
    assert len(files) == 12 and all(isinstance(read_session(f).events[-1], SessionEnd) for f in files)
    assert all(
        hashlib.sha256((out / "sessions" / n).read_bytes()).hexdigest() == h for n, h in done_before.items()
    )
    aside = sorted(p.name for p in (out / "sessions" / "unfinished").glob("*.jsonl"))
    assert aside == sorted(n.removesuffix(".jsonl") + ".attempt1.jsonl" for n in cut)

    # The same final table as an uninterrupted sweep: per stub, both tasks alike. A static sweep never
    # runs the correctness tier: correct@T is not measured (None), where stub-a's unbuilt turn 1 is 0.
    cells = json.loads(metrics.stdout)["cells"]
    assert len(cells) == 8
    for cell in cells:
        fixes = cell["model"] == "openai/stub-b"
        measured = 0 if not fixes and cell["turn_limit"] == 1 else None
        assert (cell["n_trajectories"], cell["n_unfinished"], cell["correct"], cell["sass_verified"]) == (
            3,
            0,
            measured,
            measured,
        )
        assert cell["static_passed"] == (3 if fixes and cell["turn_limit"] == 2 else 0)
        assert cell["best_speedup"] is None
        expected = {1: {"static_missing_family": 3} if fixes else {"compile_error": 3},
                    2: {"static_missing_family": 3, "not_run": 3} if fixes
                    else {"compile_error": 3, "static_missing_family": 3}}  # fmt: skip
        assert cell["failure_mix"] == expected[cell["turn_limit"]]
        assert cell["tokens"] > 0 and cell["turns_evaluated"] == 3 * cell["turn_limit"]

    # The store is a cache: made again from the sessions alone, it holds the same rows.
    folder = SweepFolder(out)
    with folder.open_store() as store:
        before = store.dump_turns()
    rebuilt = ptxwb("bench", "rebuild", str(out), env=env)
    assert rebuilt.returncode == 0 and "12 trajectories, 24 turns" in rebuilt.stdout
    with folder.open_store() as store:
        assert store.dump_turns() == before
    for path in [*out.rglob("*.jsonl"), out / "results.sqlite", tmp_path / "first.log"]:
        data = path.read_bytes()
        assert CANARY_KEY.encode() not in data and CANARY_KEY[:12].encode() not in data


def test_the_cost_limit_stops_starting_trajectories(
    tmp_path: Path, build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    with OpenAIServer(lambda body: answer(simt_kernel())) as server:
        # A model litellm has prices for, so every call has a cost; the limit is below one call.
        text = (f'name = "budget"\nmodels = ["openai/gpt-4o-mini"]\ntasks = ["gemm_n7168_k5120"]\n'
                f'trajectories = 6\nturns = 2\nconcurrency = 1\ncost_limit = 0.000001\n'
                f'[model_options]\napi_base = "{server.base_url}"\n')  # fmt: skip
        folder = SweepFolder(tmp_path / "sweep")
        summary = run_sweep(folder, parse_spec(text, "b.toml", tmp_path), text, cache_dir=build_cache)
        started = summary.ran
        assert started >= 1 and summary.not_started == 6 - started
        assert summary.end_reasons == {"cost_limit": started} and summary.spent_usd > 0.000001
        for path in (folder.root / "sessions").glob("*.jsonl"):
            end = read_session(path).events[-1]
            assert isinstance(end, SessionEnd) and end.reason == "cost_limit" and end.turn == 1
        # A higher limit on --resume finishes the rest; the spent ones are not run again.
        looser = text.replace("cost_limit = 0.000001", "cost_limit = 100.0")
        again = run_sweep(
            folder, parse_spec(looser, "b.toml", tmp_path), looser, resume=True, cache_dir=build_cache
        )
    assert (again.already_finished, again.ran, again.not_started) == (started, 6 - started, 0)
    assert again.end_reasons == {"turn_limit": 6 - started}


def test_rejudge_lists_the_verdicts_that_changed(tmp_path: Path, build_cache: Path) -> None:
    folder, summary = run_scripted(tmp_path, build_cache)
    assert summary.ran == 4
    # A recorded verdict that today's evaluator disagrees with: turn 2 of one `fixes` trajectory.
    path = next((folder.root / "sessions").glob("scripted-fixes-*t000.jsonl"))
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        event = json.loads(line)
        if event["type"] == "evaluation" and event["turn"] == 2:
            event["result"]["status"] = event["result"]["stages"]["build"]["status"] = "compile_error"
            lines[number] = json.dumps(event)
    path.write_text("\n".join(lines) + "\n")
    verdicts, written = rejudge(folder, "static", build_cache)
    assert len(verdicts) == 8
    changed = [
        (v.recorded.session, v.recorded.turn, v.recorded.old.status, v.new.status)
        for v in verdicts
        if v.changed
    ]
    assert changed == [(f"sessions/{path.name}", 2, "compile_error", "not_run")]
    saved = [json.loads(line) for line in written.read_text().splitlines()]
    assert len(saved) == 8 and sum(s["changed"] for s in saved) == 1
    assert all(s["result"]["executor"] == "static" for s in saved)


def test_bad_input_at_the_cli_is_one_line(tmp_path: Path, build_cache: Path) -> None:
    env = {**os.environ, "PTXWB_CACHE": str(build_cache)}
    folder, _ = run_scripted(tmp_path, build_cache, trajectories=1)
    spec = tmp_path / "spec.toml"
    spec.write_text(scripted_spec(tmp_path, trajectories=1))
    other = tmp_path / "other.toml"
    other.write_text(scripted_spec(tmp_path, trajectories=2))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    cases = [
        (["bench", "run", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "x")], "no such file"),
        (["bench", "run", str(spec), "--out", str(folder.root)], "--resume finishes it"),
        (["bench", "run", str(other), "--out", str(folder.root), "--resume"], "holds a different sweep"),
        (["bench", "run", str(spec), "--out", str(tmp_path / "busy")], "holds no sweep but other files"),
        (["bench", "metrics", str(tmp_path / "busy")], "no sweep and no results store"),
        (["bench", "metrics", str(folder.root), "--turns", "0,2"], "--turns: turn limits must be 1"),
        (["bench", "rejudge", str(folder.root), "--executor", "gpu"], "unknown executor"),
    ]
    for args, message in cases:
        done = ptxwb(*args, env=env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine" and not (tmp_path / "x").exists()
    # A finished sweep resumed runs nothing.
    again = ptxwb("bench", "run", str(spec), "--out", str(folder.root), "--resume", env=env)
    assert again.returncode == 0 and "2 finished before, 0 run now" in again.stdout
