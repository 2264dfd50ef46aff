"""Fixit's teachers through litellm's real HTTP path to the local OpenAI-compatible server; the repair
teacher's fixes judged by the static executor with the real nvcc and cuobjdump."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import CANARY_KEY, answer, broken_kernel, simt_kernel, wgmma_kernel
from build_support import session_cache
from fixit_support import CAUSAL, LADDER, shipped, write_session
from openai_server import OpenAIServer

from workbench.fixit.export import ExportOptions, ExportReport, TeacherOptions, export, regenerate_reasoning
from workbench.paths import sessions_dir

PTXWB = Path(sys.executable).parent / "ptxwb"
LADDER_TURNS = shipped(LADDER)
MODEL = "openai/test-model"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@pytest.fixture
def unfixed(tmp_path: Path) -> Path:
    """A static-executor trajectory whose one kernel lacks wgmma (its real verdict, static tiers only)."""
    settings = {**LADDER_TURNS.start.settings, "executor": "static"}
    return write_session(
        tmp_path / "unfixed.jsonl", LADDER_TURNS, [LADDER_TURNS.turns[1].static()], settings=settings
    )


def repair_export(
    session: Path, out: Path, base_url: str, cache: Path, **options: object
) -> tuple[ExportReport, list[dict]]:
    teachers = TeacherOptions(repair=MODEL, tries=3, api_base=base_url, cache_dir=cache)
    report = asyncio.run(export([session], out, ExportOptions(teachers=teachers, **options)))  # type: ignore[arg-type]
    return report, [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.nvcc
def test_a_repair_teacher_fix_is_kept_only_when_the_evaluator_passes_it(
    tmp_path: Path, unfixed: Path, build_cache: Path
) -> None:
    # Try 1 still has no wgmma (the static tier fails it), try 2 has it.
    with OpenAIServer([answer(simt_kernel()), answer(wgmma_kernel())]) as server:
        report, rows = repair_export(
            unfixed, tmp_path / "r.jsonl", server.base_url, build_cache, include_static=True
        )
        requests = server.requests
    assert report.repair is not None
    assert (
        report.repair.failures,
        report.repair.calls,
        report.repair.fixed_static,
        report.repair.not_fixed,
    ) == (1, 2, 1, 0)
    [row] = rows
    meta = row["metadata"]
    assert (meta["origin"], meta["verified"], meta["category"]) == ("teacher", "static", "family_missing")
    assert meta["teachers"] == {"repair": MODEL, "repair_try": 2, "reasoning": ""}
    assert (
        meta["fixed"]["turn"] == 0
        and meta["fixed"]["executor"] == "static"
        and meta["fixed"]["status"] == "not_run"
    )
    assert row["messages"][-1]["content"] == f"```cuda\n{wgmma_kernel()}```"

    # The teacher got the task, the failed kernel and its verdict; then the verdict on its own try.
    first = requests[0].body["messages"]
    assert [m["role"] for m in first] == ["system", "user"] and first == row["messages"][:2]
    assert LADDER_TURNS.turns[1].candidate.source in first[1]["content"]
    second = requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert (
        "static_missing_family" in second[3]["content"] and "That kernel did not pass" in second[3]["content"]
    )
    assert requests[0].headers["authorization"] == f"Bearer {CANARY_KEY}"
    assert CANARY_KEY not in (tmp_path / "r.jsonl").read_text() + (tmp_path / "r.md").read_text()

    # Without --include-static the same static-only fix is recorded and left out.
    with OpenAIServer([answer(simt_kernel()), answer(wgmma_kernel())]) as server:
        report, rows = repair_export(unfixed, tmp_path / "gpu-only.jsonl", server.base_url, build_cache)
    assert rows == [] and report.static_excluded == 1 and report.repair and report.repair.fixed_static == 1


@pytest.mark.nvcc
def test_a_fix_that_fails_evaluation_is_not_kept(tmp_path: Path, unfixed: Path, build_cache: Path) -> None:
    answers = [answer(broken_kernel()), "I would rewrite the main loop.", answer(simt_kernel())]
    with OpenAIServer(answers) as server:
        report, rows = repair_export(
            unfixed, tmp_path / "r.jsonl", server.base_url, build_cache, include_static=True
        )
        requests = server.requests
    assert rows == []
    assert report.repair is not None and (report.repair.calls, report.repair.not_fixed) == (3, 1)
    assert "compile_error" in requests[1].body["messages"][-1]["content"]
    assert "No complete fenced ```cuda block" in requests[2].body["messages"][-1]["content"]
    assert (
        "3 answers (up to 3 tries each); 0 fixes passed every tier on a GPU"
        in (tmp_path / "r.md").read_text()
    )


def test_a_model_error_stops_the_teacher_and_keeps_the_pairs(tmp_path: Path, unfixed: Path) -> None:
    with OpenAIServer([]) as server:  # every request answered with HTTP 400
        report, rows = repair_export(unfixed, tmp_path / "r.jsonl", server.base_url, tmp_path / "cache")
    assert rows == [] and report.repair is not None and report.repair.stopped
    assert "stopped:" in (tmp_path / "r.md").read_text()


def test_the_reasoning_teacher_writes_before_the_fix_and_can_be_run_again_alone(tmp_path: Path) -> None:
    first = "The verdict shows O wrong almost everywhere: the kernel ignores the causal mask.\n\n```cuda\nnot this\n```\nSo skip the key blocks above the diagonal."
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY}
    out = tmp_path / "r.jsonl"
    with OpenAIServer([first]) as server:
        done = subprocess.run(
            [str(PTXWB), "fixit", "export", str(sessions_dir() / CAUSAL), "--out", str(out),
             "--teacher-reasoning", MODEL, "--api-base", server.base_url],
            capture_output=True, text=True, timeout=120, check=False, env=env,
        )  # fmt: skip
        [request] = server.requests
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    reasoning = row["metadata"]["reasoning"]
    assert reasoning.startswith("The verdict shows O wrong") and reasoning.endswith("above the diagonal.")
    assert "not this" not in reasoning  # prose only: the kernel is the answer's one code block
    fixed = shipped(CAUSAL).turns[2].candidate.source
    assert row["messages"][-1]["content"] == f"{reasoning}\n\n```cuda\n{fixed}```"
    assert row["metadata"]["teachers"]["reasoning"] == MODEL
    question = request.body["messages"][1]["content"]
    assert row["messages"][1]["content"] in question and fixed in question  # the pair and the fix
    assert "1 reasonings written" in done.stdout

    # Only the reasoning is written again; the pair is untouched.
    again = tmp_path / "again.jsonl"
    with OpenAIServer(["Without the mask every query attends to every key."]) as server:
        options = TeacherOptions(reasoning=MODEL, api_base=server.base_url)
        report = asyncio.run(regenerate_reasoning(out, again, options))
    assert (report.written, report.empty, report.stopped) == (1, 0, None)
    [new] = [json.loads(line) for line in again.read_text().splitlines()]
    assert new["metadata"]["reasoning"] == "Without the mask every query attends to every key."
    assert new["messages"][-1]["content"] == f"{new['metadata']['reasoning']}\n\n```cuda\n{fixed}```"
    assert new["messages"][:-1] == row["messages"][:-1]
    assert {**new["metadata"], "reasoning": ""} == {**row["metadata"], "reasoning": ""}
    assert (tmp_path / "again.md").exists()
