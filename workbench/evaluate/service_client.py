"""A command's way to the per-user worker service (`worker_service.py`): connect, starting the service
first when none is there (or the one there runs other code), then speak the worker's protocol through it.

Start-up is serialised by a lock file in the private folder, so two commands started together make one
service. The service gets this command's environment without its secrets (a variable named like a key,
token or password): it outlives the command, and the candidates it runs must never read them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from workbench.errors import UserError
from workbench.evaluate.gpu.protocol import ProtocolError
from workbench.evaluate.service_paths import (
    ServiceFolderError,
    checked_socket,
    code_identity,
    gpu_label,
    served_gpus,
    service_folder,
    socket_path,
)
from workbench.evaluate.service_protocol import Forward, ServiceCommand, decode_reply, encode_command
from workbench.evaluate.worker_client import LINE_LIMIT, WorkerConnection, WorkerError, final_reply
from workbench.secrets import is_secret_name

IDLE_ENV = "PTXWB_WORKER_IDLE_S"
NO_SERVICE_ENV = "PTXWB_NO_WORKER_SERVICE"
DEFAULT_IDLE_S = 900.0  # fifteen minutes: a person reading a verdict and saving again keeps it warm
START_WAIT_S = 60.0  # the service's own start (its socket), not the worker's (hello waits for that)
STOP_WAIT_S = 10.0  # a stopping service removes its socket first thing: this bounds a stuck one
LOG_LIMIT = 1 << 20
HELLO_TIMEOUT_S = 180.0  # the worker's start behind the service: Python, torch's import, nvidia-smi


def service_wanted() -> bool:
    """Whether commands go through the service (`PTXWB_NO_WORKER_SERVICE=1` keeps one worker each)."""
    return os.environ.get(NO_SERVICE_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


def idle_limit_s() -> float:
    value = os.environ.get(IDLE_ENV)
    if value is None:
        return DEFAULT_IDLE_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UserError(f"{IDLE_ENV} must be a number of seconds above zero, not {value!r}")
    return seconds


def service_environment(visible: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not is_secret_name(name)}
    env["CUDA_VISIBLE_DEVICES"] = visible
    return env


class ServiceClient(WorkerConnection):
    """The worker behind this user's service for `gpu` (None: as `served_gpus` says)."""

    def __init__(self, gpu: str | None = None, idle_s: float | None = None) -> None:
        self.visible = served_gpus(gpu)
        self.label = gpu_label(self.visible)
        self.idle_s = idle_s if idle_s is not None else idle_limit_s()  # bad input is said before any work
        self.hello = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def start(self) -> dict:
        if self._writer is not None and not self._writer.is_closing() and self.hello is not None:
            return self.hello
        try:
            folder = service_folder()
            path = socket_path(folder, self.label)
            hello = await self._connect_current(folder, path)
        except ServiceFolderError as exc:
            raise WorkerError(str(exc)) from None
        self.hello = hello
        return hello

    @classmethod
    def for_label(cls, label: str) -> ServiceClient:
        """A client of the running service with this label (for `ptxwb worker`); it never starts one, so
        no idle limit is read for it (a bad one must not keep `ptxwb worker stop` from working)."""
        client = cls(idle_s=DEFAULT_IDLE_S)
        client.label = label
        return client

    async def connect_existing(self) -> bool:
        """Connected to the running service with this label, if one is there; none is started."""
        return await self._try_connect(socket_path(service_folder(), self.label), clear_stale=False)

    async def _connect_current(self, folder: Path, path: Path) -> dict:
        """Connected to a service running this code: the one there, or one started now."""
        identity = code_identity()
        async with _StartLock(folder):
            if await self._try_connect(path):
                hello = await self._hello()
                if (hello.get("service") or {}).get("identity") == identity:
                    return hello
                await self.stop_service()  # another install's or an older edit's: replace it
                await _gone(path)
            self._spawn(folder, path)
            await self._wait_for_start(path)
        return await self._hello()

    async def _wait_for_start(self, path: Path) -> None:
        """Connected to the service just started at `path`. Its socket is refused for a moment between
        its bind and its listen: taking that for a dead one's and removing it would leave the service
        listening where none looks, so nothing is cleared here."""
        deadline = time.monotonic() + START_WAIT_S
        while not await self._try_connect(path, clear_stale=False):
            if time.monotonic() > deadline:
                raise WorkerError(
                    f"the worker service did not start within {START_WAIT_S:g} s{self._see_log()}"
                )
            await asyncio.sleep(0.05)

    async def _try_connect(self, path: Path, clear_stale: bool = True) -> bool:
        """Connected to the socket at `path`. A socket no service listens on (one that died left it) is
        removed only by a caller holding the start lock (`clear_stale`): another may be starting one."""
        if not checked_socket(path):
            return False
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)
        except (ConnectionRefusedError, FileNotFoundError):
            if clear_stale:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            return False
        return True

    def _spawn(self, folder: Path, path: Path) -> None:
        log_path = folder / f"worker-{self.label}.log"
        if log_path.exists() and log_path.stat().st_size > LOG_LIMIT:
            log_path.unlink()  # a fresh log now and then: it only says why a service did not start
        with open(log_path, "ab") as log:
            started = subprocess.run(
                [sys.executable, "-m", "workbench.evaluate.worker_service", "--socket", str(path),
                 "--label", self.label, "--idle-s", f"{self.idle_s:g}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                env=service_environment(self.visible), cwd="/", check=False, timeout=START_WAIT_S,
            )  # fmt: skip
        if started.returncode != 0:
            raise WorkerError(
                f"the worker service did not start (exit {started.returncode}){self._see_log()}"
            )

    def _see_log(self) -> str:
        # Its log's lines may name this host's paths, which a verdict must not: point at it instead.
        return (
            f"; its log is worker-{self.label}.log in the service's folder (`ptxwb worker status` names it)"
        )

    async def _hello(self) -> dict:
        return await self.request({"op": "hello"}, timeout_s=HELLO_TIMEOUT_S)

    async def request(
        self, message: dict, timeout_s: float, on_progress: Callable[[dict], None] | None = None
    ) -> dict:
        async with self._lock:
            request_id = next(self._ids)
            forward: Forward = {"forward": {**message, "id": request_id}, "timeout_s": float(timeout_s)}
            try:
                line: str | None = encode_command(forward)
            except ProtocolError as exc:
                raise WorkerError(f"the request is not the worker's protocol: {exc}") from None
            while True:
                answer = await self._exchange(line, timeout_s)
                line = None  # sent once; what follows are its progress events and its reply
                reply = final_reply(answer, request_id, on_progress)
                if reply is not None:
                    return reply

    async def _exchange(self, line: str | None, timeout_s: float) -> dict[str, Any]:
        """Send `line` (when given) and read the next reply."""
        reader, writer = self._reader, self._writer
        if reader is None or writer is None or writer.is_closing():
            raise WorkerError("the worker service is not connected")
        try:
            if line is not None:
                writer.write((line + "\n").encode())
                await writer.drain()
            # The service's own wait on the worker runs out first and says which limit; this is a
            # margin for its answer to arrive.
            received = await asyncio.wait_for(reader.readline(), timeout=timeout_s + 30)
        except TimeoutError:
            await self.close()
            raise WorkerError(f"the worker service did not answer within {timeout_s:g} s") from None
        except (ConnectionError, OSError) as exc:
            await self.close()
            raise WorkerError(f"the worker service's connection broke: {exc}") from None
        if not received:
            await self.close()
            raise WorkerError("the worker service closed the connection (it stopped or was stopped)")
        try:
            return cast(dict[str, Any], decode_reply(received))
        except ProtocolError as exc:
            await self.close()
            raise WorkerError(f"the worker service's reply: {exc}") from None

    async def status(self) -> dict[str, Any]:
        """The service's `service_status` (ServiceInfo and its GPUs)."""
        return await self._ask({"service": "status"})

    async def stop_service(self) -> None:
        """Ask the service to stop; once it said it stops, return when its socket is gone (it removes it
        as it ends), at most STOP_WAIT_S: what runs next (`ptxwb worker status`, a test) sees it gone."""
        try:
            await self._ask({"service": "stop"})
        except WorkerError:
            await self.close()
            return
        await self.close()
        path = socket_path(service_folder(), self.label)
        deadline = time.monotonic() + STOP_WAIT_S
        while path.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def close_unusable(self) -> None:
        """A service that found no GPU and has judged nothing stops now, not after its idle time."""
        try:
            if (await self.status())["evaluations"] == 0:
                await self.stop_service()
        except WorkerError:
            pass
        await self.close()

    async def _ask(self, command: ServiceCommand) -> dict[str, Any]:
        async with self._lock:
            line: str | None = encode_command(command)
            while True:
                reply = await self._exchange(line, 30.0)
                line = None
                if reply.get("type") == "error":
                    raise WorkerError(reply.get("message", "service error"))
                if "id" not in reply:
                    return reply

    async def close(self) -> None:
        """Leave the service (a candidate begun and not ended is ended by it); the service stays warm."""
        writer, self._writer, self._reader = self._writer, None, None
        self.hello = None
        if writer is not None and not writer.is_closing():
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


def running_labels() -> list[str]:
    """The labels of this user's services that left a socket (a dead one's socket is cleared on connect)."""
    folder = service_folder()
    return sorted(
        path.name.removeprefix("worker-").removesuffix(".sock") for path in folder.glob("worker-*.sock")
    )


async def running_statuses() -> list[dict[str, Any]]:
    """`service_status` of each of this user's running services (none is started)."""
    found = []
    for label in running_labels():
        client = ServiceClient.for_label(label)
        try:
            if await client.connect_existing():
                found.append(await client.status())
        except WorkerError:
            pass  # it stopped while we asked
        finally:
            await client.close()
    return found


async def stop_running() -> int:
    """Stop every running service of this user; how many there were."""
    stopped = 0
    for label in running_labels():
        client = ServiceClient.for_label(label)
        if await client.connect_existing():
            await client.stop_service()
            stopped += 1
        await client.close()
    return stopped


class _StartLock:
    """The folder's start lock, held while a command looks for a service and starts one (taken in a
    thread: another command may hold it for a service's whole start)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "start.lock"
        self.file: IO[str] | None = None

    async def __aenter__(self) -> None:
        self.file = open(self.path, "a")  # noqa: SIM115, ASYNC230 - closed in __aexit__; a local file
        await asyncio.to_thread(fcntl.flock, self.file, fcntl.LOCK_EX)

    async def __aexit__(self, *exc: object) -> None:
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()


async def _gone(path: Path) -> None:
    """Wait for a stopped service to take its socket away."""
    deadline = time.monotonic() + START_WAIT_S
    while path.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
