"""The per-user GPU worker service: one warm worker for one GPU (or one set of visible GPUs), shared by
every command of one user on one host over a UNIX socket.

`python -m workbench.evaluate.worker_service --socket PATH --idle-s N` detaches and serves until it has
been idle N seconds or is told to stop; `service_client.py` starts it on first use. What it keeps warm is
the worker's own (its judge, the next candidate's runner and tool processes), so a command pays for none
of their start-ups.

- Only this user: the socket's folder is private (`service_paths.py`), the socket is 0600, and every
  connection's peer is checked (SO_PEERCRED) before a byte of it is read.
- In order: a candidate holds the worker from `begin` (or `evaluate`) to its `end` (or result), others
  wait in arrival order; the time waited is the verdict's `phases_s["queue"]`.
- One candidate's failure is its own: a command that leaves mid-candidate gets its `end` sent for it; a
  worker that died or overran a limit is killed and started again for the next candidate.
- `hello` is the worker's, with `service` (ServiceInfo) beside it; `shutdown` closes only that command's
  connection. Standard library only beside the worker's own client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workbench.evaluate.gpu.protocol import HostRequest, ProtocolError, Status, WorkerReply
from workbench.evaluate.gpu.worker import worker_argv
from workbench.evaluate.service_paths import code_identity
from workbench.evaluate.service_protocol import (
    Forward,
    ServiceCommand,
    ServiceInfo,
    ServiceStatus,
    Stopping,
    decode_command,
    encode_reply,
    forwarded,
)
from workbench.evaluate.worker_client import LINE_LIMIT, WorkerClient, WorkerError

END_TIMEOUT_S = 120.0  # ending a left candidate: closing its runner and tool processes


def peer_uid(connection: socket.socket) -> int:
    """The user of the process at the other end of a UNIX socket, from the kernel (not from the peer)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return int(uid)


@dataclass
class Client:
    """One command's connection."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    leased: bool = False  # holds the worker: between its begin and its end

    def send(self, message: WorkerReply | ServiceStatus | Stopping) -> None:
        if not self.writer.is_closing():
            self.writer.write((encode_reply(message) + "\n").encode())


class Service:
    def __init__(self, label: str, idle_limit_s: float, worker: WorkerClient) -> None:
        self.label = label
        self.idle_limit_s = idle_limit_s
        self.worker = worker
        self.identity = code_identity()
        self.lease = asyncio.Lock()  # waiters are woken in arrival order
        self.queue = 0
        self.evaluations = 0
        self.worker_restarts = 0
        self.connections = 0
        self.started = time.monotonic()
        self.last_active = time.monotonic()
        self.stopping = asyncio.Event()
        self._worker_started = False
        self._starting = asyncio.Lock()  # the warm-up and a first command must not start two workers

    def info(self) -> ServiceInfo:
        return {
            "identity": self.identity,
            "label": self.label,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 1),
            "evaluations": self.evaluations,
            "queue": self.queue,
            "busy": self.lease.locked(),
            "idle_limit_s": self.idle_limit_s,
            "worker_restarts": self.worker_restarts,
        }

    async def hello(self) -> dict[str, Any]:
        """The worker's hello, starting (or restarting) it first."""
        async with self._starting:
            if self._worker_started and not self.worker.running:
                self.worker_restarts += 1
            hello = await self.worker.start()
            self._worker_started = True
            return hello

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = writer.get_extra_info("socket")
        if connection is None or peer_uid(connection) != os.getuid():
            writer.close()  # another user's process: not a byte read, not a byte answered
            return
        client = Client(reader, writer)
        self.connections += 1
        self.last_active = time.monotonic()
        try:
            while not self.stopping.is_set():
                line = await reader.readline()
                if not line:
                    break
                if not await self._answer(client, line):
                    break
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
        except (ConnectionError, ValueError):  # a line over the limit, a peer gone mid-line
            pass
        finally:
            if client.leased:
                await self._end_for(client)
            self.connections -= 1
            self.last_active = time.monotonic()
            writer.close()

    async def _answer(self, client: Client, line: bytes) -> bool:
        """Answer one line; False when the command is done with the connection."""
        try:
            command = decode_command(line)
        except ProtocolError as exc:
            client.send({"type": "error", "status": Status.infrastructure_error, "message": str(exc)})
            return True
        if "service" in command:
            if cast(ServiceCommand, command)["service"] == "stop":
                client.send({"type": "stopping"})
                self.stopping.set()
                return False
            hello = self.worker.hello or {}
            client.send(
                cast(ServiceStatus, {"type": "service_status", "gpus": hello.get("gpus", []), **self.info()})
            )
            return True
        return await self._forward(client, cast(Forward, command))

    async def _forward(self, client: Client, command: Forward) -> bool:
        request = forwarded(command)
        data = cast(dict[str, Any], request)
        request_id, op = data.get("id"), request["op"]
        if op == "shutdown":
            client.send(self._with_id({"type": "bye"}, request_id))
            return False
        if op == "hello":
            try:
                hello = await self.hello()
            except WorkerError as exc:
                client.send(self._error(f"the worker did not start: {exc}", request_id))
                return True
            client.send(self._with_id(cast(WorkerReply, {**hello, "service": self.info()}), request_id))
            return True
        if op in ("stage", "end") and not client.leased:
            if op == "end":
                client.send(self._with_id({"type": "ended"}, request_id))
            else:
                client.send(self._error("no candidate begun", request_id))
            return True
        waited = 0.0
        if op in ("begin", "evaluate") and not client.leased:
            waited = await self._take(client)
            if client.reader.at_eof():  # the command left while it waited (Ctrl-C): judge nothing for it
                self._give_back(client)
                return False
            self.evaluations += 1
        await self._relay(client, request, command["timeout_s"], waited)
        if op in ("evaluate", "end") or not self.worker.running:
            self._give_back(client)
        return True

    async def _take(self, client: Client) -> float:
        """Wait for the worker in arrival order; the seconds waited."""
        queued = time.perf_counter()
        self.queue += 1
        try:
            await self.lease.acquire()
        finally:
            self.queue -= 1
        client.leased = True
        return round(time.perf_counter() - queued, 4)

    def _give_back(self, client: Client) -> None:
        if client.leased:
            client.leased = False
            self.lease.release()
            self.last_active = time.monotonic()

    async def _relay(self, client: Client, request: HostRequest, timeout_s: float, waited: float) -> None:
        data = dict(cast(dict[str, Any], request))
        request_id = data.pop("id", None)
        try:
            await self.hello()
            reply = await self.worker.request(
                data,
                timeout_s,
                on_progress=lambda event: client.send(self._with_id(cast(WorkerReply, event), request_id)),
            )
        except WorkerError as exc:
            client.send(self._error(str(exc), request_id))
            return
        if reply.get("type") in ("begun", "result"):
            reply["phases_s"] = {**(reply.get("phases_s") or {}), "queue": waited}
        client.send(self._with_id(cast(WorkerReply, reply), request_id))

    async def _end_for(self, client: Client) -> None:
        """A command left mid-candidate: end the candidate for it, then let the next one in."""
        with contextlib.suppress(WorkerError):
            await self.worker.request({"op": "end"}, END_TIMEOUT_S)
        self._give_back(client)

    @staticmethod
    def _with_id(message: WorkerReply, request_id: object) -> WorkerReply:
        reply = {k: v for k, v in message.items() if k != "id"}
        if request_id is not None:
            reply["id"] = request_id
        return cast(WorkerReply, reply)

    def _error(self, message: str, request_id: object) -> WorkerReply:
        return self._with_id(
            {"type": "error", "status": Status.infrastructure_error, "message": message}, request_id
        )

    async def idle_watch(self) -> None:
        """Stop once no command has been connected for the idle limit."""
        while not self.stopping.is_set():
            await asyncio.sleep(min(5.0, max(self.idle_limit_s / 4, 0.05)))
            idle = time.monotonic() - self.last_active
            if self.connections == 0 and not self.lease.locked() and idle >= self.idle_limit_s:
                self.stopping.set()


