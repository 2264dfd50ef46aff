"""Which lines of a listing belong to the target's instruction families, for marking in the code pane.

SASS lines are matched on their opcode (the static tier's family table); PTX and CUDA lines
(inline asm) on the PTX instruction that produces that family, so the mark follows a wgmma from the
source to the SASS.
"""

from __future__ import annotations

import re
from functools import cache

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.build.source_text import without_comments

# family -> SASS opcode alternatives, from the static tier's own table.
_SASS: dict[str, str] = {family: "|".join(sorted(ops)) for family, ops in FAMILIES.items()}

# family -> PTX instruction pattern; TMA before BULK since both start cp.async.bulk.
_PTX: dict[str, str] = {
    "GMMA": r"wgmma\.mma_async",
    "TMA": r"(?:cp\.async\.bulk|cp\.reduce\.async\.bulk|cp\.async\.bulk\.prefetch)\.tensor",
    "BULK": r"cp\.(?:reduce\.)?async\.bulk(?!\.tensor)",
    "MBARRIER": r"mbarrier\.",
    "SETMAXNREG": r"setmaxnreg\.",
    "TCGEN05_MMA": r"tcgen05\.mma",
    "TMEM": r"tcgen05\.(?:ld|st)\b",
    "TCGEN05_OTHER": r"tcgen05\.(?:alloc|dealloc|relinquish_alloc_permit|commit|fence|wait|cp|shift)",
}

_SHARED = ("TMA", "BULK", "MBARRIER", "SETMAXNREG")
TARGET_FAMILIES: dict[str, tuple[str, ...]] = {
    "hopper": ("GMMA", *_SHARED),
    "blackwell": ("TCGEN05_MMA", "TMEM", "TCGEN05_OTHER", *_SHARED),
}

# Short tags for the gutter (six cells at most).
TAGS: dict[str, str] = {
    "GMMA": "GMMA",
    "TMA": "TMA",
    "BULK": "BULK",
    "MBARRIER": "MBAR",
    "SETMAXNREG": "MAXREG",
    "TCGEN05_MMA": "UTCMMA",
    "TMEM": "TMEM",
    "TCGEN05_OTHER": "TCGEN5",
}


def families_for(target: str) -> tuple[str, ...]:
    return TARGET_FAMILIES.get(target, ())


# Literal text every line of a family holds: found with str.find across the whole listing (fast),
# then only the lines found are matched against the family patterns.
_PTX_NEEDLES = (
    "wgmma.mma_async",
    "cp.async.bulk",
    "cp.reduce.async.bulk",
    "mbarrier.",
    "setmaxnreg.",
    "tcgen05.",
)


@cache
def _pattern(language: str, target: str) -> re.Pattern[str] | None:
    families = families_for(target)
    if not families:
        return None
    if language == "sass":
        alternatives = "|".join(f"(?P<{f}>{_SASS[f]})" for f in families)
        # Address, optional predicate, then the opcode.
        return re.compile(
            rf"^[ \t]*/\*[0-9a-fA-F]{{4,}}\*/[ \t]+(?:@!?U?P[0-7T][ \t]+)?(?:{alternatives})\b", re.MULTILINE
        )
    if language in ("ptx", "cuda"):
        alternatives = "|".join(f"(?P<{f}>{_PTX[f]})" for f in families)
        return re.compile(rf"^.*?(?:{alternatives})", re.MULTILINE)
    return None


def _needles(language: str, target: str) -> tuple[str, ...]:
    if language == "sass":
        return tuple(op for family in families_for(target) for op in FAMILIES[family])
    return _PTX_NEEDLES


def mark_lines(text: str, language: str, target: str) -> dict[int, str]:
    """0-based line number -> family, for every line holding one of the target's family instructions."""
    pattern = _pattern(language, target)
    if pattern is None:
        return {}
    if language in ("cuda", "ptx"):
        text = without_comments(text)  # a comment quoting an instruction marks nothing
    found: dict[int, int] = {}  # line -> its start offset
    for needle in _needles(language, target):
        position = text.find(needle)
        while position >= 0:
            start = text.rfind("\n", 0, position) + 1
            found.setdefault(start, 0)
            end = text.find("\n", position)
            position = -1 if end < 0 else text.find(needle, end)
    marks: dict[int, str] = {}
    line = 0
    counted = 0
    for start in sorted(found):
        line += text.count("\n", counted, start)
        counted = start
        end = text.find("\n", start)
        match = pattern.match(text, start, end if end >= 0 else len(text))
        if match is not None and match.lastgroup is not None:
            marks[line] = match.lastgroup
    return marks
