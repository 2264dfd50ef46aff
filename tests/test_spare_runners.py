"""The line of spare runners: two on a GPU, one on the CPU; taken oldest first; held ones get `start`
only when released or taken; those for another device or dead are closed. Real child processes that
echo what they are sent on the worker's channel."""

from __future__ import annotations

import select
import sys

from workbench.evaluate.gpu.isolation import Child
from workbench.evaluate.gpu.spare_runners import SpareRunners

ECHO = (
    "from workbench.evaluate.gpu.isolation import ChildChannel\n"
    "channel = ChildChannel()\n"
    "while (message := channel.read()) is not None:\n"
    "    channel.write(message)\n"
)


def echo(device: str, held: bool) -> Child:
    return Child([sys.executable, "-c", ECHO])


def told(child: Child) -> list[dict]:
    """What the child was sent so far (each echoed once). Looked at before read: a receive() that times
    out would kill it."""
    heard = []
    while select.select([child._read_fd], [], [], 1.0)[0]:
        reply = child.receive(10.0)
        assert reply.ok and reply.data is not None, reply
        heard.append(reply.data)
    return heard


def test_a_gpu_gets_two_spares_held_until_taken_or_released() -> None:
    runners = SpareRunners(echo)
    try:
        runners.fill("cuda", held=True)
        first, second = (spare.child for spare in runners.line)
        runners.fill("cuda", held=True)  # each stage asks again: still the same two
        assert [spare.child for spare in runners.line] == [first, second] and runners.held
        assert runners.take("cuda") is first  # the oldest, released as it is taken
        assert told(first) == [{"cmd": "start"}]
        assert [spare.child for spare in runners.line] == [second]
        runners.release()
        assert not runners.held and told(second) == [{"cmd": "start"}]
        runners.release()  # released once only
        assert told(second) == [] and second.alive()
        first.close()
    finally:
        runners.close()


def test_the_cpu_gets_one_and_a_spare_for_another_device_is_closed() -> None:
    runners = SpareRunners(echo)
    try:
        runners.fill("cuda", held=False)
        gpu_spares = [spare.child for spare in runners.line]
        assert len(gpu_spares) == 2
        runners.fill("cpu", held=False)
        assert [spare.device for spare in runners.line] == ["cpu"]
        assert not any(child.alive() for child in gpu_spares)
        assert runners.take("cuda") is None  # the cpu one is no use there, and closed
        assert runners.line == []
    finally:
        runners.close()


def test_a_dead_spare_is_passed_over() -> None:
    runners = SpareRunners(echo)
    try:
        runners.fill("cuda", held=False)
        dead, alive = (spare.child for spare in runners.line)
        dead.kill()
        assert runners.take("cuda") is alive
        alive.close()
    finally:
        runners.close()


def test_depth_zero_starts_nothing() -> None:
    runners = SpareRunners(echo, gpu_depth=0)
    runners.fill("cuda", held=True)
    runners.fill("cpu", held=True)
    assert runners.line == [] and runners.take("cuda") is None
