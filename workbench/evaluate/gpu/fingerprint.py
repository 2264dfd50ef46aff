"""Fingerprints of the harness code that must stay in the candidate's process.

The runner loads the candidate, calls it, collects CUPTI's records and writes replies; whatever the
candidate changes in that code (a function swapped in a module, a code object rewritten in memory, a
method replaced on a class, CUPTI's callbacks re-registered) changes the fingerprint, which the runner
compares after every call. A change is the status `tampered`, never a pass.

A Python function's print is the identity of the function, of its code object, and a hash of the code's
bytes, constants, names, defaults and closure cells; anything else (a builtin, a C function, a module) is
printed by identity. Standard library only.
"""

from __future__ import annotations

import hashlib
import marshal
import sys
import types
from collections.abc import Iterable


def _function_print(function: types.FunctionType) -> str:
    # marshal serialises the code object whole (bytecode, constants, names, nested code), read afresh
    # from memory every time, so bytes rewritten in place are seen too. Format 2: later formats mark
    # objects by their reference counts, which change between calls.
    digest = hashlib.blake2b(marshal.dumps(function.__code__, 2), digest_size=12)
    digest.update(repr(function.__defaults__).encode())
    for cell in function.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            contents = None
        digest.update(str(id(contents)).encode())
    return f"{id(function)}:{id(function.__code__)}:{digest.hexdigest()[:16]}"


def object_print(value: object) -> str:
    if isinstance(value, types.FunctionType):
        return _function_print(value)
    if isinstance(value, types.MethodType):
        return f"m{id(value.__self__)}:{object_print(value.__func__)}"
    return f"o{id(value)}"


def _members(owner: object) -> Iterable[tuple[str, object]]:
    namespace = owner.__dict__ if isinstance(owner, (type, types.ModuleType)) else {}
    for name, value in list(namespace.items()):
        if isinstance(
            value, (types.FunctionType, types.BuiltinFunctionType, type, staticmethod, classmethod)
        ):
            yield name, value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def fingerprint(modules: Iterable[str], extra: dict[str, object] | None = None) -> dict[str, str]:
    """Prints of every function and class method defined in `modules` (by name), the modules' own
    identities in `sys.modules`, and the `extra` objects (callbacks, bound methods the harness holds)."""
    prints: dict[str, str] = {}
    for module_name in modules:
        module = sys.modules.get(module_name)
        prints[f"{module_name}"] = f"o{id(module)}"
        if module is None:
            continue
        for name, value in _members(module):
            prints[f"{module_name}.{name}"] = object_print(value)
            if isinstance(value, type) and value.__module__ == module_name:
                for member, function in _members(value):
                    prints[f"{module_name}.{name}.{member}"] = object_print(function)
    for name, value in (extra or {}).items():
        prints[f"extra.{name}"] = object_print(value)
    return prints


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The names whose print differs, appeared or disappeared."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
