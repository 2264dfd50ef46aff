"""A listing for the code pane: its lines, language and the lines of the target's families."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from workbench.tui.families import TAGS, mark_lines

# cuobjdump prints each instruction's encoding as a trailing comment and a second comment-only
# line; the pane shows the instruction, so both go, and the deep indentation with them.
_SASS_ENCODING_LINE = re.compile(r"^[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/[ \t]*\n", re.MULTILINE)
_SASS_ENCODING_TAIL = re.compile(r"[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/[ \t]*$", re.MULTILINE)
_SASS_ADDRESS = re.compile(r"^[ \t]+(/\*[0-9a-fA-F]{4,}\*/)[ \t]+(@!?U?P[0-7T][ \t]+)?", re.MULTILINE)


def compact_sass(text: str) -> str:
    text = _SASS_ENCODING_LINE.sub("", text)
    text = _SASS_ENCODING_TAIL.sub("", text)
    # Address, then the predicate in a column of its own so the opcodes line up.
    return _SASS_ADDRESS.sub(lambda m: f"  {m.group(1)} {(m.group(2) or '').strip():>6} ", text)


@dataclass
class CodeDocument:
    """What a code view shows: the text split into lines, its language, and the marked lines."""

    language: str
    lines: list[str]
    marks: dict[int, str] = field(default_factory=dict)
    unavailable: str = ""
    width: int = 0

    @classmethod
    def from_text(cls, text: str, language: str, target: str = "") -> CodeDocument:
        text = text.expandtabs(4)
        if language == "sass":
            text = compact_sass(text)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        marks = mark_lines(text, language, target) if target else {}
        return cls(language, lines, marks, width=max(map(len, lines), default=0))

    @classmethod
    def missing(cls, reason: str) -> CodeDocument:
        return cls("text", [], unavailable=reason)

    def family_counts(self) -> Counter[str]:
        return Counter(self.marks.values())

    def summary(self) -> str:
        if self.unavailable:
            return self.unavailable
        parts = [f"{len(self.lines):,} lines"]
        parts += [f"{TAGS.get(f, f)} ×{n}" for f, n in sorted(self.family_counts().items())]
        return " · ".join(parts)
