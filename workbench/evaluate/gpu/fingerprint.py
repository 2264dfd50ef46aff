"""Fingerprints of the harness code that must stay in the candidate's process.

The runner loads the candidate, calls it, collects CUPTI's records and writes replies; whatever the
candidate changes in that code (a function swapped in a module, a code object rewritten in memory, a
method replaced on a class, CUPTI's callbacks re-registered) changes the fingerprint, which the runner
compares after every call. A change is the status `tampered`, never a pass.

A Python function's print is the identity of the function, of its code object, and a hash of the code's
bytes, constants, names, defaults and closure cells; anything else (a builtin, a C function, a module) is
printed by identity. After every call the same is compared unhashed (`state`), at about half the cost
of the prints, which are made only to name what changed. Standard library only.
"""

from __future__ import annotations

import hashlib
import marshal
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

Material = tuple[Any, ...]  # ints, strings, bytes and tuples of them: what marshal writes


def _material(value: object) -> Material:
    """What identifies `value` for the fingerprint, read afresh from memory."""
    if isinstance(value, types.FunctionType):
        # marshal serialises the code object whole (bytecode, constants, names, nested code), read afresh
        # from memory every time, so bytes rewritten in place are seen too. Format 2: later formats mark
        # objects by their reference counts, which change between calls.
        cells = []
        for cell in value.__closure__ or ():
            try:
                cells.append(id(cell.cell_contents))
            except ValueError:  # an empty cell
                cells.append(id(None))
        code = value.__code__
        return ("f", id(value), id(code), marshal.dumps(code, 2), repr(value.__defaults__), tuple(cells))
    if isinstance(value, types.MethodType):
        return ("m", id(value.__self__), _material(value.__func__))
    return ("o", id(value))


def object_print(value: object) -> str:
    return hashlib.blake2b(marshal.dumps(_material(value), 2), digest_size=12).hexdigest()[:16]


def _members(owner: object) -> Iterable[tuple[str, object]]:
    namespace = owner.__dict__ if isinstance(owner, (type, types.ModuleType)) else {}
    for name, value in list(namespace.items()):
        if isinstance(
            value, (types.FunctionType, types.BuiltinFunctionType, type, staticmethod, classmethod)
        ):
            yield name, value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def _covered(modules: Iterable[str], extra: dict[str, object] | None) -> Iterator[tuple[str, object]]:
    """Every covered name and its object: the modules' own entries in `sys.modules`, every function and
    class method defined in them, and the `extra` objects."""
    for module_name in modules:
        module = sys.modules.get(module_name)
        yield module_name, module
        if module is None:
            continue
        for name, value in _members(module):
            yield f"{module_name}.{name}", value
            if isinstance(value, type) and value.__module__ == module_name:
                for member, function in _members(value):
                    yield f"{module_name}.{name}.{member}", function
    for name, value in (extra or {}).items():
        yield f"extra.{name}", value


def fingerprint(modules: Iterable[str], extra: dict[str, object] | None = None) -> dict[str, str]:
    """Prints of every function and class method defined in `modules` (by name), the modules' own
    identities in `sys.modules`, and the `extra` objects (callbacks, bound methods the harness holds)."""
    return {name: object_print(value) for name, value in _covered(modules, extra)}


def state(modules: Iterable[str], extra: dict[str, object] | None = None) -> list[tuple[str, Material]]:
    """All that `fingerprint` prints, unhashed: compared whole after every call (equal, nothing changed),
    at about half the cost of the prints, which then name what changed where it differs."""
    return [(name, _material(value)) for name, value in _covered(modules, extra)]


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The names whose print differs, appeared or disappeared."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
