"""The build and static tiers on the GPU host, for the ssh executor (its GPU host compiles).

`python -m workbench.evaluate.remote_build` reads one request as JSON on stdin and writes one reply as
JSON on stdout; bad input is one line on stderr and exit status 2. Its own process, not a request to
the worker: it needs the workbench's build stack (pydantic among it), which the GPU side never imports
(tests/test_import_guards.py).

Request: `{"source": str, "target": str, "required_family"?: str | null, "timeout_s"?: number}`.
Reply: `{"build": BuildStage, "static": StaticStage | null, "kernels": [str] | null}` (the stages in
`EvalResult`'s JSON shape; static and kernels only for a passed build).

`build_remotely` is the host's side: it runs this module through a command (ssh to the GPU host).
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from dataclasses import dataclass
from typing import TextIO

from pydantic import ValidationError

from workbench.errors import UserError
from workbench.evaluate.build.nvcc import build, with_negated
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.gpu.protocol import BUILD_MARGIN_S
from workbench.evaluate.result import BuildStage, StaticStage, Status
from workbench.tasks import Target, get_target

MODULE = "workbench.evaluate.remote_build"
DEFAULT_TIMEOUT_S = 180.0
_FIELDS = ("source", "target", "required_family", "timeout_s")


class BadRequest(ValueError):
    """A request this module cannot serve: the one line it prints."""


class RemoteBuildError(RuntimeError):
    """The remote build gave no reply the host can read (the host unreachable, a crash, a timeout)."""


@dataclass(frozen=True)
class BuildRequest:
    source: str
    target: Target  # with the family the task requires resolved by the host, as the GPU tiers' spec is
    timeout_s: float = DEFAULT_TIMEOUT_S

    def encode(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "target": self.target.name,
                "required_family": self.target.required_family,
                "timeout_s": self.timeout_s,
            }
        )

    @classmethod
    def decode(cls, text: str) -> BuildRequest:
        try:
            message = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"the request is not JSON: {exc}") from None
        if not isinstance(message, dict):
            raise BadRequest(f"the request is a JSON {type(message).__name__}, not an object")
        unknown = sorted(set(message) - set(_FIELDS))
        if unknown:
            raise BadRequest(f"unknown field {unknown[0]!r} (the fields: {', '.join(_FIELDS)})")
        source, target_name = message.get("source"), message.get("target")
        if not isinstance(source, str) or not source.strip():
            raise BadRequest("'source' must be the candidate's source, a non-empty string")
        if not isinstance(target_name, str):
            raise BadRequest("'target' must be a target's name, a string")
        try:
            target = get_target(target_name)
        except UserError as exc:
            raise BadRequest(str(exc)) from None
        family = message.get("required_family")
        if family is not None:
            if not isinstance(family, str) or not family:
                raise BadRequest("'required_family' must be an instruction family's name, a string")
            target = target.model_copy(update={"required_family": family})
        timeout_s = message.get("timeout_s", DEFAULT_TIMEOUT_S)
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not 0 < timeout_s < math.inf
        ):
            raise BadRequest(f"'timeout_s' must be a positive number of seconds (got {timeout_s!r})")
        return cls(source=source, target=target, timeout_s=float(timeout_s))


@dataclass(frozen=True)
class RemoteBuilt:
    build: BuildStage
    static: StaticStage | None = None
    kernels: list[str] | None = None

    def encode(self) -> str:
        return json.dumps(
            {
                "build": self.build.model_dump(mode="json"),
                "static": None if self.static is None else self.static.model_dump(mode="json"),
                "kernels": self.kernels,
            }
        )

    @classmethod
    def decode(cls, text: str) -> RemoteBuilt:
        try:
            message = json.loads(text)
            static = message["static"]
            return cls(
                build=BuildStage.model_validate(message["build"]),
                static=None if static is None else StaticStage.model_validate(static),
                kernels=message["kernels"],
            )
        except (json.JSONDecodeError, TypeError, KeyError, ValidationError) as exc:
            raise RemoteBuildError(f"the reply cannot be read: {type(exc).__name__}: {exc}") from None


async def remote_build(request: BuildRequest) -> RemoteBuilt:
    """Build + static tier here, the SASS checked for the family the request names."""
    built = await build(request.source, request.target, request.timeout_s, None)
    if built.status != Status.passed:
        return RemoteBuilt(build=built)
    static, built = await asyncio.gather(
        static_stage(built, request.target), with_negated(built, request.target)
    )
    kernels = module_kernels(built.library_path, static.sass_path) if built.library_path else None
    return RemoteBuilt(build=built, static=static, kernels=kernels)


async def build_remotely(command: list[str], request: BuildRequest) -> RemoteBuilt:
    """Run this module through `command` (e.g. `ssh HOST python -m workbench.evaluate.remote_build`)."""
    timeout_s = request.timeout_s + BUILD_MARGIN_S
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(request.encode().encode()), timeout=timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise RemoteBuildError(f"no reply within {timeout_s:g} s") from None
    if process.returncode != 0:
        lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
        detail = f": {lines[-1][:300]}" if lines else ""
        raise RemoteBuildError(f"exited with status {process.returncode}{detail}")
    # The reply is the last line: anything a tool printed before it is not the protocol's.
    lines = out.decode(errors="replace").strip().splitlines()
    return RemoteBuilt.decode(lines[-1] if lines else "")


def main(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    try:
        request = BuildRequest.decode(stdin.read())
    except BadRequest as exc:
        print(f"remote_build: {exc}", file=stderr)
        return 2
    stdout.write(asyncio.run(remote_build(request)).encode() + "\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
