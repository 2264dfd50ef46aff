"""The documents of the code pane for one turn: CUDA source, PTX, SASS and the diff to the previous turn.

PTX and SASS come from the build artefacts an evaluation recorded; a session replayed on another
machine usually lacks them, and the pane says so instead of guessing. Reading and parsing a listing
happens in a worker, never on the UI thread: a tab asks for it, says "loading" meanwhile, and the
screen shows the listing once it is ready. An evaluation that kept a cubin but no SASS dump has its
cubin disassembled the same way when the SASS tab asks for it.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Callable
from pathlib import Path

from workbench.evaluate.result import EvalResult, Status
from workbench.evaluate.sass import disassemble
from workbench.evaluate.toolchain import find_tool
from workbench.tui.document import CodeDocument
from workbench.tui.model import TurnView

DocumentMaker = Callable[[], CodeDocument]
# Asks for a cubin to be disassembled (by `ArtifactCache.disassemble`, in a worker).
DisassemblyRequest = Callable[[Path], None]
# Asks for a listing (path, language, what) to be read and parsed (by `ArtifactCache.load`, in a worker).
LoadRequest = Callable[[Path, str, str], None]

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

    def __init__(
        self, request_load: LoadRequest, request_disassembly: DisassemblyRequest, size: int = 16
    ) -> None:
        self._size = size
        self._documents: dict[tuple[str, str, float], CodeDocument] = {}
        self._request_load = request_load
        self._request_disassembly = request_disassembly
        self._loading: set[str] = set()
        self._disassembling: set[str] = set()

    def _keep(self, key: tuple[str, str, float], document: CodeDocument) -> None:
        if len(self._documents) >= self._size:
            self._documents.pop(next(iter(self._documents)))
        self._documents[key] = document

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
        found = self._documents.get((path, language, stamp))
        if found is not None:
            return found
        if path not in self._loading:
            self._loading.add(path)
            self._request_load(file, language, what)
        return CodeDocument.missing(f"loading {what} from {path} …")

    async def load(self, file: Path, language: str, target: str, what: str) -> None:
        """Read and parse a listing in a thread and keep it, or why there is none, for `listing`."""
        try:
            try:
                stamp = file.stat().st_mtime
            except OSError:
                return  # gone meanwhile: `listing` says so
            document = await asyncio.to_thread(_read_listing, file, language, target, what)
            # Kept even when unreadable, so showing the tab again does not start it again.
            self._keep((str(file), language, stamp), document)
        finally:
            self._loading.discard(str(file))

    def sass(self, result: EvalResult | None, target: str) -> CodeDocument:
        """The SASS dump the evaluation kept, else its cubin disassembled (asked for, shown when done)."""
        sass_path = result.stages.static.sass_path if result else None
        cubin_path = result.stages.build.cubin_path if result else None
        if cubin_path is None or sass_path is not None and Path(sass_path).is_file():
            if result is not None and sass_path is None and result.stages.build.status == Status.passed:
                return CodeDocument.missing(
                    "SASS not available: this evaluation kept no SASS dump and no cubin"
                )
            return self.listing(sass_path, "sass", target, "SASS", result)
        dump = "its SASS dump is not on this machine" if sass_path else "this evaluation kept no SASS dump"
        cubin = Path(cubin_path)
        try:
            stamp = cubin.stat().st_mtime
        except OSError:
            return CodeDocument.missing(
                f"SASS not available: {dump}, nor its cubin (recorded at {cubin_path})"
            )
        found = self._documents.get((cubin_path, "sass", stamp))
        if found is not None:
            return found
        if find_tool("cuobjdump") is None:
            return CodeDocument.missing(
                f"SASS not available: {dump}, and no cuobjdump was found to disassemble its cubin "
                f"{cubin_path} (install the CUDA toolkit or nvidia-cuda-cuobjdump)"
            )
        if cubin_path not in self._disassembling:
            self._disassembling.add(cubin_path)
            self._request_disassembly(cubin)
        return CodeDocument.missing(f"{dump}: disassembling its cubin {cubin_path} with cuobjdump …")

    async def disassemble(self, cubin: Path, target: str) -> None:
        """Disassemble `cubin` and keep its listing, or why there is none, for `sass` to return."""
        try:
            try:
                stamp = cubin.stat().st_mtime
            except OSError:
                return  # gone meanwhile: `sass` says so
            try:
                found = await disassemble(cubin)
            except OSError as exc:
                document = CodeDocument.missing(f"SASS not available: cuobjdump could not run: {exc}")
            else:
                if found.text is None:
                    document = CodeDocument.missing(f"SASS not available: {found.error}")
                else:
                    # A large listing takes a moment to split and mark: not on the UI thread.
                    document = await asyncio.to_thread(CodeDocument.from_text, found.text, "sass", target)
            # Kept even when it failed, so showing the tab again does not start it again.
            self._keep((str(cubin), "sass", stamp), document)
        finally:
            self._disassembling.discard(str(cubin))

    def documents(
        self, turn: TurnView, previous_source: str | None, target: str, pending: str | None = None
    ) -> dict[str, DocumentMaker]:
        """Makers of the four tabs' documents: the code pane builds a tab's when it is shown.

        `pending`: a candidate waiting for the person's review (not yet an event of the turn).
        """
        source = turn.candidate.source if turn.candidate else pending

        def cuda() -> CodeDocument:
            if source is None:
                return CodeDocument.missing("no candidate yet in this turn")
            return CodeDocument.from_text(source, "cuda", target)

        return {
            "cuda": cuda,
            **self.listings(turn.evaluation, target),
            "diff": lambda: diff_document(turn.number, source, previous_source),
        }

    def listings(self, result: EvalResult | None, target: str) -> dict[str, DocumentMaker]:
        """Makers of the PTX and SASS tabs' documents, the listings of files the evaluation kept."""
        ptx_path = result.stages.build.ptx_path if result else None
        return {
            "ptx": lambda: self.listing(ptx_path, "ptx", target, "PTX", result),
            "sass": lambda: self.sass(result, target),
        }

    def prefetch(self, result: EvalResult, target: str) -> None:
        """Ask for a verdict's PTX and SASS ahead of time, so showing them is instant."""
        self.listing(result.stages.build.ptx_path, "ptx", target, "PTX", result)
        self.listing(result.stages.static.sass_path, "sass", target, "SASS", result)


def _read_listing(file: Path, language: str, target: str, what: str) -> CodeDocument:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return CodeDocument.missing(f"{what} not readable: {exc.strerror}")
    return CodeDocument.from_text(text, language, target)


def tabs_reading(result: EvalResult, path: Path) -> list[str]:
    """The code pane's tabs whose listing, for this evaluation, comes from `path` (a listing or a cubin)."""
    build, static = result.stages.build, result.stages.static
    reads = {"ptx": [build.ptx_path], "sass": [static.sass_path, build.cubin_path]}
    return [tab for tab, paths in reads.items() if str(path) in paths]


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
