"""The documents of the code pane for one turn: CUDA source, PTX, SASS and the diff to the previous turn.

PTX and SASS come, in this order, from the session itself (the evaluation event carries them,
compressed), from the build folder the evaluation recorded (`cache:<key>/…` in this machine's build
cache, or an older session's absolute path where it exists), from its cubin (disassembled here), or
from a rebuild here that is shown only when it provably is the recorded code. Reading, unpacking,
disassembling and rebuilding happen in a worker, never on the UI thread: a tab says what is under
way meanwhile, and the screen shows the listing once it is ready.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from workbench.agent.extract import extract_kernel
from workbench.evaluate.build.lineinfo import LineTable, line_table
from workbench.evaluate.build.sass import disassemble
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import EvalResult, Status
from workbench.session.hostpaths import local_file
from workbench.tui.document import CodeDocument
from workbench.tui.model import TurnView
from workbench.tui.rebuild import can_rebuild
from workbench.tui.rebuild import rebuild as rebuild_here

DocumentMaker = Callable[[], CodeDocument]
# Runs a slow job (read, unpack, disassemble, rebuild) in a worker, then shows what it kept.
RunJob = Callable[[Callable[[], Awaitable[None]]], None]
Language = Literal["ptx", "sass"]

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
    """The PTX and SASS documents of turns, parsed once and kept, so going back to a turn costs nothing.

    A listing comes from the session (carried, compressed), from the build folder the evaluation
    recorded, from its cubin (disassembled here), or from a rebuild here checked against the
    recording, in that order. Slow work is a job the screen runs in a worker (`run_job`); the tab
    says what is under way meanwhile, and the screen shows the listing when the job is done.
    """

    def __init__(self, run_job: RunJob, size: int = 32) -> None:
        self._size = size
        self._documents: dict[tuple[object, ...], CodeDocument] = {}
        self._run_job = run_job
        self._running: set[tuple[object, ...]] = set()

    def _keep(self, key: tuple[object, ...], document: CodeDocument) -> None:
        if len(self._documents) >= self._size:
            self._documents.pop(next(iter(self._documents)))
        self._documents[key] = document

    def _start(self, key: tuple[object, ...], job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` once for `key` (it keeps the document; a failure is kept as a document too)."""
        if key in self._running:
            return
        self._running.add(key)

        async def run() -> None:
            try:
                await job()
            finally:
                self._running.discard(key)

        self._run_job(run)

    # --- the two listing tabs ----------------------------------------------------------------------

    def listings(self, turn: TurnView, target: str, *, rebuild: bool = True) -> dict[str, DocumentMaker]:
        """Makers of the PTX and SASS tabs' documents; `rebuild=False` never starts nvcc."""
        return {
            "ptx": lambda: self.ptx(turn, target, rebuild=rebuild),
            "sass": lambda: self.sass(turn, target, rebuild=rebuild),
        }

    def prefetch(self, turn: TurnView, target: str) -> None:
        """Ask for a verdict's PTX and SASS ahead of time (reading only), so showing them is instant."""
        for make in self.listings(turn, target, rebuild=False).values():
            make()

    def ptx(self, turn: TurnView, target: str, *, rebuild: bool = True) -> CodeDocument:
        result = turn.evaluation
        if result is None:
            return CodeDocument.missing("no PTX yet: this turn has not been built")
        if turn.listings is not None and turn.listings.ptx is not None:
            return self._carried(turn, "ptx", target)
        path = result.stages.build.ptx_path
        if path is None:
            if result.stages.build.status not in (Status.passed, Status.not_run):
                return CodeDocument.missing(f"no PTX: the build stopped ({result.stages.build.status.value})")
            return CodeDocument.missing("PTX not available: this evaluation kept none")
        here = local_file(path)  # `cache:<key>/kernel.ptx` in this machine's build cache
        if here is not None:
            return self._file(here, "ptx", target, "PTX")
        return self._rebuilt(
            turn, "ptx", target, f"PTX not available on this machine (recorded at {path})", rebuild
        )

    def sass(self, turn: TurnView, target: str, *, rebuild: bool = True) -> CodeDocument:
        """The SASS dump the evaluation kept, else its cubin disassembled, else a checked rebuild; with the
        profiled call's executed counts on its lines when the evaluation has them."""
        document = self._sass(turn, target, rebuild=rebuild)
        counts = turn.evaluation.stages.dynamic.source_counts if turn.evaluation else {}
        return document.with_counts(counts) if counts and not document.unavailable else document

    def _sass(self, turn: TurnView, target: str, *, rebuild: bool) -> CodeDocument:
        result = turn.evaluation
        if result is None:
            return CodeDocument.missing("no SASS yet: this turn has not been built")
        if turn.listings is not None and turn.listings.sass is not None:
            return self._carried(turn, "sass", target)
        sass_path, cubin_path = result.stages.static.sass_path, result.stages.build.cubin_path
        sass_here, cubin_here = local_file(sass_path), local_file(cubin_path)
        if sass_here is not None:
            return self._file(sass_here, "sass", target, "SASS", cubin_here)
        if cubin_here is not None:
            return self._disassembled(cubin_here, target, sass_path)
        if result.stages.build.status not in (Status.passed, Status.not_run):
            return CodeDocument.missing(f"no SASS: the build stopped ({result.stages.build.status.value})")
        if sass_path is None and cubin_path is None:
            return CodeDocument.missing("SASS not available: this evaluation kept no SASS dump and no cubin")
        dump = "its SASS dump is not on this machine" if sass_path else "this evaluation kept no SASS dump"
        recorded = f"recorded at {cubin_path}" if cubin_path else f"recorded at {sass_path}"
        return self._rebuilt(
            turn, "sass", target, f"SASS not available: {dump}, nor its cubin ({recorded})", rebuild
        )

    # --- where a listing comes from ------------------------------------------------------------------

    def _carried(self, turn: TurnView, which: Language, target: str) -> CodeDocument:
        assert turn.listings is not None
        listings = turn.listings
        key = ("carried", id(listings), which, target)
        found = self._documents.get(key)
        if found is not None:
            return found

        async def unpack() -> None:
            text = await asyncio.to_thread(listings.text, which)
            table = await asyncio.to_thread(listings.line_table) if which == "sass" else None
            document = await asyncio.to_thread(CodeDocument.from_text, text or "", which, target, table)
            self._keep(key, document)

        self._start(key, unpack)
        return CodeDocument.missing(f"unpacking the {which.upper()} this session carries …")

    def lines_missing(self, turn: TurnView) -> str | None:
        """Why a carried SASS listing maps no line to CUDA, when a rebuild here could map it."""
        listings = turn.listings
        if listings is None or listings.sass is None or listings.lines is not None:
            return None
        return "this session carries its SASS but not the cubin's line table (recorded before it was kept)"

    async def map_lines(self, turn: TurnView, target: str) -> str | None:
        """The carried SASS again with its CUDA lines, from a rebuild here proven to be the recorded
        cubin (its sha256); None once the SASS tab's document has them, else why not."""
        listings, candidate, result = turn.listings, turn.candidate, turn.evaluation
        if listings is None or candidate is None or result is None or listings.cubin_sha256 is None:
            return "the session recorded no cubin hash to check a rebuild against"
        if not can_rebuild():
            return "with nvcc and cuobjdump here the kernel would be rebuilt to map its lines"
        built = await rebuild_here(candidate.source, target, result.stages.static, listings.cubin_sha256)
        if built.sass is None or not built.lines:
            return built.why_not or "the rebuilt cubin has no line table"
        document = await asyncio.to_thread(CodeDocument.from_text, built.sass, "sass", target, built.lines)
        self._keep(("carried", id(listings), "sass", target), document)  # `sass` adds the counts
        return None

    def _file(
        self, file: Path, language: Language, target: str, what: str, cubin: Path | None = None
    ) -> CodeDocument:
        """A listing the build kept; a SASS dump with its cubin beside it learns its CUDA lines."""
        try:
            stamp = file.stat().st_mtime
        except OSError:
            return CodeDocument.missing(f"{what} not available on this machine (recorded at {file})")
        key = (str(file), language, stamp, target)
        found = self._documents.get(key)
        if found is not None:
            return found

        async def load() -> None:
            table = (
                await asyncio.to_thread(line_table, cubin) if cubin is not None and cubin.exists() else None
            )
            document = await asyncio.to_thread(_read_listing, file, language, target, what, table)
            self._keep(key, document)  # kept even when unreadable: showing the tab again does not retry

        self._start(key, load)
        return CodeDocument.missing(f"loading {what} from {file} …")

    def _disassembled(self, cubin: Path, target: str, sass_path: str | None) -> CodeDocument:
        dump = "its SASS dump is not on this machine" if sass_path else "this evaluation kept no SASS dump"
        key = (str(cubin), "sass", cubin.stat().st_mtime, target)
        found = self._documents.get(key)
        if found is not None:
            return found
        if find_tool("cuobjdump") is None:
            return CodeDocument.missing(
                f"SASS not available: {dump}, and no cuobjdump was found to disassemble its cubin "
                f"{cubin} (install the CUDA toolkit or nvidia-cuda-cuobjdump)"
            )

        async def run() -> None:
            try:
                found = await disassemble(cubin)
            except OSError as exc:
                document = CodeDocument.missing(f"SASS not available: cuobjdump could not run: {exc}")
            else:
                if found.text is None:
                    document = CodeDocument.missing(f"SASS not available: {found.error}")
                else:  # a large listing takes a moment to split and mark: not on the UI thread
                    table = await asyncio.to_thread(line_table, cubin)
                    document = await asyncio.to_thread(
                        CodeDocument.from_text, found.text, "sass", target, table
                    )
            self._keep(key, document)

        self._start(key, run)
        return CodeDocument.missing(f"{dump}: disassembling its cubin {cubin} with cuobjdump …")

    def _rebuilt(
        self, turn: TurnView, which: Language, target: str, missing: str, rebuild: bool
    ) -> CodeDocument:
        """The recorded candidate built here, shown once it is provably the recorded code."""
        result, candidate = turn.evaluation, turn.candidate
        assert result is not None
        cubin_sha = turn.listings.cubin_sha256 if turn.listings else None
        if candidate is None or cubin_sha is None and not result.stages.static.kernels:
            return CodeDocument.missing(missing)  # nothing to check a rebuild against
        if not can_rebuild():
            return CodeDocument.missing(
                f"{missing}; with nvcc and cuobjdump here it would be rebuilt and shown"
            )
        key = ("rebuilt", candidate.sha256, which, target)
        found = self._documents.get(key)
        if found is not None:
            return found
        if not rebuild:
            return CodeDocument.missing(missing)

        async def run() -> None:
            built = await rebuild_here(candidate.source, target, result.stages.static, cubin_sha)
            for language, text in (("ptx", built.ptx), ("sass", built.sass)):
                table = built.lines if language == "sass" else None
                document = (
                    CodeDocument.missing(f"{missing}; {built.why_not}")
                    if text is None
                    else await asyncio.to_thread(CodeDocument.from_text, text, language, target, table)
                )
                self._keep(("rebuilt", candidate.sha256, language, target), document)

        self._start(("rebuilt", candidate.sha256, target), run)  # one rebuild gives both tabs
        return CodeDocument.missing(f"{missing}: rebuilding it here with nvcc to show it …")

    # --- a turn's four tabs ------------------------------------------------------------------------

    def documents(
        self, turn: TurnView, previous_source: str | None, target: str, pending: str | None = None
    ) -> dict[str, DocumentMaker]:
        """Makers of the four tabs' documents: the code pane builds a tab's when it is shown.

        `pending`: a candidate waiting for the person's review (not yet an event of the turn).
        """
        source = turn.candidate.source if turn.candidate else pending

        def cuda() -> CodeDocument:
            if source is not None:
                return CodeDocument.from_text(source, "cuda", target)
            if any(c.action == "skip" for c in turn.controls):
                # Nothing was judged; the kernel the model wrote is still worth reading.
                answers = [m.content for m in turn.messages if m.role == "assistant"]
                written = extract_kernel(answers[-1]) if answers else None
                if written is None:
                    return CodeDocument.missing(
                        f"turn {turn.number} was skipped: nothing was built or judged"
                    )
                document = CodeDocument.from_text(written, "cuda", target)
                document.note = "skipped by the person, not judged: the model's kernel"
                return document
            return CodeDocument.missing("no candidate yet in this turn")

        return {
            "cuda": cuda,
            **self.listings(turn, target),
            "diff": lambda: diff_document(turn.number, source, previous_source),
        }


def _read_listing(file: Path, language: str, target: str, what: str, table: LineTable | None) -> CodeDocument:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return CodeDocument.missing(f"{what} not readable: {exc.strerror}")
    return CodeDocument.from_text(text, language, target, table)


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
