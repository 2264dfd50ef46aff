"""A JSON message checked against the TypedDict that describes it: required fields present, every
field of its annotated type (nested TypedDicts, lists, literals, unions, StrEnum values). The protocol's
decode functions (`protocol.py`, `child_protocol.py`) run it. Standard library only.

No `from __future__ import annotations` in the modules whose TypedDicts are checked: on Python 3.11 a
TypedDict whose annotations are strings cannot tell its NotRequired fields.
"""

from __future__ import annotations

import json
import types
import typing
from enum import StrEnum
from typing import Any, Literal, Protocol, Union, cast


class ProtocolError(ValueError):
    """A message that is not one of the protocol's: unknown, a required field missing, a field's type
    wrong. `field` names it (dotted into nested structures) so the receiver's status can say which."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"malformed message: field {field!r} {problem}")
        self.field = field
        self.problem = problem


_HINTS: dict[type, dict[str, Any]] = {}


class _TypedDictClass(Protocol):
    """What `check` reads of a TypedDict class beyond its annotations."""

    __required_keys__: frozenset[str]


def parsed(data: object) -> dict[str, Any]:
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ProtocolError("", f"is not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProtocolError("", f"is not an object but {type(data).__name__}")
    return data


def check_tagged(message: dict[str, Any], tag: str, kinds: dict[str, type]) -> dict[str, Any]:
    if tag not in message:
        raise ProtocolError(tag, "is missing")
    kind = kinds.get(message[tag]) if isinstance(message[tag], str) else None
    if kind is None:
        raise ProtocolError(tag, f"names no message of this channel: {message[tag]!r}")
    return check(message, kind, "")


def check_answer(message: dict[str, Any], answering: str, kinds: dict[str, type]) -> dict[str, Any]:
    kind = kinds.get(answering)
    if kind is None:
        raise ProtocolError("cmd", f"names no command with an answer: {answering!r}")
    return check(message, kind, "")


def _hints(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


def check(message: dict[str, Any], kind: type, prefix: str) -> dict[str, Any]:
    """`message` as the TypedDict `kind` says: its required fields there, each field of its type."""
    # `kind` is typed `type` where the protocol's tables are built; every one is a TypedDict class.
    required = cast(_TypedDictClass, kind).__required_keys__
    for name, hint in _hints(kind).items():
        where = f"{prefix}{name}"
        if name not in message:
            if name in required:
                raise ProtocolError(where, "is missing")
            continue
        _check_value(message[name], hint, where)
    return message


def _check_value(value: object, hint: Any, where: str) -> None:
    if not _fits(value, hint, where):
        raise ProtocolError(where, f"should be {_describe(hint)}, not {type(value).__name__} {_short(value)}")


def _fits(value: object, hint: Any, where: str) -> bool:
    """Whether `value` fits `hint`; a nested structure that does not raises for its own field."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits_quietly(value, arg, where) for arg in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return False
        check(value, hint, f"{where}.")
        return True
    if origin is list:
        if not isinstance(value, list):
            return False
        (item,) = typing.get_args(hint)
        for number, element in enumerate(value):
            _check_value(element, item, f"{where}[{number}]")
        return True
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return isinstance(value, str) and value in hint._value2member_map_
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _fits_quietly(value: object, hint: Any, where: str) -> bool:
    try:
        return _fits(value, hint, where)
    except ProtocolError:
        return False


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if typing.get_origin(hint) is Literal:
        return " or ".join(repr(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "a status"
    name = str(getattr(typing.get_origin(hint), "__name__", None) or getattr(hint, "__name__", hint))
    return "an object" if name == "dict" or typing.is_typeddict(hint) else name


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
