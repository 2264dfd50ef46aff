"""The `ssh://[user@]host[:port]` executor: the same worker on another machine, over OpenSSH.

The remote host needs the workbench installed (with nvcc and cuobjdump for the build and static tiers,
and torch, apache-tvm-ffi, cupti-python and ncu for the GPU tiers). The source travels over a second ssh
connection to `python -m workbench.evaluate.remote_build`, which builds it there and runs the static
tier; the GPU tiers come back from the worker as JSON lines on ssh's stdout. The remote Python
is `python3` unless `?python=/path/to/python` follows the address or `PTXWB_SSH_PYTHON` names it.
Authentication is OpenSSH's own (keys, agent, ~/.ssh/config); the workbench never sees a secret.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from workbench.errors import UserError
from workbench.evaluate.build.abi import abi_checked
from workbench.evaluate.gpu_executor import GpuExecutor, GpuRun
from workbench.evaluate.pipeline import StageFunction
from workbench.evaluate.remote_build import MODULE as REMOTE_BUILD
from workbench.evaluate.remote_build import BuildRequest, RemoteBuildError, RemoteBuilt, build_remotely
from workbench.evaluate.request import StageName
from workbench.evaluate.result import BuildStage, EvalResult, StageBase, StaticStage, Status
from workbench.evaluate.worker_client import WorkerClient
from workbench.tasks import Target

# A user or host never begins with `-` (ssh would read it as an option, `-oProxyCommand=…`) nor holds
# white space.
_ADDRESS = re.compile(
    r"^ssh://(?:(?P<user>[^@/:?\s-][^@/:?\s]*)@)?(?P<host>[^@/:?\s-][^@/:?\s]*)"
    r"(?::(?P<port>\d+))?/?(?:\?(?P<query>.*))?$"
)


@dataclass(frozen=True)
class SshAddress:
    host: str
    user: str | None = None
    port: int | None = None
    python: str = "python3"

    @property
    def label(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{self.host}{port}"


def parse_address(spec: str) -> SshAddress:
    match = _ADDRESS.match(spec)
    if match is None:
        raise UserError(f"bad executor {spec!r}: expected ssh://[user@]host[:port]")
    query = parse_qs(match.group("query") or "")
    python = (query.get("python") or [os.environ.get("PTXWB_SSH_PYTHON", "python3")])[0]
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise UserError(f"bad executor {spec!r}: port {port} is out of range")
    return SshAddress(host=match.group("host"), user=match.group("user"), port=port, python=python)


def ssh_command(
    address: SshAddress, ssh_options: list[str] | None = None, module: str = "workbench.evaluate.gpu.worker"
) -> list[str]:
    """OpenSSH in batch mode (never prompts), running `module` (the worker) with the remote Python."""
    command = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=30"]
    if address.port:
        command += ["-p", str(address.port)]
    command += list(ssh_options or [])
    command.append(f"{address.user}@{address.host}" if address.user else address.host)
    command += [address.python, "-m", module]
    return command


class SshExecutor(GpuExecutor):
    """The GPU host builds too: the library the worker loads must be one that host holds."""

    def __init__(self, spec: str, ssh_options: list[str] | None = None) -> None:
        self.address = parse_address(spec)
        self.name = self.address.label
        self.ssh_options = list(ssh_options or [])
        super().__init__(WorkerClient(ssh_command(self.address, self.ssh_options)))

    async def build(self, source: str, target: Target, timeout_s: float) -> RemoteBuilt:
        """Build and static tier on the GPU host (raises RemoteBuildError when no reply comes)."""
        command = ssh_command(self.address, self.ssh_options, module=REMOTE_BUILD)
        return await build_remotely(command, BuildRequest(source=source, target=target, timeout_s=timeout_s))

    def _cuda_steps(self, run: GpuRun) -> list[tuple[StageName, StageFunction]]:
        """A .cu candidate built and checked on the GPU host, where the worker loads it."""

        async def build_there(_: EvalResult) -> StageBase:
            hello = self.client.hello or {}
            run.result.device = ", ".join(hello.get("gpus") or []) or None
            request = run.request
            try:
                built = await self.build(request.source, run.target, request.compile_timeout_s)
            except RemoteBuildError as exc:
                return BuildStage(status=Status.infrastructure_error, message=f"remote build: {exc}")
            run.static, run.kernels = built.static, built.kernels
            return abi_checked(built.build, request.source, run.task.definition)

        async def static_there(_: EvalResult) -> StageBase:
            if run.static is None:  # the far side ran none though its build passed: outside the protocol
                return StaticStage(status=Status.infrastructure_error, message="remote build: no static tier")
            return run.static

        return [("build", build_there), ("static", static_there)]
