"""The ABI check: does the exported `run` take the task's inputs, then its outputs?

The kernel contract: `TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, fn)` where `fn` takes every input as a
`tvm::ffi::TensorView` in definition order, then every output, scalars (0-d specs) as plain values.
A kernel written for another task (the attention forward's five tensors, given the GEMM's three)
builds and may pass the static tier, yet can only fail or fault once called.

Read from the source, comments and literals ignored: the export macro, then `fn`'s parameter list (a
function defined in the file, through `using`/`typedef` aliases and object-like macros, or a lambda
written in the macro). Whatever cannot be read with certainty (an overload set, a template parameter
type, a function-like macro, a definition in a header) is not judged: `check_abi` returns None, so an
honest kernel is never failed for being written in a way this reader does not follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from workbench.evaluate.build.source_text import CLOSING, OPENING, code_only, split_top_level
from workbench.evaluate.result import BuildStage, Status
from workbench.tasks.models import Definition

Kind = Literal["tensor", "scalar"]

_EXPORT = re.compile(r"\bTVM_FFI_DLL_EXPORT_TYPED_FUNC\s*\(\s*run\s*,")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*?)[ \t]*$", re.MULTILINE)
_USING = re.compile(r"\busing\s+(\w+)\s*=\s*([^;{}]+);")
_TYPEDEF = re.compile(r"\btypedef\s+([^;{}]+?)\s+(\w+)\s*;")
_TENSORS = frozenset({"TensorView", "Tensor", "DLTensor"})
_SCALARS = frozenset(
    {
        "bool", "char", "short", "int", "long", "float", "double", "unsigned", "signed", "size_t",
        "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    }
)  # fmt: skip
_QUALIFIERS = frozenset({"const", "volatile", "struct", "class", "typename", "__restrict__"})


@dataclass(frozen=True)
class Parameter:
    text: str  # as written, white space folded
    kind: Kind


def _closing(code: str, start: int) -> int | None:
    """Index of the bracket closing the one at `start` (angle brackets only nest inside the others)."""
    stack: list[str] = []
    for index in range(start, len(code)):
        char = code[index]
        if char in "([{" or char == "<" and stack and stack[-1] == "<":
            stack.append(char)
        elif char in ")]}" or char == ">" and stack and stack[-1] == "<":
            if not stack or OPENING.index(stack.pop()) != CLOSING.index(char):
                return None
            if not stack:
                return index
    return None


class _Names:
    """Type names as the file spells them, through its aliases and object-like macros."""

    def __init__(self, code: str) -> None:
        self.aliases: dict[str, str] = {}
        for match in _DEFINE.finditer(code):
            self.aliases[match.group(1)] = match.group(2)
        for match in _USING.finditer(code):
            self.aliases[match.group(1)] = match.group(2)
        for match in _TYPEDEF.finditer(code):
            self.aliases[match.group(2)] = match.group(1)

    def expand(self, text: str, depth: int = 0) -> str:
        if depth > 8:
            return text
        expanded = re.sub(r"\b\w+\b", lambda m: self.aliases.get(m.group(0), m.group(0)), text)
        return expanded if expanded == text else self.expand(expanded, depth + 1)


def _kind(parameter: str, names: _Names) -> Kind | None:
    """tensor, scalar, or None for a type this reader cannot be sure of."""
    text = names.expand(parameter.split("=")[0])  # no default argument
    while (plain := re.sub(r"<[^<>]*>", "", text)) != text:  # no template arguments
        text = plain
    words = [w.split("::")[-1] for w in re.findall(r"\w+(?:\s*::\s*\w+)*", text)]
    words = [w.strip() for w in words if w.strip() not in _QUALIFIERS]
    # The last word names the parameter unless it is itself a type (an unnamed parameter).
    types = words[:-1] if len(words) > 1 and words[-1] not in _TENSORS | _SCALARS else words
    pointer = "*" in text
    if len(types) == 1 and types[0] in _TENSORS and (types[0] == "DLTensor") == pointer:
        return "tensor"
    if types and all(t in _SCALARS for t in types) and not pointer:
        return "scalar"
    return None


def _parameter_lists(code: str, function: str) -> list[str]:
    """The parameter lists of every definition of `function` in the file (calls are not definitions)."""
    found = []
    for match in re.finditer(rf"(?<![\w.:>-])(?:\w+\s*::\s*)*{re.escape(function)}\s*\(", code):
        before = code[: match.start()].rstrip()
        if not before or not re.search(r"[\w*&>]$", before) or re.search(r"\b(return|new|throw)$", before):
            continue  # a call or an expression, not a definition's return type
        opening = match.end() - 1
        closing = _closing(code, opening)
        if closing is None:
            continue
        after = code[closing + 1 :]
        if re.match(r"\s*(?:const\s*)?(?:noexcept\s*)?(?:->\s*[\w:<> ]+?)?\s*\{", after):
            found.append(code[opening + 1 : closing])
    return found


def exported_parameters(source: str) -> list[Parameter] | None:
    """The parameters of the function exported as `run`, or None when the source does not say for sure."""
    code = code_only(source)
    exports = list(_EXPORT.finditer(code))
    if len(exports) != 1:
        return None
    closing = _closing(code, code.index("(", exports[0].start()))
    if closing is None:
        return None
    target = code[exports[0].end() : closing].strip()
    if target.startswith("["):  # a lambda: its parameter list follows the capture
        capture_end = _closing(code, code.index("[", exports[0].end()))
        if capture_end is None or not code[capture_end + 1 :].lstrip().startswith("("):
            return None
        opening = code.index("(", capture_end)
        end = _closing(code, opening)
        lists = [code[opening + 1 : end]] if end is not None else []
    else:
        name = re.sub(r"<.*>", "", target.lstrip("&").strip()).split("::")[-1].strip()
        if not re.fullmatch(r"\w+", name):
            return None
        lists = _parameter_lists(code, name)
    names = _Names(code)
    readings = []
    for listed in lists:
        texts = [] if listed.strip() in ("", "void") else split_top_level(listed)
        parameters = []
        for text in texts:
            kind = _kind(text, names)
            if kind is None:
                return None
            parameters.append(Parameter(" ".join(text.split()), kind))
        readings.append(parameters)
    if not readings or any([p.kind for p in r] != [p.kind for p in readings[0]] for r in readings):
        return None  # not defined here, or overloads that differ: the compiler decides, not this reader
    return readings[0]


def expected_parameters(definition: Definition) -> list[tuple[str, Kind, str]]:
    """(name, kind, description) of what `run` must take: the inputs in order, then the outputs."""
    expected: list[tuple[str, Kind, str]] = []
    for group in (definition.inputs, definition.outputs):
        for name, spec in group.items():
            kind: Kind = "scalar" if not spec.shape else "tensor"
            shape = f"[{', '.join(spec.shape)}]" if spec.shape else ""
            expected.append((name, kind, f"{name}: {spec.dtype}{shape}"))
    return expected


def check_abi(source: str, definition: Definition) -> str | None:
    """None when `run` takes what the task passes (or cannot be read for sure); else why, both signatures."""
    found = exported_parameters(source)
    if found is None:
        return None
    expected = expected_parameters(definition)
    if [p.kind for p in found] == [kind for _, kind, _ in expected]:
        return None
    wanted = ", ".join(
        f"{'tvm::ffi::TensorView' if kind == 'tensor' else 'scalar'} {text}" for _, kind, text in expected
    )
    written = ", ".join(p.text for p in found)
    return (
        f"`run` takes {len(found)} parameter{'' if len(found) == 1 else 's'} ({written}); "
        f"{definition.name} passes {len(expected)}, its inputs then its outputs ({wanted})"
    )


def abi_checked(stage: BuildStage, source: str, definition: Definition) -> BuildStage:
    """A passed build whose `run` does not take the task's inputs and outputs becomes `abi_mismatch`,
    before anything runs it (after the build, so a file that does not compile keeps its compiler errors)."""
    if stage.status != Status.passed:
        return stage
    message = check_abi(source, definition)
    if message is None:
        return stage
    return stage.model_copy(update={"status": Status.abi_mismatch, "message": message, "errors": [message]})
