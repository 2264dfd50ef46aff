"""The `ssh://[user@]host[:port]` executor: the same worker on another machine, over OpenSSH.

The remote host needs the workbench installed (with nvcc and cuobjdump for the build and static tiers,
and torch, apache-tvm-ffi, cupti-python and ncu for the GPU tiers). The source travels in the request,
the remote host builds it, and everything comes back as JSON lines on ssh's stdout. The remote Python
is `python3` unless `?python=/path/to/python` follows the address or `PTXWB_SSH_PYTHON` names it.
Authentication is OpenSSH's own (keys, agent, ~/.ssh/config); the workbench never sees a secret.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from workbench.errors import UserError
from workbench.evaluate.gpu_executor import GpuExecutor
from workbench.evaluate.worker_client import WorkerClient

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


def ssh_command(address: SshAddress, ssh_options: list[str] | None = None) -> list[str]:
    """OpenSSH in batch mode (never prompts), running the worker with the remote Python."""
    command = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=30"]
    if address.port:
        command += ["-p", str(address.port)]
    command += list(ssh_options or [])
    command.append(f"{address.user}@{address.host}" if address.user else address.host)
    command += [address.python, "-m", "workbench.evaluate.gpu.worker"]
    return command


class SshExecutor(GpuExecutor):
    remote_build = True

    def __init__(self, spec: str, ssh_options: list[str] | None = None) -> None:
        self.address = parse_address(spec)
        self.name = self.address.label
        super().__init__(WorkerClient(ssh_command(self.address, ssh_options)))