def file_identity(path: Path) -> tuple[int, int] | None:
    """The file at `path` as the kernel knows it (device, inode), or None when there is none."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def remove_if_own(path: Path, own: tuple[int, int] | None) -> None:
    """Remove the service's socket file, unless another file took its name since: a stopping service
    slowed past the stopping command's wait must not take away the socket its successor just bound
    there (asyncio replaces a socket file left at the path)."""
    if own is not None and file_identity(path) == own:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def run_service(socket_file: Path, label: str, idle_limit_s: float) -> None:
    # The worker inherits the service's environment: the starting command's, less its secrets.
    service = Service(label, idle_limit_s, WorkerClient(worker_argv()))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, service.stopping.set)
    previous = os.umask(0o177)  # the socket is made 0600: never a moment open to others
    try:
        server = await asyncio.start_unix_server(service.serve, path=str(socket_file), limit=LINE_LIMIT)
    finally:
        os.umask(previous)
    own = file_identity(socket_file)
    watch = asyncio.create_task(service.idle_watch())
    warm = asyncio.create_task(service.hello())  # the worker starts now, not at the first command
    try:
        await service.stopping.wait()
    finally:
        server.close()
        remove_if_own(socket_file, own)
        watch.cancel()
        warm.cancel()
        await service.worker.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workbench.evaluate.worker_service")
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--label", required=True)
    parser.add_argument("--idle-s", type=float, required=True)
    parser.add_argument("--foreground", action="store_true", help="do not detach (for a supervisor)")
    args = parser.parse_args(argv)
    if not args.foreground:
        # Detach: the command that started it returns now, and the service outlives it.
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
    try:
        asyncio.run(run_service(args.socket, args.label, args.idle_s))
    except OSError as exc:  # the socket cannot be made (another service took it first)
        print(json.dumps({"service": "not started", "why": exc.strerror}), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
