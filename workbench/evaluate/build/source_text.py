"""C/C++ (and PTX) text with comments or literals blanked out, offsets and line numbers kept.

A comment that quotes an instruction or a signature must not count as code. Blanking keeps every
character's position (newlines stay), so a match in the result points at the same line and column
of the source.
"""

from __future__ import annotations

import re

# A string or character literal, or a comment (a line comment, or a block one, possibly unclosed).
_LITERAL_OR_COMMENT = re.compile(
    r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?(?:\*/|\Z)', re.DOTALL
)
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blank(text: str) -> str:
    return _NOT_NEWLINE.sub(" ", text)


def without_comments(text: str) -> str:
    """Comments blanked; string literals kept (inline asm lives in them)."""
    return _LITERAL_OR_COMMENT.sub(
        lambda m: m.group(0) if m.group(0)[0] in "\"'" else _blank(m.group(0)), text
    )


def code_only(text: str) -> str:
    """Comments and the insides of string and character literals blanked: what the compiler parses."""

    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found[0] in "\"'":
            return found[0] + _blank(found[1:-1]) + found[-1]
        return _blank(found)

    return _LITERAL_OR_COMMENT.sub(blank, text)


OPENING, CLOSING = "([{<", ")]}>"  # brackets, each pair at the same index


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside any brackets (template arguments, PTX's `{%f1, %f2}` vectors),
    each part stripped."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char in OPENING:
            depth += 1
        elif char in CLOSING:
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts]
