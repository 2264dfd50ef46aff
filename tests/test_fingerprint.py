"""Harness fingerprints: the same code prints the same every time (no false alarm between calls), and
every way of changing a function shows: swapped in its module, its code object replaced, its bytecode
rewritten in memory, a method replaced on its class, an extra object swapped."""

from __future__ import annotations

import ctypes
import sys
import types

from workbench.evaluate.gpu.fingerprint import changes, fingerprint, state

SOURCE = """
def judge(x):
    return x + 1

class Trace:
    def collect(self):
        return "records"
"""


def module() -> types.ModuleType:
    made = types.ModuleType("ptxwb_fingerprint_probe")
    exec(compile(SOURCE, "probe", "exec"), made.__dict__)  # noqa: S102 - the module under test
    sys.modules[made.__name__] = made
    return made


def test_unchanged_code_prints_the_same_every_time() -> None:
    probe = module()
    first = fingerprint([probe.__name__, "json", "json.encoder"])
    for _ in range(3):
        probe.judge(1)
        assert changes(first, fingerprint([probe.__name__, "json", "json.encoder"])) == []


def test_a_swapped_function_a_new_code_object_and_a_replaced_method_are_seen() -> None:
    probe = module()
    before = fingerprint([probe.__name__])
    probe.judge = lambda x: x
    assert changes(before, fingerprint([probe.__name__])) == [f"{probe.__name__}.judge"]
    probe = module()
    before = fingerprint([probe.__name__])
    probe.judge.__code__ = (lambda x: x).__code__
    assert f"{probe.__name__}.judge" in changes(before, fingerprint([probe.__name__]))
    probe = module()
    before = fingerprint([probe.__name__])
    probe.Trace.collect = lambda self: None
    assert changes(before, fingerprint([probe.__name__])) == [f"{probe.__name__}.Trace.collect"]


def test_bytecode_rewritten_in_place_is_seen() -> None:
    probe = module()
    before = fingerprint([probe.__name__])
    code = probe.judge.__code__.co_code
    offset = bytes.__basicsize__ - 1  # where a bytes object's data starts in CPython
    address = id(code) + offset
    original = ctypes.string_at(address, len(code))
    assert original == code
    ctypes.memmove(address, bytes([original[0] ^ 1]) + original[1:], len(code))
    try:
        assert f"{probe.__name__}.judge" in changes(before, fingerprint([probe.__name__]))
    finally:
        ctypes.memmove(address, original, len(code))


def test_an_extra_object_swapped_is_seen() -> None:
    callback = print
    before = fingerprint([], {"completed": callback})
    assert changes(before, fingerprint([], {"completed": repr})) == ["extra.completed"]


def test_the_unhashed_state_is_equal_until_any_change_and_then_differs() -> None:
    probe = module()
    names = [probe.__name__, "json.encoder"]
    before = state(names)
    probe.judge(1)
    assert state(names) == before
    probe.Trace.collect = lambda self: None
    assert state(names) != before
    probe = module()
    names = [probe.__name__]
    before = state(names)
    code = probe.judge.__code__.co_code
    address = id(code) + bytes.__basicsize__ - 1
    original = ctypes.string_at(address, len(code))
    ctypes.memmove(address, bytes([original[0] ^ 1]) + original[1:], len(code))
    try:
        assert state(names) != before
    finally:
        ctypes.memmove(address, original, len(code))
    assert state(names) == before
    probe.judge.__defaults__ = (2,)
    assert state(names) != before
