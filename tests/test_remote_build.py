"""`python -m workbench.evaluate.remote_build`: the ssh executor's build and static tiers, run on the GPU
host as their own process (request JSON on stdin, reply JSON on stdout), and the host's side of it.

Here the "GPU host" is this machine: the module runs as the ssh executor runs it, without ssh
(tests/test_ssh_executor.py runs it through a real sshd)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import needs_nvcc, session_cache

from workbench.evaluate.remote_build import (
    MODULE,
    BuildRequest,
    RemoteBuildError,
    build_remotely,
)
from workbench.evaluate.result import Status
from workbench.tasks import get_target

KERNEL = Path(__file__).parent / "gpu" / "kernels" / "wgmma_gemm.cu"


def run_module(stdin: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", MODULE],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PTXWB_CACHE": str(cache)},
    )


@pytest.mark.parametrize(
    ("stdin", "line"),
    [
        ("", "the request is not JSON: "),
        ("{not json", "the request is not JSON: "),
        ("[1, 2]", "the request is a JSON list, not an object"),
        ('{"target": "hopper"}', "'source' must be the candidate's source, a non-empty string"),
        ('{"source": "  ", "target": "hopper"}', "'source' must be the candidate's source"),
        ('{"source": "x"}', "'target' must be a target's name, a string"),
        ('{"source": "x", "target": "volta"}', "unknown target 'volta'; choose one of: "),
        ('{"source": "x", "target": "hopper", "required_family": 3}', "'required_family' must be"),
        ('{"source": "x", "target": "hopper", "timeout_s": 0}', "'timeout_s' must be a positive number"),
        ('{"source": "x", "target": "hopper", "timeout_s": "9"}', "'timeout_s' must be a positive number"),
        ('{"source": "x", "target": "hopper", "timeout_s": true}', "'timeout_s' must be a positive number"),
        ('{"source": "x", "target": "hopper", "op": "build"}', "unknown field 'op' (the fields: "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(stdin: str, line: str, tmp_path: Path) -> None:
    done = run_module(stdin, tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(f"remote_build: {line}"), done.stderr


def test_a_request_round_trips_with_the_family_the_host_resolved() -> None:
    target = get_target("hopper").model_copy(update={"required_family": "QGMMA"})
    request = BuildRequest(source="src", target=target, timeout_s=12.5)
    assert BuildRequest.decode(request.encode()) == request
    assert json.loads(request.encode()) == {
        "source": "src",
        "target": "hopper",
        "required_family": "QGMMA",
        "timeout_s": 12.5,
    }


@needs_nvcc
def test_the_module_builds_and_runs_the_static_tier(tmp_path_factory: pytest.TempPathFactory) -> None:
    request = {"source": KERNEL.read_text(), "target": "hopper", "timeout_s": 300}
    done = run_module(json.dumps(request), session_cache(tmp_path_factory))
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["build"]["status"] == "passed", reply["build"]["message"]
    assert reply["static"]["status"] == "passed" and reply["static"]["required_present"]
    assert reply["kernels"] == ["_Z17wgmma_gemm_kernel14CUtensorMap_stS_P13__nv_bfloat16iii"]
    # Its wgmma.m64n256k16's FLOPs per thread, in the static tier the host hands the worker's spec.
    assert reply["static"]["mma_flops_per_thread"] == {"HGMMA": 2 * 64 * 256 * 16 / 128}
    assert Path(reply["build"]["library_path"]).is_file()


@needs_nvcc
def test_the_host_side_checks_the_sass_for_the_family_it_says_the_task_requires(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bf16 wgmma GEMM holds GMMA (HGMMA) but no QGMMA: an FP8 task's static tier fails it there too.
    monkeypatch.setenv("PTXWB_CACHE", str(session_cache(tmp_path_factory)))
    target = get_target("hopper").model_copy(update={"required_family": "QGMMA"})
    request = BuildRequest(source=KERNEL.read_text(), target=target, timeout_s=300)
    built = asyncio.run(build_remotely([sys.executable, "-m", MODULE], request))
    assert built.build.status == Status.passed, built.build.message
    assert built.static is not None and built.static.required_family == "QGMMA"
    assert built.static.status == Status.static_missing_family and "HGMMA" in built.static.message
    assert not built.static.required_present and built.kernels


def test_a_failing_build_host_is_one_line_for_the_verdict() -> None:
    request = BuildRequest(source="x", target=get_target("hopper"))
    with pytest.raises(RemoteBuildError, match=r"^exited with status 3: gone$"):
        command = [sys.executable, "-c", "import sys; print('gone', file=sys.stderr); sys.exit(3)"]
        asyncio.run(build_remotely(command, request))
    with pytest.raises(RemoteBuildError, match=r"^the reply cannot be read: "):
        asyncio.run(build_remotely([sys.executable, "-c", "print('{}')"], request))
