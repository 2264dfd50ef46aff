"""`ptxwb run` as a user meets it: a person answering on stdin, and one-line errors for bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import answer, simt_kernel, write_script
from build_support import session_cache

from workbench.session import Candidate, Message, SessionEnd, read_session

PTXWB = Path(sys.executable).parent / "ptxwb"


def ptxwb(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PTXWB), *args], check=False, input=stdin, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})  # fmt: skip


@pytest.mark.nvcc
def test_a_person_writes_the_turns_on_stdin(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = tmp_path / "human.jsonl"
    typed = answer(simt_kernel()) + "\n.\n"  # one answer, then end of input: the person stops
    done = ptxwb("run", "--task", "gemm_n7168_k5120", "--model", "human", "--turns", "3", "--no-pack",
                 "--headless", "--out", str(out), stdin=typed,
                 env={"PTXWB_CACHE": str(session_cache(tmp_path_factory))})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    read = read_session(out)
    assert read.start.author == "human" and read.start.model == "human"
    [reply] = [e for e in read.events if isinstance(e, Message) and e.role == "assistant"]
    assert reply.source == "human" and reply.content == answer(simt_kernel()) + "\n"
    [candidate] = [e for e in read.events if isinstance(e, Candidate)]
    assert candidate.source == simt_kernel()
    end = read.events[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("stopped_by_person", 2)
    assert "static_missing_family" in done.stderr  # the feedback is shown to the person


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", ["no code"])
    out = tmp_path / "x.jsonl"
    cases = [
        (["--task", "no_such_task"], "unknown task"),
        (["--turns", "0"], "bad setting turns"),
        (["--executor", "gpu9"], "unknown executor"),
        (["--pack-variant", "no_such_variant"], "has no variant"),
    ]
    for extra, message in cases:
        args = [
            "run",
            "--task",
            "gemm_n7168_k5120",
            "--model",
            f"scripted:{script}",
            "--out",
            str(out),
            *extra,
        ]
        done = ptxwb(*args)
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1, (
            done.stderr
        )
        assert not out.exists()
    done = ptxwb("run", "--task", "gemm_n7168_k5120", "--model", "human", "--context", "everything")
    assert done.returncode == 2 and "everything" in done.stderr
    out.write_text("")
    done = ptxwb("run", "--task", "gemm_n7168_k5120", "--model", f"scripted:{script}", "--out", str(out))
    assert done.returncode == 2 and "already exists" in done.stderr and out.read_text() == ""
