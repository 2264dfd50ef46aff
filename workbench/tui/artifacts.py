"""The documents of the code pane for one turn: CUDA source, PTX, SASS and the diff to the previous turn.

PTX and SASS come from the build artefacts an evaluation recorded; a session replayed on another
machine usually lacks them, and the pane says so instead of guessing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path

from workbench.evaluate.result import EvalResult, Status
from workbench.tui.document import CodeDocument
from workbench.tui.model import TurnView

DocumentMaker = Callable[[], CodeDocument]

# nvcc: "kernel.cu(123): error: …"; clang-style: "kernel.cu:123:4: error: …".
_ERROR_LINE = re.compile(r"(?:\((\d+)\)|:(\d+)(?::\d+)?):\s*(?:fatal\s+)?error", re.IGNORECASE)


def first_error_line(result: EvalResult | None) -> int | None:
    """1-based source line of the first compiler error, when the compiler named one."""
    if result is None:
        return None
    for error in result.stages.build.errors or result.stages.build.compiler_output.splitlines():
        match = _ERROR_LINE.search(error)
        if match:
            return int(match.group(1) or match.group(2))
    return None


class ArtifactCache:
    """Parsed listings by path and modification time, so going back to a turn costs nothing."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._documents: dict[tuple[str, str, float], CodeDocument] = {}

    def listing(
        self, path: str | None, language: str, target: str, what: str, result: EvalResult | None
    ) -> CodeDocument:
        if result is None:
            return CodeDocument.missing(f"no {what} yet: this turn has not been built")
        if path is None:
            if result.stages.build.status not in (Status.passed, Status.not_run):
                return CodeDocument.missing(
                    f"no {what}: the build stopped ({result.stages.build.status.value})"
                )
            return CodeDocument.missing(f"{what} not available: this evaluation kept none")
        file = Path(path)
        try:
            stamp = file.stat().st_mtime
        except OSError:
            return CodeDocument.missing(f"{what} not available on this machine (recorded at {path})")
        key = (path, language, stamp)
        found = self._documents.get(key)
        if found is None:
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                return CodeDocument.missing(f"{what} not readable: {exc.strerror}")
            found = CodeDocument.from_text(text, language, target)
            if len(self._documents) >= self._size:
                self._documents.pop(next(iter(self._documents)))
            self._documents[key] = found
        return found

    def documents(
        self, turn: TurnView, previous_source: str | None, target: str, pending: str | None = None
    ) -> dict[str, DocumentMaker]:
        """Makers of the four tabs' documents: the code pane builds a tab's when it is shown.

        `pending`: a candidate waiting for the person's review (not yet an event of the turn).
        """
        result = turn.evaluation
        source = turn.candidate.source if turn.candidate else pending
        ptx_path = result.stages.build.ptx_path if result else None
        sass_path = result.stages.static.sass_path if result else None

        def cuda() -> CodeDocument:
            if source is None:
                return CodeDocument.missing("no candidate yet in this turn")
            return CodeDocument.from_text(source, "cuda", target)

        return {
            "cuda": cuda,
            "ptx": lambda: self.listing(ptx_path, "ptx", target, "PTX", result),
            "sass": lambda: self.listing(sass_path, "sass", target, "SASS", result),
            "diff": lambda: diff_document(turn.number, source, previous_source),
        }

    def prefetch(self, result: EvalResult, target: str) -> None:
        """Parse a verdict's PTX and SASS ahead of time (from a worker thread), so showing them is instant."""
        self.listing(result.stages.build.ptx_path, "ptx", target, "PTX", result)
        self.listing(result.stages.static.sass_path, "sass", target, "SASS", result)


def diff_document(number: int, source: str | None, previous_source: str | None) -> CodeDocument:
    if source is None:
        return CodeDocument.missing("no candidate yet in this turn")
    if previous_source is None:
        return CodeDocument.missing("the first candidate: nothing earlier to compare with")
    lines = difflib.unified_diff(
        previous_source.splitlines(),
        source.splitlines(),
        "previous turn",
        f"turn {number}",
        lineterm="",
    )
    text = "\n".join(lines)
    if not text:
        return CodeDocument.missing("same source as the previous candidate")
    return CodeDocument.from_text(text, "diff")
