"""`ptxwb eval` as a user runs it: exit codes, JSON, Solution JSON input, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.build_support import KERNELS, needs_nvcc, session_cache
from workbench.evaluate.result import EvalResult, Status

TASK = "gemm_n7168_k5120"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def ptxwb(*args: str, cache: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTXWB_CACHE": str(cache)}
    command = [sys.executable, "-c", "from workbench.cli.main import main; main()", *args]
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=600, check=False
    )


@needs_nvcc
def test_passing_kernel_exits_0_with_a_table(cache: Path) -> None:
    done = ptxwb("eval", str(KERNELS / "wgmma_gemm.cu"), "--task", TASK, "--target", "hopper", cache=cache)
    assert done.returncode == 0, done.stderr
    for word in ("build", "static", "correctness", "not run", "GMMA"):
        assert word in done.stdout


@needs_nvcc
def test_failed_verdict_exits_1_and_json_is_an_eval_result(cache: Path) -> None:
    done = ptxwb("eval", str(KERNELS / "mma_sync_gemm.cu"), "--task", TASK, "--json", cache=cache)
    assert done.returncode == 1, done.stderr
    result = EvalResult.model_validate(json.loads(done.stdout))
    assert result.status == Status.static_missing_family
    assert result.stages.correctness.status == Status.not_run
    # No folder of this machine: the build's files by cache key, the nvcc line and ptxas report scrubbed.
    assert result.stages.build.library_path and result.stages.build.library_path.startswith("cache:")
    for folder in (str(cache), str(KERNELS), str(Path.home()), sys.prefix):
        assert folder not in done.stdout


@needs_nvcc
def test_solution_json_is_accepted_and_its_definition_is_the_task(cache: Path) -> None:
    done = ptxwb("eval", str(KERNELS / "wgmma_solution.json"), "--json", cache=cache)
    assert done.returncode == 0, done.stderr
    result = EvalResult.model_validate(json.loads(done.stdout))
    assert result.task == TASK and result.stages.static.required_present


@needs_nvcc
def test_source_from_stdin_and_task_from_a_definition_path(cache: Path) -> None:
    definition = Path(__file__).resolve().parent.parent / "tasks" / "definitions" / f"{TASK}.json"
    source = (KERNELS / "wgmma_gemm.cu").read_text()
    done = ptxwb("eval", "-", "--task", str(definition), "--feedback", cache=cache, stdin=source)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Verdict: not run") and "required GMMA: present" in done.stdout


def test_banned_kernel_exits_1_without_compiling(tmp_path: Path) -> None:
    done = ptxwb("eval", str(KERNELS / "banned_cublas.cu"), "--task", TASK, cache=tmp_path)
    assert done.returncode == 1
    assert "banned" in done.stdout and "[cublas]" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.cu", "--task", TASK], "missing.cu: no such file"),
        ([str(KERNELS / "wgmma_gemm.cu"), "--task", "gemm_nope"], "unknown task 'gemm_nope'"),
        ([str(KERNELS / "wgmma_gemm.cu"), "--task", TASK, "--target", "ampere"], "unknown target 'ampere'"),
        ([str(KERNELS / "wgmma_gemm.cu"), "--task", TASK, "--executor", "cloud"], "unknown executor 'cloud'"),
        ([str(KERNELS / "wgmma_gemm.cu")], "--task is required"),
        ([str(KERNELS / "wgmma_gemm.cu"), "--task", TASK, "--workload", "zzzz"], "no single workload"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = ptxwb("eval", *args, cache=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["spec"].update(binding="torch"), "only tvm-ffi"),
        (lambda s: s["spec"].update(language="triton"), "only cuda/cpp"),
        (lambda s: s["spec"].update(entry_point="main.cu"), "file::symbol"),
        (lambda s: s["spec"].update(dependencies=["cublas"]), "not allowed"),
        (lambda s: s["sources"][1].update(path="../escape.cuh"), "without '..'"),
        (lambda s: s.pop("sources"), "field sources"),
    ],
)
def test_bad_solution_json_exits_2(mutate, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    solution = json.loads((KERNELS / "wgmma_solution.json").read_text())
    mutate(solution)
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(solution))
    done = ptxwb("eval", str(path), cache=tmp_path)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr


def test_malformed_json_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    done = ptxwb("eval", str(path), "--task", TASK, cache=tmp_path)
    assert done.returncode == 2 and "malformed JSON" in done.stderr
