"""No host path in a session, an export, a sweep or a re-judge file; the listings are still found here.

A run writes its builds' files as `cache:<key>/<file>`; the TUI's SASS pane and the carried listings
find them in this machine's build cache (`$PTXWB_CACHE`). An older session, with absolute paths,
still loads: a path that is here is followed, one recorded elsewhere is looked up by its build key.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from agent_support import answer, record_session, three_turn_answers, wgmma_kernel, write_script
from bench_support import run_scripted
from build_support import needs_nvcc, session_cache

from workbench.bench.rejudge import rejudge
from workbench.evaluate.result import BuildStage, EvalResult, Stages, StaticStage, Status
from workbench.paths import project_root
from workbench.session.events import Evaluation, Event, SessionStart
from workbench.session.hostpaths import Scrubber, local_file, portable_result, public_model
from workbench.session.listings import carry
from workbench.session.log import read_session
from workbench.tui.artifacts import ArtifactCache
from workbench.tui.document import CodeDocument
from workbench.tui.model import SessionView

PTXWB = Path(sys.executable).parent / "ptxwb"
REPO = Path(__file__).resolve().parent.parent
KEY = re.compile(r"cache:([0-9a-f]{64})/")


def host_folders(*more: Path) -> list[str]:
    """What of this machine must not be in a file: its temporary, home and checkout folders, the Python
    environment, and whatever the test adds (the build cache, its own folder)."""
    folders = {tempfile.gettempdir(), str(Path.home()), str(REPO), str(project_root()), sys.prefix}
    folders |= {str(p) for p in more}
    return sorted(f for f in folders if f not in ("", "/"))


def leaks(text: str, folders: list[str]) -> list[str]:
    return [folder for folder in folders if folder in text]


def ptxwb(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTXWB_CACHE": str(cache)}
    return subprocess.run(
        [str(PTXWB), *args], check=False, capture_output=True, text=True, timeout=600, cwd=cwd, env=env
    )


def evaluations(path: Path) -> list[Evaluation]:
    return [e for e in read_session(path).events if isinstance(e, Evaluation)]


def sass_here(path: Path) -> CodeDocument:
    """The TUI's SASS tab of the session's last evaluated turn, with its carried listings left out and
    nothing rebuilt: what the build folder the session names holds on this machine, or why not."""
    events: list[Event] = [
        e.model_copy(update={"listings": None}) if isinstance(e, Evaluation) else e
        for e in read_session(path).events
    ]
    view = SessionView.from_events(events)
    turn = view.turn(max(e.turn for e in events if isinstance(e, Evaluation) and e.turn is not None))
    jobs: list[Callable[[], Awaitable[None]]] = []
    artifacts = ArtifactCache(jobs.append)
    document = artifacts.sass(turn, "hopper", rebuild=False)
    while jobs:  # the reads the pane hands to a worker
        asyncio.run(jobs.pop()())
        document = artifacts.sass(turn, "hopper", rebuild=False)
    return document


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`ptxwb run` with a scripted model named by its absolute path: a compile error, a kernel without
    wgmma, one with it, judged by the static executor (real nvcc) into the run's build cache."""
    folder = tmp_path_factory.mktemp("recorded")
    script = write_script(folder / "script.json", three_turn_answers())
    cache = session_cache(tmp_path_factory)
    done = ptxwb("run", "--task", "gemm_n7168_k5120", "--model", f"scripted:{script}", "--turns", "3",
                 "--no-pack", "--headless", "--out", str(folder / "run.jsonl"), cwd=folder, cache=cache)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "run.jsonl", cache


@needs_nvcc
def test_a_scripted_run_writes_no_host_path(recorded: tuple[Path, Path]) -> None:
    session, cache = recorded
    text = session.read_text()
    assert not leaks(text, host_folders(cache, session.parent)), "a host path in the session"
    assert read_session(session).start.model == "scripted:script.json"
    [failed, missing, passed] = evaluations(session)
    assert failed.result.status == Status.compile_error
    assert missing.result.stages.static.status == Status.static_missing_family
    for evaluation in (missing, passed):
        build, static = evaluation.result.stages.build, evaluation.result.stages.static
        key = build.build_key
        assert key is not None
        assert (build.library_path, build.ptx_path, build.cubin_path, static.sass_path) == (
            f"cache:{key}/kernel.so",
            f"cache:{key}/kernel.ptx",
            f"cache:{key}/kernel.cubin",
            f"cache:{key}/kernel.sass",
        )
        assert "-I<tvm_ffi>/include" in build.command  # the nvcc line, its folders named, not spelled out
    # The feedback the model was sent (and the session keeps) names no folder of this machine either.
    assert "Turn 2 verdict" in text and "static_missing_family" in text


