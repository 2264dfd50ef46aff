"""Find the candidate kernel in a model's answer: the last complete fenced CUDA (or Python) block."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.evaluate.request import Language

ACCEPTED_TAGS = frozenset({"cuda", "cu", "cpp", "c++", ""})
PYTHON_TAGS = frozenset({"python", "py", "python3", ""})
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_EXPORT = "TVM_FFI_DLL_EXPORT_TYPED_FUNC"
# What marks the kernel among a language's blocks, strongest first.
_MARKERS = {"cuda": (_EXPORT, "__global__"), "triton": ("def run(", "@triton.jit")}


@dataclass(frozen=True)
class CodeBlock:
    tag: str
    code: str


def fenced_blocks(text: str) -> list[CodeBlock]:
    """Every closed fenced block, in order; a block left open at the end (a cut answer) is not returned."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        tag = opening["info"].strip().split(" ")[0].lower() if opening["info"].strip() else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[j])
            j += 1
        if j == len(lines):
            break
        blocks.append(CodeBlock(tag, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def extract_kernel(text: str, language: Language = "cuda") -> str | None:
    """The candidate source, or None when the answer has no usable block.

    CUDA: among complete blocks tagged cuda, cu, cpp, c++ or untagged, the last one that exports `run`
    wins; failing that the last one with a `__global__` kernel; failing that the last non-empty one (so
    an untagged shell line after the kernel does not replace it). Triton: the same among blocks tagged
    python, py, python3 or untagged, with `def run(` and then `@triton.jit` as the marks.
    """
    tags = PYTHON_TAGS if language == "triton" else ACCEPTED_TAGS
    accepted = [b.code for b in fenced_blocks(text) if b.tag in tags and b.code.strip()]
    for marker in _MARKERS[language]:
        with_marker = [code for code in accepted if marker in code]
        if with_marker:
            return with_marker[-1]
    return accepted[-1] if accepted else None
