"""`--language triton` at the command line and in sweep specs: a .py file judged by the static
executor, bad input as one line and exit 2, a Triton sweep whose sessions record the language."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import answer, write_script
from build_support import session_cache

from workbench.bench.folder import SweepFolder
from workbench.bench.runner import SweepRunner
from workbench.bench.spec import parse_spec
from workbench.errors import UserError
from workbench.session import read_session

PTXWB = Path(sys.executable).parent / "ptxwb"
KERNEL = Path(__file__).parent / "data" / "triton" / "copy_no_dot.py"
GEMM = "gemm_n7168_k5120"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def ptxwb(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTXWB_CACHE": str(cache)}
    return subprocess.run(
        [str(PTXWB), *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_eval_takes_a_py_file_as_triton(cache: Path) -> None:
    pytest.importorskip("triton")
    done = ptxwb("eval", str(KERNEL), "--task", GEMM, "--json", cache=cache)
    assert done.returncode == 1, done.stderr  # a verdict: no tensor-core instruction
    result = json.loads(done.stdout)
    assert result["status"] == "static_missing_family"
    assert result["stages"]["build"]["toolchain"].startswith("triton ")
    forced = ptxwb("eval", "-", "--task", GEMM, "--language", "cuda", "--feedback", cache=cache)
    assert forced.returncode == 2 and "standard input held no source" in forced.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["eval", str(KERNEL), "--task", GEMM, "--executor", "ssh://h"],
        ["eval", str(KERNEL), "--task", GEMM, "--language", "fortran"],
        [
            "run",
            "--task",
            GEMM,
            "--model",
            "scripted:none.json",
            "--language",
            "triton",
            "--executor",
            "ssh://h",
        ],
        ["author", str(KERNEL), "--task", GEMM, "--executor", "ssh://h"],
    ],
    ids=["eval-ssh", "eval-language", "run-ssh", "author-ssh"],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], cache: Path) -> None:
    done = ptxwb(*args, cache=cache)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def spec_text(executor: str = "static") -> str:
    return (
        'name = "triton"\nmodels = ["scripted:answers.json"]\ntasks = ["gemm_n7168_k5120"]\n'
        f'trajectories = 1\nturns = 1\nexecutor = "{executor}"\nlanguage = "triton"\n'
        '[[variants]]\nname = "pack"\n'
    )


def test_a_triton_sweep_runs_where_triton_builds(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="a triton sweep runs on the static or local executor"):
        parse_spec(spec_text("ssh://gpu-host"), "spec.toml", tmp_path)
    assert parse_spec(spec_text(), "spec.toml", tmp_path).language == "triton"
    assert parse_spec(spec_text("local"), "spec.toml", tmp_path).executors == ["local"]
    cuda = spec_text().replace('language = "triton"\n', "")
    assert parse_spec(cuda, "spec.toml", tmp_path).language == "cuda"


async def test_a_triton_sweep_records_the_language(tmp_path: Path, cache: Path) -> None:
    pytest.importorskip("triton")
    write_script(tmp_path / "answers.json", [answer(KERNEL.read_text(), tag="python")])
    text = spec_text()
    folder = SweepFolder(tmp_path / "sweep")
    summary = await SweepRunner(folder, parse_spec(text, "spec.toml", tmp_path), cache_dir=cache).run(
        text, resume=False
    )
    assert summary.end_reasons == {"turn_limit": 1}
    (session_file,) = (folder.root / "sessions").rglob("*.jsonl")
    session = read_session(session_file)
    assert session.start.settings["language"] == "triton"
    assert (session.start.pack_id or "").startswith("hopper:triton@")


def test_pack_show_lists_the_triton_section(cache: Path) -> None:
    done = ptxwb("pack", "show", "hopper", "--language", "triton", "--json", cache=cache)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["id"].startswith("hopper:triton@")
    assert [f["path"] for f in stats["files"]][:2] == ["common/triton_contract.md", "hopper/triton.md"]
