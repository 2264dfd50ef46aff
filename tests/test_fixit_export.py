"""Fixit export without teachers: pairs from the shipped sessions and from sessions made of their real
turns; options, split, balance, both forms, the card, stats, hygiene and reproducibility."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import CANARY_KEY
from fixit_support import CAUSAL, LADDER, shipped, write_session
from pydantic import TypeAdapter

from workbench.agent.models.base import ChatMessage
from workbench.errors import UserError
from workbench.evaluate.result import Status
from workbench.fixit.categories import NOT_FAILURES, OTHER, category
from workbench.fixit.export import ExportOptions, export
from workbench.fixit.hygiene import Host, scrub
from workbench.fixit.pairs import MineOptions
from workbench.fixit.rows import read_rows
from workbench.paths import sessions_dir
from workbench.session.log import read_session

PTXWB = Path(sys.executable).parent / "ptxwb"
CAUSAL_TURNS = shipped(CAUSAL)
LADDER_TURNS = shipped(LADDER)
FAILED, FIXED = CAUSAL_TURNS.turns[1], CAUSAL_TURNS.turns[2]  # incorrect_numerical, then passed
NO_GMMA = LADDER_TURNS.turns[1]  # static_missing_family
SLOW, FAST = LADDER_TURNS.turns[2], LADDER_TURNS.turns[3]  # passed at 0.606x, then at 0.896x


def run_export(sources: list[Path], out: Path, **options: object) -> list[dict]:
    mine = options.pop("mine", MineOptions())
    asyncio.run(export(sources, out, ExportOptions(mine=mine, **options)))  # type: ignore[arg-type]
    return [json.loads(line) for line in out.read_text().splitlines()]


def ptxwb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_the_shipped_causal_session_gives_exactly_one_pair(tmp_path: Path) -> None:
    out = tmp_path / "repairs.jsonl"
    done = ptxwb("fixit", "export", str(sessions_dir() / CAUSAL), "--out", str(out))
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    meta = row["metadata"]
    assert (meta["kind"], meta["category"], meta["origin"], meta["verified"]) == (
        "repair",
        "numerical",
        "trajectory",
        "gpu",
    )
    assert (
        meta["failed"]["turn"],
        meta["failed"]["status"],
        meta["fixed"]["turn"],
        meta["fixed"]["status"],
    ) == (
        1,
        "incorrect_numerical",
        2,
        "passed",
    )
    assert meta["session"] == CAUSAL and meta["fixed"]["device"] == "NVIDIA H200"
    assert meta["fixed"]["executor"] == "local" and meta["fixed"]["evaluator"]["workbench"] == "0.1.0"
    assert meta["agent_model"] == "scripted:mha_causal_fix.json"  # references/scripts/..., without its folder
    system, user, assistant = (ChatMessage.model_validate(m) for m in row["messages"])
    assert (system.role, user.role, assistant.role) == ("system", "user", "assistant")
    # The prompt: the task as the agent read it, the failed kernel, its verdict as the agent read it.
    assert user.content.startswith("# Task `mha_with_lse_d128_causal` on Hopper")
    assert FAILED.candidate.source in user.content
    assert (
        "Verdict: incorrect_numerical" in user.content and "[correctness] incorrect_numerical" in user.content
    )
    assert assistant.content == f"```cuda\n{FIXED.candidate.source}```"
    card = (tmp_path / "repairs.md").read_text()
    assert "path: repairs.jsonl" in card and "| category | numerical | 1 |" in card
    assert done.stdout.splitlines()[-2:] == [str(out), str(tmp_path / "repairs.md")]


def test_failure_categories_and_a_status_this_version_does_not_know_is_other() -> None:
    expected = {
        "compile_error": "compile",
        "abi_mismatch": "compile",
        "banned": "banned",
        "foreign_kernel": "banned",
        "runtime_error": "runtime",
        "timeout": "timeout",
        "incorrect_numerical": "numerical",
        "incorrect_shape": "numerical",
        "static_missing_family": "family_missing",
        "dynamic_not_executed": "not_executed",
        "low_tensor_share": "not_executed",
        "decoy": "integrity",
        "tampered": "integrity",
    }
    assert {status: category(status) for status in expected} == expected
    assert category("brand_new_status") == OTHER
    assert all(isinstance(category(status), str) for status in Status)  # statuses added later included
    assert {Status.passed, Status.not_run, Status.infrastructure_error} == NOT_FAILURES


def test_every_failure_or_the_last_improvements_and_dedup(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # compile-free variants of real turns: two different failures, a fix, then a faster pass.
    turns = [NO_GMMA.variant("a"), NO_GMMA.variant("b"), SLOW, FAST]
    write_session(sweep / "gemm" / "t1.jsonl", LADDER_TURNS, turns)
    write_session(sweep / "gemm" / "t2.jsonl", LADDER_TURNS, turns)  # the same sources again
    (sweep / "store.jsonl").write_text('{"table": "turns"}\n')  # a sweep's own store is not a session

    every = run_export([sweep], tmp_path / "all.jsonl")
    assert [(r["metadata"]["failed"]["turn"], r["metadata"]["fixed"]["turn"]) for r in every] == [
        (1, 3),
        (2, 3),
    ]
    assert {r["metadata"]["session"] for r in every} == {"gemm/t1.jsonl"}  # t2 only repeats t1

    last = run_export([sweep], tmp_path / "last.jsonl", mine=MineOptions(failures="last"), dedup=False)
    assert [(r["metadata"]["session"], r["metadata"]["failed"]["turn"]) for r in last] == [
        ("gemm/t1.jsonl", 2),
        ("gemm/t2.jsonl", 2),
    ]

    better = run_export(
        [sweep / "gemm" / "t1.jsonl"], tmp_path / "better.jsonl", mine=MineOptions(improvements=True)
    )
    improvement = [r for r in better if r["metadata"]["kind"] == "improvement"]
    assert [(r["metadata"]["failed"]["turn"], r["metadata"]["fixed"]["turn"]) for r in improvement] == [
        (3, 4)
    ]
    assert improvement[0]["metadata"]["category"] == "improvement"
    assert "Every tier passed, at 0.606× the baseline" in improvement[0]["messages"][1]["content"]
    none = run_export(
        [sweep / "gemm" / "t1.jsonl"],
        tmp_path / "none.jsonl",
        mine=MineOptions(improvements=True, min_gain=1.0),
    )
    assert all(r["metadata"]["kind"] == "repair" for r in none)


def test_a_static_only_fix_is_left_out_unless_asked_for(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", LADDER_TURNS, [NO_GMMA.static(), SLOW.static()])
    assert run_export([session], tmp_path / "gpu.jsonl") == []
    card = (tmp_path / "gpu.md").read_text()
    assert "1 fixes proven by the build and static tiers only left out (--include-static keeps them)" in card
    [row] = run_export([session], tmp_path / "static.jsonl", include_static=True)
    assert row["metadata"]["verified"] == "static" and row["metadata"]["fixed"]["executor"] == "static"
    assert row["metadata"]["fixed"]["status"] == "not_run" and row["metadata"]["category"] == "family_missing"


def test_split_by_task_balance_and_prompt_completion_load_with_datasets(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    sweep = tmp_path / "sweep"
    for n in range(4):
        write_session(sweep / f"gemm{n}.jsonl", LADDER_TURNS, [NO_GMMA.variant(str(n)), SLOW])
    write_session(sweep / "attn.jsonl", CAUSAL_TURNS, [FAILED, FIXED])
    out = tmp_path / "pc.jsonl"
    options = {"fmt": "prompt-completion", "eval_tasks": ("mha_with_lse_d128_causal",)}
    train = run_export([sweep], out, **options)
    evaluation = [json.loads(line) for line in (tmp_path / "pc.eval.jsonl").read_text().splitlines()]
    assert {r["metadata"]["task"] for r in train} == {"gemm_n7168_k5120"} and len(train) == 4
    assert [r["metadata"]["task"] for r in evaluation] == ["mha_with_lse_d128_causal"]
    assert {r["metadata"]["split"] for r in train} == {"train"} and evaluation[0]["metadata"][
        "split"
    ] == "eval"
    assert [m["role"] for m in evaluation[0]["prompt"]] == ["system", "user"]
    assert [m["role"] for m in evaluation[0]["completion"]] == ["assistant"]
    loaded = datasets.load_dataset(
        "json",
        data_files={"train": str(out), "test": str(tmp_path / "pc.eval.jsonl")},
        cache_dir=str(tmp_path / "hf"),
    )
    assert loaded["train"].num_rows == 4 and loaded["test"].num_rows == 1
    assert loaded["test"][0]["completion"][0]["content"] == f"```cuda\n{FIXED.candidate.source}```"
    assert "split: test\n    path: pc.eval.jsonl" in (tmp_path / "pc.md").read_text()

    # Balanced: the four GEMM rows (one group) are cut to the median group's size.
    balanced = run_export([sweep], tmp_path / "balanced.jsonl", balance=True, per_group=2, seed=1)
    assert sorted(r["metadata"]["task"] for r in balanced) == ["gemm_n7168_k5120"] * 2 + [
        "mha_with_lse_d128_causal"
    ]
    again = run_export([sweep], tmp_path / "balanced2.jsonl", balance=True, per_group=2, seed=1)
    assert again == balanced  # the seed decides
    held = run_export([sweep], tmp_path / "fraction.jsonl", eval_fraction=0.5)
    assert len({r["metadata"]["task"] for r in held}) == 1  # one of two tasks held out, none in both
    with pytest.raises(UserError, match="no pair has task nope"):
        run_export([sweep], tmp_path / "x.jsonl", eval_tasks=("nope",))


def test_nothing_from_the_host_in_a_row(tmp_path: Path) -> None:
    user = "fixituser"
    home = tmp_path / "home" / user
    runs = home / "runs"
    # A compile error naming the kernel by its absolute path under the user's home, an ssh executor
    # with a user and host, a scripted model in the home folder.
    failed = NO_GMMA.variant("host")
    failed.result.stages.build.errors = [f"{runs}/kernel.cu(3): error: identifier undefined"]
    failed.result.stages.build.status = Status.compile_error
    failed = failed.with_result(status=Status.compile_error, message=f"nvcc failed in {runs}/build")
    fixed = SLOW.with_result(executor=f"ssh://{user}@gpu-box-7:22")
    session = write_session(
        runs / "s.jsonl", LADDER_TURNS, [failed, fixed], model=f"scripted:{home}/script.json"
    )
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "HOME": str(home), "USER": user, "LOGNAME": user, "OPENAI_API_KEY": CANARY_KEY}
    done = ptxwb("fixit", "export", str(session), "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    text = out.read_text() + (tmp_path / "out.md").read_text()
    for leak in (user, str(tmp_path), CANARY_KEY, "gpu-box-7"):
        assert leak not in text
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert "kernel.cu(3): error: identifier undefined" in row["messages"][1]["content"]
    assert (
        row["metadata"]["fixed"]["executor"] == "ssh"
        and row["metadata"]["agent_model"] == "scripted:script.json"
    )

    # A kernel holding a host detail is never edited: its pair is dropped.
    leaky = SLOW.variant(f"built in {home}")
    session = write_session(tmp_path / "leak.jsonl", LADDER_TURNS, [NO_GMMA, leaky])
    done = ptxwb("fixit", "export", str(session), "--out", str(tmp_path / "leak-out.jsonl"), env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "leak-out.jsonl").read_text() == ""
    assert "1 pairs dropped: a kernel holds a detail of this machine" in done.stdout


def test_every_row_is_reproducible_from_its_provenance(tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    rows = run_export([sessions_dir()], out, mine=MineOptions(improvements=True))
    assert len(rows) == 4  # the causal fix; the ladder's GMMA fix and its two improvements
    for row in rows:
        meta = row["metadata"]
        read = read_session(sessions_dir() / meta["session"])
        assert read.start.session_id == meta["session_id"]
        sources = {e.turn: e for e in read.events if e.type == "candidate"}
        verdicts = {e.turn: e.result for e in read.events if e.type == "evaluation"}
        for side in ("failed", "fixed"):
            turn = meta[side]["turn"]
            assert sources[turn].sha256 == meta[side]["sha256"] == verdicts[turn].source_sha256
            assert verdicts[turn].status == meta[side]["status"]
        assert row["messages"][-1]["content"] == f"```cuda\n{sources[meta['fixed']['turn']].source}```"
    # The same sessions give the same bytes.
    run_export([sessions_dir()], tmp_path / "b.jsonl", mine=MineOptions(improvements=True))
    assert (tmp_path / "b.jsonl").read_bytes() == out.read_bytes()


def test_stats_counts_both_forms(tmp_path: Path) -> None:
    run_export([sessions_dir()], tmp_path / "m.jsonl")
    run_export([sessions_dir()], tmp_path / "p.jsonl", fmt="prompt-completion")
    for name in ("m.jsonl", "p.jsonl"):
        done = ptxwb("fixit", "stats", str(tmp_path / name), "--json")
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        assert stats["rows"] == 2 and stats["sessions"] == 2
        assert stats["groups"]["category"] == {"numerical": 1, "family_missing": 1}
        assert stats["devices"] == {"NVIDIA H200": 2}
    table = ptxwb("fixit", "stats", str(tmp_path / "m.jsonl"))
    assert table.returncode == 0 and "2 rows from 2 sessions" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "{tmp}/none.jsonl", "--out", "{tmp}/o.jsonl"], "none.jsonl: no such file or folder"),
        (["export", "{tmp}/plain.jsonl", "--out", "{tmp}/o.jsonl"], "plain.jsonl: not a session file"),
        (["export", "{sessions}", "--out", "{tmp}/o.txt"], "--out must name a .jsonl file"),
        (["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--format", "alpaca"], "--format: unknown value"),
        (
            ["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--failures", "some"],
            "--failures: unknown value",
        ),
        (
            ["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--eval-fraction", "1"],
            "--eval-fraction must be",
        ),
        (["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--teacher-repair", "human"], "needs someone"),
        (["export", "{sessions}", "--out", "{tmp}/taken.jsonl"], "taken.jsonl: already exists"),
        (["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--executor", "local"], "give --teacher-repair"),
        (["export", "{sessions}", "--out", "{tmp}/o.jsonl", "--per-group", "2"], "give --balance too"),
        (["stats", "{tmp}/plain.jsonl"], "plain.jsonl:1: not a Fixit row"),
        (["stats", "{tmp}/none.jsonl"], "none.jsonl: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "plain.jsonl").write_text('{"messages": []}\n')
    (tmp_path / "taken.jsonl").write_text("mine\n")
    filled = [a.format(tmp=tmp_path, sessions=sessions_dir()) for a in args]
    done = ptxwb("fixit", *filled)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (tmp_path / "taken.jsonl").read_text() == "mine\n"  # nothing a user made is touched
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.md").exists()


def test_rows_validate_against_the_chat_messages_schema(tmp_path: Path) -> None:
    """Without `datasets`: every line is {"messages": [{role, content}, …], …} with the assistant last."""
    run_export([sessions_dir()], tmp_path / "m.jsonl")
    messages = TypeAdapter(list[ChatMessage])
    for line in (tmp_path / "m.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert set(row) == {"messages", "metadata"}
        assert [m.role for m in messages.validate_python(row["messages"])] == ["system", "user", "assistant"]
    assert [fmt for _, fmt in read_rows(tmp_path / "m.jsonl")] == ["messages", "messages"]


def test_the_export_benchmark_runs(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "fixit_export.py"
    done = subprocess.run(
        [sys.executable, str(script), "--trajectories", "5", "--repeats", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pairs found 5, duplicates 0, unfixed failures 2, rows 5" in done.stdout
    assert "goal: < 10 s for the sweep: met" in done.stdout


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("error in /home/ann/runs/kernel.cu(3): bad", "error in kernel.cu(3): bad"),
        ("see ~/.cache/ptxwb/builds/ab/kernel.so", "see kernel.so"),
        ("nvcc -I/opt/site/tvm_ffi/include", "nvcc -Iinclude"),
        ('#include "/usr/local/cuda/include/cuda.h"', '#include "cuda.h"'),
        ("/abs/x.cu: error\n/abs/y/z.cu: note", "x.cu: error\nz.cu: note"),
        (
            "TFLOP/s, a/b, 1.0 / math.sqrt(D), src/k.cu, // comment",
            "TFLOP/s, a/b, 1.0 / math.sqrt(D), src/k.cu, // comment",
        ),
        ("http://127.0.0.1:8000/v1/chat", "http://127.0.0.1:8000/v1/chat"),
        ("ssh://ann@gpu7:22 failed", "ssh://[redacted]@gpu7:22 failed"),
        (f"key {CANARY_KEY} echoed", "key [redacted] echoed"),
    ],
)
def test_scrub_cuts_paths_and_secrets_from_workbench_text(text: str, scrubbed: str) -> None:
    assert scrub(text, Host.current()) == scrubbed
