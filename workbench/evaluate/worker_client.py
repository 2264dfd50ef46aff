"""The host's side of the worker protocol: one long-lived worker process, JSON lines both ways.

The same client drives a local worker (`python -m workbench.evaluate.gpu.worker`) and a remote one over
OpenSSH (`ssh host python -m workbench.evaluate.gpu.worker`): only the command differs. `WorkerConnection`
is what an executor needs of any way to a worker; the per-user service's client (`service_client.py`) is
the other.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import cast

from workbench.evaluate.gpu.protocol import (
    GPU_STAGES,
    STAGE_MARGIN_S,
    HostRequest,
    ProtocolError,
    TimeLimits,
    decode_host,
    encode_host,
)

# A reply line can carry a whole EvalResult stage; asyncio's default 64 KiB line limit is too small.
LINE_LIMIT = 64 * 1024 * 1024
STDERR_KEPT = 64 * 1024  # the end of the worker's stderr, to say why it exited


class WorkerError(RuntimeError):
    """The worker is gone or answered outside the protocol."""


def final_reply(reply: object, request_id: int, on_progress: Callable[[dict], None] | None) -> dict | None:
    """The request's final reply, or None to read on (another request's line, or a progress event,
    handed to `on_progress`); an error reply raises WorkerError with its message."""
    if not isinstance(reply, dict) or reply.get("id") != request_id:
        return None
    if reply.get("type") == "progress":
        if on_progress is not None:
            on_progress(reply)
        return None
    if reply.get("type") == "error":
        raise WorkerError(reply.get("message", "worker error"))
    return reply


class WorkerConnection(ABC):
    """A way to one worker: `start` (its hello), one request at a time, `close`."""

    hello: dict | None = None

    @abstractmethod
    async def start(self) -> dict: ...

    @abstractmethod
    async def request(
        self, message: dict, timeout_s: float, on_progress: Callable[[dict], None] | None = None
    ) -> dict:
        """Send one request; return its final reply (progress events go to `on_progress`)."""

    @abstractmethod
    async def close(self) -> None: ...

    async def close_unusable(self) -> None:
        """Close a worker found unable to serve this host's GPU tiers (it has no GPU)."""
        await self.close()

    async def evaluate_library(
        self,
        library: str,
        spec: dict,
        kernels: list[str] | None = None,
        stages: Sequence[str] = GPU_STAGES,
        timeouts: dict[str, float] | None = None,
        on_progress: Callable[[dict], None] | None = None,
        **settings: object,
    ) -> dict:
        """The GPU tiers of an already built library in one request (no ban scan, no static tier):
        `{"stages": {name: stage dict}, "device", "trace"}`. For tests, benchmarks and bare GPU hosts."""
        await self.start()
        try:
            limits = TimeLimits.of(timeouts)
        except ProtocolError as exc:
            raise WorkerError(str(exc)) from None
        return await self.request(
            {
                "op": "evaluate",
                "library": library,
                "kernels": kernels,
                "spec": spec,
                "stages": list(stages),
                "timeouts": limits.wire(),
                **settings,
            },
            # The worker's own limits run out first, so its status (which names what) arrives.
            timeout_s=limits.start_s + limits.dynamic_s + limits.sanitize_s + STAGE_MARGIN_S,
            on_progress=on_progress,
        )


class WorkerClient(WorkerConnection):
    """A worker process of this client's own, started on first use."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.env = env
        self._process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.hello = None
        self._stderr = bytearray()
        self._drain: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether its worker process is up (it may be restarted by the next `start`)."""
        return self._process is not None and self._process.returncode is None

    async def start(self) -> dict:
        if self._process is not None and self._process.returncode is None and self.hello is not None:
            return self.hello
        self._process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            limit=LINE_LIMIT,
        )
        self._stderr.clear()
        self._drain = asyncio.create_task(self._keep_stderr(self._process))
        self.hello = await self.request({"op": "hello"}, timeout_s=120)
        return self.hello

    async def _keep_stderr(self, process: asyncio.subprocess.Process) -> None:
        """Read the worker's stderr as it comes, keeping its end: a worker that lives for hours (a
        sweep's, the service's) must neither grow the stream's buffer (up to twice LINE_LIMIT) nor
        block once it is full."""
        if process.stderr is None:
            return
        while chunk := await process.stderr.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_KEPT]

    async def request(
        self, message: dict, timeout_s: float, on_progress: Callable[[dict], None] | None = None
    ) -> dict:
        async with self._lock:
            process = self._process
            if (
                process is None
                or process.returncode is not None
                or process.stdin is None
                or process.stdout is None
            ):
                raise WorkerError(await self._why_gone())
            request_id = next(self._ids)
            try:
                encoded = encode_host(cast(HostRequest, {**message, "id": request_id}))
            except ProtocolError as exc:
                raise WorkerError(f"the request is not the worker's protocol: {exc}") from None
            process.stdin.write((encoded + "\n").encode())
            try:
                await process.stdin.drain()
                while True:
                    line = await asyncio.wait_for(process.stdout.readline(), timeout=timeout_s)
                    if not line:
                        raise WorkerError(await self._why_gone())
                    reply = final_reply(json.loads(line), request_id, on_progress)
                    if reply is None:
                        continue
                    try:
                        decode_host(reply)
                    except ProtocolError as exc:
                        raise WorkerError(f"the worker's reply: {exc}") from None
                    return reply
            except TimeoutError:
                await self.close()
                raise WorkerError(f"the worker did not answer within {timeout_s:g} s") from None
            except (BrokenPipeError, ConnectionResetError):  # it exited before reading the request
                raise WorkerError(await self._why_gone()) from None
            except json.JSONDecodeError as exc:
                raise WorkerError(f"the worker connection broke: {exc}") from None

    async def _why_gone(self) -> str:
        process = self._process
        if process is None:
            return "the worker is not started"
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
            if self._drain is not None:
                await asyncio.wait_for(asyncio.shield(self._drain), timeout=5)
        except TimeoutError:
            pass
        lines = [line for line in self._stderr.decode(errors="replace").splitlines() if line.strip()]
        detail = f": {lines[-1][:300]}" if lines else ""
        return f"the worker exited (status {process.returncode}){detail}"

    async def close(self) -> None:
        process, self._process = self._process, None
        drain, self._drain = self._drain, None
        self.hello = None
        if process is not None and process.returncode is None:
            try:
                if process.stdin is not None:
                    process.stdin.write((encode_host({"op": "shutdown"}) + "\n").encode())
                    await process.stdin.drain()
                    process.stdin.close()
                await asyncio.wait_for(process.wait(), timeout=30)
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                process.kill()
                await process.wait()
        if drain is not None:
            drain.cancel()
