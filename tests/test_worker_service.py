"""The per-user worker service on this CPU machine: the real service, its real worker, runner and judge
processes, judging CPU candidates built by the system compiler (`cpu_pipeline.py`) through the socket.

What it promises: one warm worker shared by every command, candidates in arrival order, a command that
leaves mid-candidate or a worker that dies costing only that candidate, no other user let in, no secret
of the command's environment in the service's, and `ptxwb worker` to see and stop it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import stop_worker_services
from cpu_pipeline import build_cpu, cpu_spec

from workbench.evaluate import service_client
from workbench.evaluate.executors import make_executor
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.service_client import ServiceClient, running_labels
from workbench.evaluate.service_paths import ServiceFolderError, code_identity, service_folder, socket_path
from workbench.evaluate.service_protocol import decode_reply
from workbench.evaluate.worker_client import WorkerClient, WorkerError
from workbench.evaluate.worker_service import file_identity, remove_if_own

FAST = {"pace": {"warmup_s": 0.0, "timed_s": 0.0}, "warmup": 2, "iterations": 6}
# Correctness only: a CPU candidate's timing verdict reads the host clock against the baseline's, which on
# a busy machine is the scheduler's noise (test_judging_pipeline.py sets that check aside in-process; the
# service's worker is another process). What is judged here is the service, not the tiers.
STAGES = ("correctness",)


@pytest.fixture
def fresh_services() -> Iterator[None]:
    stop_worker_services()
    yield
    stop_worker_services()


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_cpu({}, tmp_path_factory.mktemp("cpu_libraries")))


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


async def evaluate(client: ServiceClient, library: str) -> dict:
    return await client.evaluate_library(library, cpu_spec(), stages=STAGES, **FAST)


def started_service() -> int:
    """A service started (or found) as a command would, left running: its pid."""

    async def go() -> int:
        client = ServiceClient()
        try:
            await client.start()
            return (await client.status())["pid"]
        finally:
            await client.close()

    return asyncio.run(go())


def test_two_commands_share_one_warm_worker_and_each_verdict_says_its_wait(fresh_services, library) -> None:
    async def go() -> tuple[dict, dict, dict, dict]:
        first, second = ServiceClient(), ServiceClient()
        try:
            one = await evaluate(first, library)
            status_one = await first.status()
            await first.close()  # the command ends; the service and its worker stay
            two = await evaluate(second, library)
            return one, two, status_one, await second.status()
        finally:
            await first.close()
            await second.close()

    one, two, before, after = asyncio.run(go())
    for result in (one, two):
        assert result["stages"]["correctness"]["status"] == "passed", result["stages"]["correctness"]
        assert list(result["stages"]) == ["correctness"]
        assert "queue" in result["phases_s"] and result["phases_s"]["queue"] >= 0
    assert after["pid"] == before["pid"] and after["worker_restarts"] == 0
    assert (before["evaluations"], after["evaluations"]) == (1, 2)
    assert after["busy"] is False and after["queue"] == 0


def test_a_second_candidate_waits_for_the_first_ones_end_in_arrival_order(fresh_services, library) -> None:
    order: list[str] = []

    async def go() -> tuple[dict, dict]:
        holder, waiter, watcher = ServiceClient(), ServiceClient(), ServiceClient()
        try:
            await holder.start()
            begun = await holder.request(
                {"op": "begin", "library": library, "spec": cpu_spec(), "stages": list(STAGES), **FAST}, 120
            )
            assert begun["ok"], begun
            waiting = asyncio.create_task(evaluate(waiter, library))
            await watcher.start()
            while (await watcher.status())["queue"] == 0:  # the waiter is in the queue
                await asyncio.sleep(0.05)
            held = await watcher.status()
            assert not waiting.done()
            stage = await holder.request({"op": "stage", "stage": "correctness", "trials": 1}, 120)
            order.append("holder's stage")
            await holder.request({"op": "end"}, 120)
            order.append("holder ended")
            result = await waiting
            order.append("waiter's result")
            assert stage["result"]["status"] == "passed"
            return held, result
        finally:
            for client in (holder, waiter, watcher):
                await client.close()

    held, result = asyncio.run(go())
    assert held["busy"] is True and held["queue"] == 1
    assert order == ["holder's stage", "holder ended", "waiter's result"]
    assert result["stages"]["correctness"]["status"] == "passed"
    assert result["phases_s"]["queue"] > 0


def test_a_command_that_leaves_while_it_waits_gets_nothing_judged(fresh_services, library) -> None:
    async def go() -> dict:
        holder, watcher = ServiceClient(), ServiceClient()
        try:
            await holder.start()
            await holder.request({"op": "begin", "library": library, "spec": cpu_spec(), **FAST}, 120)
            _reader, writer = await asyncio.open_unix_connection(
                str(socket_path(service_folder(), holder.label))
            )
            request = {
                "op": "evaluate",
                "id": 1,
                "library": library,
                "spec": cpu_spec(),
                "stages": list(STAGES),
                **FAST,
            }
            writer.write((json.dumps({"forward": request, "timeout_s": 120}) + "\n").encode())
            await writer.drain()
            await watcher.start()
            while (await watcher.status())["queue"] == 0:
                await asyncio.sleep(0.05)
            writer.close()  # gone before its turn, as a Ctrl-C'd command is
            await writer.wait_closed()  # closed, not only asked to be: the end below comes after
            await holder.request({"op": "end"}, 120)
            while (await watcher.status())["busy"]:
                await asyncio.sleep(0.05)
            return await watcher.status()
        finally:
            await holder.close()
            await watcher.close()

    status = asyncio.run(go())
    assert status["evaluations"] == 1 and status["queue"] == 0


def test_a_command_gone_mid_candidate_costs_only_that_candidate(fresh_services, library) -> None:
    async def go() -> tuple[dict, dict]:
        leaver, next_one = ServiceClient(), ServiceClient()
        await leaver.start()
        await leaver.request({"op": "begin", "library": library, "spec": cpu_spec(), **FAST}, 120)
        await leaver.close()  # never sends `end`: the service ends the candidate for it
        try:
            result = await evaluate(next_one, library)
            return result, await next_one.status()
        finally:
            await next_one.close()

    result, status = asyncio.run(go())
    assert result["stages"]["correctness"]["status"] == "passed"
    assert status["evaluations"] == 2 and status["busy"] is False


def test_a_worker_that_died_is_started_again_by_the_next_request(fresh_services, library) -> None:
    async def go() -> tuple[str, dict, dict]:
        client = ServiceClient()
        try:
            await evaluate(client, library)
            service_pid = (await client.status())["pid"]
            workers = [
                pid
                for pid in children_of(service_pid)
                if b"gpu.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
            ]
            assert len(workers) == 1
            os.kill(workers[0], signal.SIGKILL)
            await asyncio.sleep(0.2)
            try:
                lost = await evaluate(client, library)
                why = "answered"
            except WorkerError as exc:  # the request that found it dead says so; the next one goes through
                lost, why = {}, str(exc)
            result = await evaluate(client, library)
            return why, lost, result | {"status": await client.status()}
        finally:
            await client.close()

    why, _lost, result = asyncio.run(go())
    assert why == "answered" or "worker" in why
    assert result["stages"]["correctness"]["status"] == "passed"
    assert result["status"]["worker_restarts"] == 1


def test_a_malformed_command_is_answered_naming_its_field(fresh_services) -> None:
    async def go() -> list[dict]:
        client = ServiceClient()
        await client.start()
        path = socket_path(service_folder(), client.label)
        reader, writer = await asyncio.open_unix_connection(str(path))
        answers = []
        for line in (
            b'{"forward": {"op": "hello"}}\n',
            b'{"forward": {"op": "launch"}, "timeout_s": 5}\n',
            b"not json\n",
        ):
            writer.write(line)
            await writer.drain()
            answers.append(decode_reply(await reader.readline()))
        writer.close()
        await client.close()
        return answers

    answers = asyncio.run(go())
    assert [a["type"] for a in answers] == ["error", "error", "error"]
    assert "'timeout_s' is missing" in answers[0]["message"]
    assert "'forward.op'" in answers[1]["message"]
    assert "is not JSON" in answers[2]["message"]


def test_the_service_keeps_no_secret_of_the_command_that_started_it(fresh_services, monkeypatch) -> None:
    monkeypatch.setenv("VENDOR_API_KEY", "sk-test-not-a-real-key-1234")
    monkeypatch.setenv("PTXWB_CACHE_NOTE", "kept")

    pid = started_service()
    environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"PTXWB_CACHE_NOTE=kept" in environment
    assert not any(entry.startswith(b"VENDOR_API_KEY=") for entry in environment)
    for child in children_of(pid):
        assert b"sk-test-not-a-real-key" not in Path(f"/proc/{child}/environ").read_bytes()


def test_a_command_run_from_other_code_replaces_the_service(fresh_services, monkeypatch) -> None:
    first = started_service()
    # This command runs other code than the service (another install, an edit since it started).
    monkeypatch.setattr(service_client, "code_identity", lambda: "another build of the workbench")
    second = started_service()
    assert second != first
    assert (
        not Path(f"/proc/{first}").exists()
        or b"Z" in Path(f"/proc/{first}/stat").read_bytes().split(b") ")[1][:1]
    )


def test_the_code_identity_changes_with_an_edit_or_another_file(tmp_path) -> None:
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "worker.py").write_text("x = 1\n")
    before = code_identity(tmp_path)
    assert code_identity(tmp_path) == before
    stamp = (tmp_path / "gpu" / "worker.py").stat()
    os.utime(tmp_path / "gpu" / "worker.py", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    edited = code_identity(tmp_path)
    (tmp_path / "added.py").write_text("")
    assert len({before, edited, code_identity(tmp_path)}) == 3


def test_an_idle_service_ends_by_itself_and_takes_its_socket(fresh_services, monkeypatch) -> None:
    monkeypatch.setenv("PTXWB_WORKER_IDLE_S", "0.5")

    pid = started_service()
    path = socket_path(service_folder(), ServiceClient().label)
    deadline = time.monotonic() + 120  # a liveness bound, not a speed claim
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not path.exists()
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()


# The second user's probe needs only the standard library, from a Python any user may run.
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(
    os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs root to act as a second user"
)
def test_another_user_can_neither_reach_the_socket_nor_be_served_through_it(fresh_services) -> None:
    started_service()
    folder = service_folder()
    path = socket_path(folder, ServiceClient().label)
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('refused', e.errno); sys.exit()\n"
        "s.settimeout(30)\n"
        "try:\n"
        ' s.sendall(b\'{"forward": {"op": "hello", "id": 1}, "timeout_s": 30}\\n\')\n'
        " print('answered' if s.recv(65536) else 'closed')\n"
        "except (ConnectionResetError, BrokenPipeError):\n print('closed')\n"
    )

    def as_nobody() -> str:
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", probe, str(path)], user=65534, group=65534, capture_output=True, text=True,
            timeout=60, check=False, cwd="/",
        )  # fmt: skip
        return done.stdout.strip() or done.stderr.strip().splitlines()[-1]

    assert as_nobody().startswith("refused")  # the private folder keeps the socket out of reach
    # Even with the socket opened up and reachable (a mistake, or another hole: here a second name for it in a
    # folder anyone may enter), the service serves no one but its own user: it reads the peer's user from
    # the kernel and closes the connection unanswered.
    open_folder = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        open_folder.chmod(0o755)
        second_name = open_folder / "worker.sock"
        os.link(path, second_name)
        second_name.chmod(0o666)
        path = second_name
        assert as_nobody() == "closed"
    finally:
        shutil.rmtree(open_folder)


def test_a_folder_open_to_others_is_refused_in_one_line(tmp_path, monkeypatch) -> None:
    runtime = tmp_path / "runtime"
    (runtime / "ptxwb").mkdir(parents=True)
    (runtime / "ptxwb").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(ServiceFolderError, match=r"open to other users \(mode 755"):
        service_folder()
    done = subprocess.run(
        [sys.executable, "-c", "from workbench.cli.main import main; main()", "worker", "status"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "open to other users" in done.stderr


def test_ptxwb_worker_start_status_and_stop(fresh_services) -> None:
    def ptxwb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from workbench.cli.main import main; main()", "worker", *args],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    started = ptxwb("start", "--idle", "600")
    assert started.returncode == 0 and "idle limit 600 s" in started.stdout, started.stderr
    listed = ptxwb("status", "--json")
    services = json.loads(listed.stdout)["services"]
    assert len(services) == 1 and services[0]["idle_limit_s"] == 600 and services[0]["evaluations"] == 0
    doctor = json.loads(
        subprocess.run(
            [sys.executable, "-c", "from workbench.cli.main import main; main()", "doctor", "--json"],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout
    )  # fmt: skip
    assert [s["pid"] for s in doctor["worker_services"]["running"]] == [services[0]["pid"]]
    stopped = ptxwb("stop")
    assert stopped.returncode == 0 and "stopped 1 worker service" in stopped.stdout
    assert running_labels() == []  # gone when `stop` returns, not a moment later
    assert "no worker service is running" in ptxwb("status").stdout
    assert ptxwb("start", "--idle", "0").returncode == 2


def test_local_evaluations_go_through_the_service_unless_told_not_to(monkeypatch) -> None:
    assert isinstance(LocalExecutor().client, ServiceClient)
    assert isinstance(make_executor("local", worker_service=False).client, WorkerClient)
    monkeypatch.setenv("PTXWB_NO_WORKER_SERVICE", "1")
    assert isinstance(make_executor("local").client, WorkerClient)
    assert isinstance(LocalExecutor(worker_service=True).client, ServiceClient)


def test_one_service_per_gpu_and_an_unpinned_command_shares_gpu_0s(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    unpinned, pinned = ServiceClient(), ServiceClient("0")
    # The worker judges on device 0 either way: one queue, never two workers timing on one GPU.
    assert (unpinned.label, unpinned.visible) == (pinned.label, pinned.visible) == ("0", "0")
    labels = {ServiceClient("1").label}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    labels |= {ServiceClient().label, ServiceClient("GPU-8f0e/../x").label}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    labels |= {ServiceClient().label}
    assert labels == {"1", "2+3", "GPU-8f0e+x", "none"}


def test_the_socket_is_0600_in_a_0700_folder(fresh_services) -> None:
    started_service()
    folder = service_folder()
    path = socket_path(folder, ServiceClient().label)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    probe = socket.socket(socket.AF_UNIX)
    probe.connect(str(path))
    probe.close()


def test_a_bad_idle_setting_is_one_line_before_any_work(tmp_path) -> None:
    kernel = Path(__file__).parent / "gpu" / "kernels" / "wgmma_gemm.cu"
    done = subprocess.run(
        [sys.executable, "-c", "from workbench.cli.main import main; main()", "eval", str(kernel),
         "--task", "gemm_n7168_k5120", "--executor", "local"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PTXWB_WORKER_IDLE_S": "soon", "PTXWB_CACHE": str(tmp_path / "builds")},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "ptxwb: PTXWB_WORKER_IDLE_S must be a number of seconds above zero, not 'soon'"
    ]
    assert not (tmp_path / "builds").exists()
    # The setting matters only to a service being started: stopping the running ones still works.
    stopped = subprocess.run(
        [sys.executable, "-c", "from workbench.cli.main import main; main()", "worker", "stop"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "PTXWB_WORKER_IDLE_S": "soon"},
    )  # fmt: skip
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr


def test_a_dead_services_socket_is_cleared_only_by_a_command_that_starts_one(fresh_services) -> None:
    from workbench.evaluate.service_client import running_statuses

    path = socket_path(service_folder(), ServiceClient().label)
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(path))  # bound, never listening: what a service killed with -9 leaves
    left.close()
    # Looking (status, doctor) never removes it: a command holding the start lock may be starting a service.
    assert asyncio.run(running_statuses()) == [] and path.exists()
    pid = started_service()
    assert Path(f"/proc/{pid}").exists() and path.exists()


def test_a_stopping_service_removes_its_own_socket_and_never_its_successors(tmp_path: Path) -> None:
    # A service slowed past the stopping command's wait ends after its successor bound the same path
    # (asyncio replaces a socket file left there): its cleanup must leave the successor's socket.
    path = tmp_path / "worker-0.sock"
    first = socket.socket(socket.AF_UNIX)
    first.bind(str(path))
    own = file_identity(path)
    path.unlink()
    second = socket.socket(socket.AF_UNIX)
    second.bind(str(path))
    try:
        remove_if_own(path, own)
        assert path.exists() and file_identity(path) != own
        remove_if_own(path, file_identity(path))
        assert not path.exists()
        remove_if_own(path, None)  # nothing there, nothing known: nothing to do
    finally:
        first.close()
        second.close()


def test_a_starting_services_socket_refused_before_its_listen_is_waited_for_not_removed(
    tmp_path: Path,
) -> None:
    # Between a starting service's bind and its listen, a connection is refused as on a dead one's socket;
    # the command waiting for it must keep the file (else the service listens where no one looks).
    path = tmp_path / "worker-0.sock"
    path.parent.chmod(0o700)
    starting = socket.socket(socket.AF_UNIX)
    starting.bind(str(path))
    path.chmod(0o600)

    async def wait_while_refused() -> None:
        waiting = asyncio.create_task(ServiceClient()._wait_for_start(path))
        await asyncio.sleep(0.3)  # six refused attempts
        assert path.exists() and not waiting.done()
        starting.listen()
        await asyncio.wait_for(waiting, timeout=10)

    try:
        asyncio.run(wait_while_refused())
    finally:
        starting.close()