@needs_nvcc
async def test_what_the_loop_yields_is_what_the_file_holds(tmp_path: Path) -> None:
    """The live screen is shown the events as written: the same `cache:` references a replay reads."""
    cache = tmp_path / "cache"
    items = await record_session(tmp_path / "s.jsonl", [answer(wgmma_kernel())], cache)
    events = read_session(tmp_path / "s.jsonl").events
    assert [i for i in items if i.__class__ in {e.__class__ for e in events}] == events
    start, [evaluation] = events[0], [e for e in events if isinstance(e, Evaluation)]
    assert isinstance(start, SessionStart) and start.model == "scripted:s.script.json"
    assert (
        evaluation.result.stages.static.sass_path
        == f"cache:{evaluation.result.stages.build.build_key}/kernel.sass"
    )
    assert evaluation.listings is not None and "HGMMA" in (evaluation.listings.text("sass") or "")
    text = (tmp_path / "s.jsonl").read_text()
    found = leaks(text, host_folders(cache, tmp_path))
    # On a failure, where in the file each folder stands.
    assert not found, [text[max(0, text.find(f) - 300) : text.find(f) + 120] for f in found]


@needs_nvcc
def test_the_sass_of_a_recorded_turn_is_found_in_this_machines_build_cache(
    recorded: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, cache = recorded
    passed = evaluations(session)[-1].result
    monkeypatch.setenv("PTXWB_CACHE", str(cache))
    sass = local_file(passed.stages.static.sass_path)
    assert sass is not None and sass.is_relative_to(cache) and "HGMMA" in sass.read_text()
    shown = sass_here(session)
    assert shown.unavailable == "" and any("HGMMA" in line for line in shown.lines)
    listings = carry(passed)  # the listings a copy of the session carries, read from the cache here
    assert listings is not None and "HGMMA" in (listings.text("sass") or "")
    assert "wgmma.mma_async" in (listings.text("ptx") or "") and listings.cubin_sha256 is not None

    # Another machine's build cache holds no such build: the pane says so (and would rebuild).
    monkeypatch.setenv("PTXWB_CACHE", str(session.parent / "no-cache-here"))
    assert local_file(passed.stages.static.sass_path) is None and carry(passed) is None
    assert "SASS not available: its SASS dump is not on this machine" in sass_here(session).unavailable


@needs_nvcc
def test_an_older_session_with_absolute_paths_still_loads_and_is_exported_without_them(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, cache = recorded
    monkeypatch.setenv("PTXWB_CACHE", str(cache))
    read = read_session(session)
    passed = evaluations(session)[-1]
    key = passed.result.stages.build.build_key
    assert key is not None

    def old(where: Path, model: str) -> Path:
        """The session as the workbench wrote it before: absolute paths to the build folder `where`."""
        name = f"old-{where.name}.jsonl"
        events = [
            e.model_copy(update={"model": model}) if e.type == "session_start" else e for e in read.events
        ]
        text = "".join(json.dumps(e.model_dump(mode="json")) + "\n" for e in events)
        (tmp_path / name).write_text(KEY.sub(lambda m: f"{where}/{m.group(1)[:2]}/{m.group(1)}/", text))
        return tmp_path / name

    # Recorded here, the folder still here: followed as it is.
    here = old(cache, f"scripted:{tmp_path}/script.json")
    result = evaluations(here)[-1].result
    assert result.stages.static.sass_path == f"{cache}/{key[:2]}/{key}/kernel.sass"
    assert local_file(result.stages.static.sass_path) == cache / key[:2] / key / "kernel.sass"
    assert any("HGMMA" in line for line in sass_here(here).lines)
    # Recorded on another machine, in its build cache: the same build is found here by its key.
    elsewhere = old(Path("/home/someone/.cache/ptxwb/builds"), "scripted:/home/someone/script.json")
    result = evaluations(elsewhere)[-1].result
    assert local_file(result.stages.static.sass_path) == cache / key[:2] / key / "kernel.sass"
    assert any("HGMMA" in line for line in sass_here(elsewhere).lines)
    # Not in a build cache, and not here: absent, said so, never an error.
    gone = tmp_path / "gone.jsonl"
    gone.write_text(elsewhere.read_text().replace(f"/{key[:2]}/{key}/", "/gone/"))
    result = evaluations(gone)[-1].result
    assert result.stages.static.sass_path == "/home/someone/.cache/ptxwb/builds/gone/kernel.sass"
    assert local_file(result.stages.static.sass_path) is None
    assert "its SASS dump is not on this machine" in sass_here(gone).unavailable

    folders = host_folders(cache, tmp_path, Path("/home/someone"))
    (tmp_path / "script.json").write_text((session.parent / "script.json").read_text())  # for the fork
    exported = ptxwb("session", "export", str(elsewhere), "--out", str(tmp_path / "x.traj.json"),
                     cwd=tmp_path, cache=cache)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert not leaks((tmp_path / "x.traj.json").read_text(), folders)
    imported = ptxwb("session", "import", str(tmp_path / "x.traj.json"), "--out", str(tmp_path / "back.jsonl"),
                     cwd=tmp_path, cache=cache)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    back = tmp_path / "back.jsonl"
    assert not leaks(back.read_text(), folders)
    assert evaluations(back)[-1].result.stages.static.sass_path == f"cache:{key}/kernel.sass"
    shown = ptxwb("session", "show", str(here), cwd=tmp_path, cache=cache)
    as_json = ptxwb("session", "show", "--json", str(here), cwd=tmp_path, cache=cache)
    assert shown.returncode == as_json.returncode == 0, shown.stderr + as_json.stderr
    assert (
        "scripted:script.json" in shown.stdout
        and json.loads(as_json.stdout)["model"] == "scripted:script.json"
    )
    assert not leaks(shown.stdout + as_json.stdout, folders)
    forked = ptxwb("session", "fork", str(here), "--turn", "1", "--model", f"scripted:{tmp_path}/script.json",
                   "--out", str(tmp_path / "fork.jsonl"), cwd=session.parent, cache=cache)  # fmt: skip
    assert forked.returncode == 0, forked.stdout + forked.stderr
    fork = (tmp_path / "fork.jsonl").read_text()
    assert not leaks(fork, host_folders(cache, tmp_path, session.parent))
    assert "stopped_by" not in fork and len(evaluations(tmp_path / "fork.jsonl")) == 3  # the script went on


@needs_nvcc
def test_a_fixit_export_of_a_recorded_run_holds_no_host_path(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    session, cache = recorded
    done = ptxwb("fixit", "export", str(session), "--out", str(tmp_path / "fixit.jsonl"), "--include-static",
                 cwd=tmp_path, cache=cache)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = (tmp_path / "fixit.jsonl").read_text()
    assert rows.count("\n") == 2  # the compile error fixed, the missing family fixed
    folders = host_folders(cache, tmp_path, session.parent)
    assert not leaks(rows + (tmp_path / "fixit.md").read_text(), folders)  # (the terminal names its files)


@needs_nvcc
def test_a_sweep_and_its_rejudge_hold_no_host_path(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cache = session_cache(tmp_path_factory)
    folder, summary = run_scripted(tmp_path, cache, trajectories=1)
    assert summary.ran == 2
    folders = host_folders(cache, tmp_path)
    sessions = sorted((folder.root / "sessions").glob("*.jsonl"))
    assert len(sessions) == 2
    for path in sessions:
        assert not leaks(path.read_text(), folders), path.name
        assert read_session(path).start.model in ("scripted:fails.json", "scripted:fixes.json")
    verdicts, written = rejudge(folder, "static", cache)
    assert len(verdicts) == 4 and not any(v.changed for v in verdicts)
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    assert not leaks(written.read_text(), folders)
    assert {line["result"]["stages"]["static"]["sass_path"] for line in lines if line["turn"] == 2} == {
        f"cache:{v.new.stages.build.build_key}/kernel.sass" for v in verdicts if v.recorded.turn == 2
    }


def test_text_is_scrubbed_of_this_machines_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "builds"
    monkeypatch.setenv("PTXWB_CACHE", str(cache))
    key = "ab" + "0" * 62
    home, tmp = Path.home(), Path(tempfile.gettempdir())
    scrub = Scrubber().text
    cases = {
        f"{cache}/ab/{key}/kernel.sass": f"cache:{key}/kernel.sass",
        f"/elsewhere/builds/ab/{key}/kernel.cubin": f"cache:{key}/kernel.cubin",  # any build cache
        f"{cache}/build-x1y2_z3w/kernel.cu(12): error: bad": "kernel.cu(12): error: bad",
        f"{cache}/triton-abcdefgh/kernel.py:3:1: error": "kernel.py:3:1: error",
        "-I/opt/site/tvm_ffi/include -L/tmp/site/tvm_ffi/lib": "-I<tvm_ffi>/include -L<tvm_ffi>/lib",
        f"{REPO}/workbench/evaluate/gpu/worker.py, line 3": "<checkout>/workbench/evaluate/gpu/worker.py, line 3",
        f"{sys.prefix}/lib/python3/site.py": "<python>/lib/python3/site.py"
        if sys.prefix != sys.base_prefix
        else f"{sys.prefix}/lib/python3/site.py",
        f"{cache}": "<cache>",
        f'"{home}/work/ann/kernel.cu"': '"kernel.cu"',
        f"open({tmp}/x/y/script.json)": "open(script.json)",
        "scripted:/home/ann/s.json and /root/x/y.jsonl and /Users/bo/z.cu": "scripted:s.json and y.jsonl and z.cu",
        "TFLOP/s, a/b, src/k.cu, http://127.0.0.1:8000/v1, /usr/local/cuda/include/cuda.h": (
            "TFLOP/s, a/b, src/k.cu, http://127.0.0.1:8000/v1, /usr/local/cuda/include/cuda.h"
        ),
    }
    for text, expected in cases.items():
        assert scrub(text) == expected, text
        assert scrub(expected) == expected  # scrubbed twice, the same


def test_a_result_made_portable_keeps_what_it_was_made_with(tmp_path: Path) -> None:
    key = "cd" + "1" * 62
    entry = f"/home/ann/.cache/ptxwb/builds/cd/{key}"
    build = BuildStage(status=Status.passed, build_key=key, command=["nvcc", "-I/x/tvm_ffi/include"])
    build.library_path, build.ptx_path, build.cubin_path = f"{entry}/kernel.so", f"{entry}/kernel.ptx", None
    build.negated_library_path = f"{entry}/negated/kernel.so"
    result = EvalResult(task="t", target="hopper", executor="static", source_sha256="0" * 64)
    result.stages = Stages(build=build, static=StaticStage(sass_path="/home/ann/elsewhere/kernel.sass"))
    portable = portable_result(result)
    assert portable.stages.build.library_path == f"cache:{key}/kernel.so"
    assert portable.stages.build.ptx_path == f"cache:{key}/kernel.ptx"
    assert portable.stages.build.negated_library_path == f"cache:{key}/negated/kernel.so"
    assert portable.stages.static.sass_path is None  # outside any build cache: of no use elsewhere
    assert portable.stages.build.command == ["nvcc", "-I<tvm_ffi>/include"]
    assert portable_result(portable) == portable
    assert "/home/ann" not in portable.model_dump_json()
    # A result as a session file gave it: only what it held is written back (an export writes those).
    read = EvalResult.model_validate_json(result.model_dump_json(exclude_unset=True))
    again = portable_result(read)
    assert again.model_fields_set == read.model_fields_set
    assert again.stages.build.model_fields_set == read.stages.build.model_fields_set
    assert local_file("cache:../../etc/kernel.sass") is None and local_file(f"cache:{key}/../x") is None


def test_model_names_keep_no_host_folder() -> None:
    assert public_model("scripted:/home/ann/sweep/refs.json") == "scripted:refs.json"
    assert public_model("replay:C:\\runs\\s.jsonl") == "replay:s.jsonl"
    assert public_model("scripted:references/scripts/gemm_ladder.json") == (
        "scripted:references/scripts/gemm_ladder.json"  # a path in the repository, as the shipped sessions
    )
    assert public_model("openai/gpt-5") == "openai/gpt-5" and public_model("human") == "human"


def test_the_shipped_sessions_hold_no_host_path() -> None:
    for path in sorted((REPO / "sessions").glob("*.jsonl")):
        text = path.read_text()
        assert not re.search(r"(?<![\w.])/(home|root|tmp|Users)/", text), path.name
        keys = {e.result.stages.build.build_key for e in evaluations(path) if e.result.stages.build.ptx_path}
        assert keys and all(f"cache:{k}/kernel.ptx" in text for k in keys)
