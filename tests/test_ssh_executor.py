"""The `ssh://` executor against a real OpenSSH server on localhost, on the static path.

The test starts its own `sshd` on a free port with a throwaway host key and an authorized key for the
current user, then evaluates real kernels through `ssh://user@127.0.0.1:PORT`: the worker runs on the
far side of ssh, `python -m workbench.evaluate.remote_build` builds with nvcc and runs the static tier
there; with no GPU there, evaluating is refused in one line naming the host. Skipped, with the reason, where sshd is not installed (Debian: openssh-server).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from build_support import needs_nvcc, session_cache

from workbench.errors import UserError
from workbench.evaluate.remote_build import RemoteBuildError, RemoteBuilt
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.evaluate.ssh_executor import SshExecutor, parse_address, ssh_command
from workbench.tasks import get_target

KERNELS = Path(__file__).parent / "gpu" / "kernels"
SSHD = shutil.which("sshd") or next(
    (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if Path(p).is_file()), None
)
TASK = "gemm_n7168_k5120"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    if SSHD is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH server not installed (Debian: apt-get install openssh-server)")
    home = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / name)], check=True)
    (home / "authorized_keys").write_text((home / "client_key.pub").read_text())
    os.chmod(home / "authorized_keys", 0o600)
    port = free_port()
    config = home / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {home / 'host_key'}",
                f"AuthorizedKeysFile {home / 'authorized_keys'}",
                f"PidFile {home / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "StrictModes no",
                "UsePAM no",
                "AcceptEnv PTXWB_*",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.skip(f"sshd could not start here: {server.stderr.read().strip()[:300]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    options = [
        "-i",
        str(home / "client_key"),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        f"SetEnv=PTXWB_CACHE={session_cache(tmp_path_factory)}",  # the far side shares the run's builds
    ]
    yield port, options
    server.terminate()
    server.wait(timeout=30)


def executor_for(port: int, options: list[str]) -> SshExecutor:
    return SshExecutor(f"ssh://{getpass.getuser()}@127.0.0.1:{port}?python={sys.executable}", options)


def evaluate(executor: SshExecutor, source: str) -> object:
    async def go():
        try:
            return await executor.evaluate(EvalRequest(task=TASK, target="hopper", source=source))
        finally:
            await executor.close()

    return asyncio.run(go())


def test_addresses_parse_into_an_ssh_command() -> None:
    address = parse_address("ssh://alice@gpu-7:2200?python=/opt/venv/bin/python")
    assert (address.user, address.host, address.port, address.python) == (
        "alice",
        "gpu-7",
        2200,
        "/opt/venv/bin/python",
    )
    command = ssh_command(address)
    assert command[:5] == ["ssh", "-T", "-o", "BatchMode=yes", "-o"]
    assert command[-4:] == ["alice@gpu-7", "/opt/venv/bin/python", "-m", "workbench.evaluate.gpu.worker"]
    assert parse_address("ssh://box").label == "ssh://box"
    build = ssh_command(address, ["-i", "key"], module="workbench.evaluate.remote_build")
    assert build[-6:] == [
        "-i",
        "key",
        "alice@gpu-7",
        "/opt/venv/bin/python",
        "-m",
        "workbench.evaluate.remote_build",
    ]


def far_side_build(port: int, options: list[str], source: str) -> RemoteBuilt:
    """The remote build over ssh: build and static tier on the far side, as `evaluate` asks."""
    return asyncio.run(executor_for(port, options).build(source, get_target("hopper"), 300))


def test_a_far_side_without_a_gpu_is_refused_in_one_line_naming_it(sshd) -> None:
    port, options = sshd
    executor = executor_for(port, options)
    with pytest.raises(UserError, match=r"--executor ssh://.*: no NVIDIA GPU on \S+ .*--executor static"):
        evaluate(executor, (KERNELS / "wgmma_gemm.cu").read_text())


@needs_nvcc
@pytest.mark.slow  # the remote build module is also run locally in test_remote_build
def test_a_kernel_is_built_and_judged_statically_on_the_far_side(sshd) -> None:
    port, options = sshd
    built = far_side_build(port, options, (KERNELS / "wgmma_gemm.cu").read_text())
    assert built.build.status == Status.passed, built.build.message
    assert built.static is not None
    assert built.static.status == Status.passed and built.static.required_present
    assert built.kernels and all(name.startswith("_Z") for name in built.kernels)


@needs_nvcc
@pytest.mark.slow
def test_the_far_side_reports_a_failing_static_tier(sshd) -> None:
    port, options = sshd
    built = far_side_build(port, options, (KERNELS / "simt_gemm.cu").read_text())
    assert built.static is not None and built.static.status == Status.static_missing_family
    assert "FFMA" in built.static.message


def test_an_unreachable_build_host_is_one_line(sshd) -> None:
    _, options = sshd
    with pytest.raises(RemoteBuildError, match=r"^exited with status 255: "):
        far_side_build(free_port(), options, (KERNELS / "wgmma_gemm.cu").read_text())


def test_an_unreachable_host_is_an_infrastructure_error(sshd) -> None:
    _, options = sshd
    result = evaluate(executor_for(free_port(), options), (KERNELS / "wgmma_gemm.cu").read_text())
    assert result.status == Status.infrastructure_error
    assert "worker exited" in result.stages.build.message


@pytest.mark.parametrize(
    "spec",
    [
        "ssh://-oProxyCommand=touch$IFS.x",
        "ssh://-oProxyCommand=x@host",
        "ssh://gpu 7",
        "ssh://",
        "ssh://h:abc",
    ],
)
def test_an_address_ssh_would_read_as_an_option_is_refused(spec: str) -> None:
    with pytest.raises(UserError, match="expected ssh://"):
        parse_address(spec)
