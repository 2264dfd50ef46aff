"""The command line as a newcomer meets it (issue 28): one clear line for bad input, nothing said twice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tui_synthetic

from workbench.session.events import Candidate, Evaluation, SessionStart
from workbench.session.log import SessionWriter

PTXWB = Path(sys.executable).parent / "ptxwb"
GEMM = "gemm_n7168_k5120"


def ptxwb(*args: str, cwd: Path, columns: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "PTXWB_CACHE": str(cwd / "cache")}
    return subprocess.run(
        [str(PTXWB), *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd, check=False
    )


def one_line_error(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- 1, 11: a file that is not UTF-8, or empty, is bad input for author as for eval ---------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"// caf\xe9\n", "k.cu: not UTF-8 text (byte 6)"), (b" \n\n", "k.cu: the file is empty")],
)
@pytest.mark.parametrize("command", ["author", "eval"])
def test_a_kernel_not_utf8_or_empty_is_refused_alike(
    tmp_path: Path, content: bytes, words: str, command: str
) -> None:
    (tmp_path / "k.cu").write_bytes(content)
    one_line_error(ptxwb(command, "k.cu", "--task", GEMM, cwd=tmp_path), words)
    assert not (tmp_path / "runs").exists()


# --- 4: a GPU executor on a machine without one: refused before anything opens -------------------------


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA GPU")
@pytest.mark.parametrize("command", ["author", "run"])
def test_local_without_a_gpu_is_refused_before_a_screen_or_a_session(tmp_path: Path, command: str) -> None:
    (tmp_path / "k.cu").write_text(tui_synthetic.kernel_source(1))
    args = ["k.cu", "--task", GEMM] if command == "author" else ["--task", GEMM, "--model", "scripted:x.json"]
    one_line_error(
        ptxwb(command, *args, "--executor", "local", cwd=tmp_path), "no NVIDIA GPU on this machine"
    )
    assert not (tmp_path / "runs").exists()


# --- 7: the human model's kernels are the person's ------------------------------------------------------


def test_session_show_calls_the_human_models_kernels_the_persons(tmp_path: Path) -> None:
    source = tui_synthetic.kernel_source(1)
    start = SessionStart(session_id="h1", task=GEMM, target="hopper", model="human", author="human")
    with SessionWriter(tmp_path / "h.jsonl", start) as writer:
        writer.append(Candidate(turn=1, source=source, origin="model", sha256="0" * 64))
        writer.append(Evaluation(turn=1, result=tui_synthetic.result(1, "compile_error", source)))
    table = ptxwb("session", "show", "h.jsonl", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "the person (human model)" in table.stdout and "│ model" not in table.stdout
    data = json.loads(ptxwb("session", "show", "h.jsonl", "--json", cwd=tmp_path).stdout)
    assert [row["origin"] for row in data["turn_rows"]] == ["human"]


# --- 8: flags that contradict each other, and an export of nothing -------------------------------------


def test_no_pack_with_a_pack_variant_is_refused(tmp_path: Path) -> None:
    done = ptxwb(
        "run", "--task", GEMM, "--model", "scripted:x.json", "--no-pack", "--pack-variant", "fa3_forward",
        "--headless", cwd=tmp_path,
    )  # fmt: skip
    one_line_error(done, "--pack-variant adds a file of the knowledge pack that --no-pack leaves out")
    assert not (tmp_path / "runs").exists()


def test_eval_tasks_with_an_eval_fraction_is_refused(tmp_path: Path) -> None:
    tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2))
    done = ptxwb(
        "fixit", "export", "s.jsonl", "--out", "o.jsonl", "--eval-tasks", GEMM, "--eval-fraction", "0.5",
        cwd=tmp_path,
    )  # fmt: skip
    one_line_error(done, "--eval-tasks and --eval-fraction are two ways to choose the eval split")
    assert not (tmp_path / "o.jsonl").exists()


def test_an_export_of_folders_without_sessions_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.jsonl").write_text('{"x": 1}\n')
    done = ptxwb("fixit", "export", "empty", "--out", "o.jsonl", cwd=tmp_path)
    one_line_error(done, "no session files in empty (1 other .jsonl files)")
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.md").exists()


# --- 9: text said once and whole ------------------------------------------------------------------------


def test_task_names_its_family_once(tmp_path: Path) -> None:
    done = ptxwb("task", GEMM, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(f"{GEMM}  (gemm)  ★")


@pytest.mark.parametrize("command", [[], ["author"], ["run"], ["eval"], ["session", "show"], ["fixit"]])
def test_help_shows_no_bool_type_and_cuts_no_summary(tmp_path: Path, command: list[str]) -> None:
    done = ptxwb(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout and "..." not in done.stdout.replace("[ARGS]...", "")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_eval_names_the_users_file_in_compile_errors(tmp_path: Path) -> None:
    (tmp_path / "mine.cu").write_text("__global__ void k() { oops; }\n")
    done = ptxwb("eval", "mine.cu", "--task", GEMM, "--feedback", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "mine.cu(1): error" in done.stdout and "kernel.cu" not in done.stdout
