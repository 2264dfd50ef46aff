"""A listing for the code pane: its lines, language and the lines of the target's families."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from workbench.evaluate.build.lineinfo import LineTable, listing_lines
from workbench.evaluate.gpu.demangle import demangle
from workbench.evaluate.gpu.source_counters import listing_instructions, match_listing
from workbench.evaluate.result import InstructionCounts
from workbench.tui.families import TAGS, mark_lines

# cuobjdump prints each instruction's encoding as a trailing comment and a second comment-only
# line; the pane shows the instruction, so both go, and the deep indentation with them. Dropping the
# comment-only lines is done up front (it decides the line count); the rest, line by line, when a
# line is first shown, so a 20k-instruction listing opens at once.
_SASS_ENCODING_ONLY = re.compile(r"\n[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/[ \t]*(?=\n)")
_SASS_ENCODING_TAIL = re.compile(r"[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/[ \t]*$")
_SASS_ADDRESS = re.compile(r"^[ \t]+(/\*[0-9a-fA-F]{4,}\*/)[ \t]+(@!?U?P[0-7T][ \t]+)?")


_FUNCTION = re.compile(r"^([ \t]*Function[ \t]*:[ \t]*)(\S+)[ \t]*$", re.MULTILINE)


def readable_functions(text: str) -> str:
    """`Function : _ZN…` headers with the kernel's C++ name, as the build and the verdict name it."""
    names = demangle([match.group(2) for match in _FUNCTION.finditer(text)])
    return _FUNCTION.sub(lambda m: m.group(1) + names.get(m.group(2), m.group(2)), text)


def without_encodings(text: str) -> str:
    """The listing without its encoding-only lines."""
    return _SASS_ENCODING_ONLY.sub("", text)


def compact_sass_line(line: str) -> str:
    line = _SASS_ENCODING_TAIL.sub("", line).expandtabs(4)
    match = _SASS_ADDRESS.match(line)
    if match is None:
        return line.rstrip()
    # Address, then the predicate in a column of its own so the opcodes line up.
    return f"  {match.group(1)} {(match.group(2) or '').strip():>6} {line[match.end() :].rstrip()}"


def compact_sass(text: str) -> str:
    return "\n".join(compact_sass_line(line) for line in without_encodings(text).split("\n"))


@dataclass
class CodeDocument:
    """What a code view shows: the text split into lines, its language, and the marked lines."""

    language: str
    lines: list[str]
    marks: dict[int, str] = field(default_factory=dict)
    unavailable: str = ""
    note: str = ""  # said before the line count: what the listing is, when it is not the plain thing
    source_lines: dict[int, int] = field(default_factory=dict)  # SASS line -> 1-based CUDA line
    kernels: dict[int, str] = field(default_factory=dict)  # SASS `Function :` line -> its mangled name
    executed: dict[int, InstructionCounts] = field(default_factory=dict)  # SASS line -> profiled counts
    profiled: int = 0  # instructions the profile counted in this listing's kernels (placed or not)
    samples: int = 0  # ncu's warp-state samples over the placed instructions
    width: int = 0
    _shown: dict[int, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_text(
        cls, text: str, language: str, target: str = "", line_table: LineTable | None = None
    ) -> CodeDocument:
        """`line_table` (SASS): the cubin's, so each instruction knows its CUDA line."""
        source_lines: dict[int, int] = {}
        kernels: dict[int, str] = {}
        if language == "sass":
            text = without_encodings(text)  # tabs are expanded line by line, when shown
            if line_table:
                source_lines = listing_lines(text.split("\n"), line_table)  # mangled names, as the table has
            # Profiled counts name kernels mangled too: keep each header's symbol before it is made readable.
            kernels = {
                text.count("\n", 0, match.start()): match.group(2) for match in _FUNCTION.finditer(text)
            }
            text = readable_functions(text)
        else:
            text = text.expandtabs(4)
        marks = mark_lines(text, language, target) if target else {}
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        document = cls(language, lines, marks, source_lines=source_lines, kernels=kernels)
        document.width = document._widest()
        return document

    def with_counts(self, counts: Mapping[str, Sequence[InstructionCounts]]) -> CodeDocument:
        """This SASS listing with the profiled call's counts on its instruction lines (a copy: the listing
        is shared by every turn built from the same code, the counts are one evaluation's)."""
        raw = [
            f"Function : {self.kernels[i]}" if i in self.kernels else line
            for i, line in enumerate(self.lines)
        ]
        match = match_listing(listing_instructions(raw), counts)
        if not match.rows:
            return self
        samples = sum(row.samples for row in match.lines.values())
        return replace(self, executed=match.lines, profiled=match.rows, samples=samples)

    def samples_at(self, index: int) -> str:
        """The warp samples at the instruction on line `index`: its share of the listing's, and why the
        warps there stalled; "" without samples."""
        counts = self.executed.get(index)
        if counts is None or not self.samples or not counts.samples:
            return ""
        reasons = counts.stall_text(3)
        return f"{counts.samples / self.samples:.1%} of warp samples" + (f" ({reasons})" if reasons else "")

    def counts_legend(self) -> str:
        """What the counts column of the gutter holds, and how much of the profile found its line."""
        if not self.profiled:
            return ""
        legend = "executed: warp instructions · threads on"
        if len(self.executed) < self.profiled:
            legend += f" ({len(self.executed):,} of {self.profiled:,} placed)"
        return legend

    def source_line_at(self, index: int) -> int | None:
        """The CUDA line of the instruction at `index`, or of the nearest one above it (a label, a header)."""
        for line in range(index, -1, -1):
            if line in self.source_lines:
                return self.source_lines[line]
        return None

    def instructions_of(self, source_line: int) -> list[int]:
        """The SASS lines (0-based) that came from a 1-based CUDA line."""
        return sorted(index for index, line in self.source_lines.items() if line == source_line)

    def _widest(self) -> int:
        if not self.lines:
            return 0
        if self.language != "sass":
            return max(map(len, self.lines))
        # Instruction lines shrink by about the same amount when compacted: measure the longest one
        # compacted; the few other lines (headers) as they are.
        longest = max(range(len(self.lines)), key=lambda i: len(self.lines[i]))
        others = (len(line.expandtabs(4)) for line in self.lines if "/*" not in line[:24])
        return max(len(self.line(longest)), max(others, default=0)) + 1

    def line(self, index: int) -> str:
        """Line `index` as shown (a SASS line compacted the first time it is asked for)."""
        if self.language != "sass":
            return self.lines[index]
        shown = self._shown.get(index)
        if shown is None:
            shown = self._shown[index] = compact_sass_line(self.lines[index])
        return shown

    @classmethod
    def missing(cls, reason: str) -> CodeDocument:
        return cls("text", [], unavailable=reason)

    def family_counts(self) -> Counter[str]:
        return Counter(self.marks.values())

    def summary(self) -> str:
        if self.unavailable:
            return self.unavailable
        parts = [self.note] if self.note else []
        parts.append(f"{len(self.lines):,} lines")
        parts += [f"{TAGS.get(f, f)} ×{n}" for f, n in sorted(self.family_counts().items())]
        return " · ".join(parts)
