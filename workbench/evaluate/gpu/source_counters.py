"""Per-instruction executed counts from Nsight Compute's source page, matched to the build's SASS listing.

With `--section SourceCounters` ncu counts every SASS instruction of a profiled kernel. The worker
reads them back from the exported report with `ncu -i REPORT --page source --csv --print-source sass`,
which prints, per profiled launch, a line `"Kernel Name","<name>",`, a header row (`"Address",
"Source",…,"Instructions Executed","Thread Instructions Executed","Predicated-On Thread Instructions
Executed",…`) and one row per instruction. Columns are read by name (ncu adds and reorders them between
versions); numbers may carry thousands separators; the address may be hex or decimal, absolute or an
offset. A kernel launched several times is summed: the counts are those of the one profiled call.

Rows are then placed on a cuobjdump listing (`/*0040*/  @P0 HGMMA… ;`) by kernel and offset; when the
offsets do not agree with the listing's opcodes, by order and opcode.

Standard library only: the worker runs this on a bare GPU host.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

ADDRESS = "Address"
SOURCE = "Source"
EXECUTED = "Instructions Executed"
THREADS = "Thread Instructions Executed"
PREDICATED_ON = "Predicated-On Thread Instructions Executed"
# Warp-state sampling: how often a warp was found at the instruction (stalled or issuing), and why, by
# reason (`stall_long_sb`, …; their "(Not Issued)" twins split the same samples again and are left out).
SAMPLES = "Warp Stall Sampling (All Samples)"
STALL_PREFIX = "stall_"
STALLS_KEPT = 4  # per instruction, the reasons with the most samples
KERNEL = "Kernel Name"
INSTRUCTION_BYTES = 16  # every Hopper and Blackwell SASS instruction
# Placing rows by offset is trusted when (nearly) every placed row's opcode is the listing's there.
MIN_AGREEMENT = 0.95

_PREDICATE = r"(?:@!?U?P(?:T|\d+)\s+)?"
_OPCODE = re.compile(r"^\s*" + _PREDICATE + r"([A-Z][A-Z0-9_]*)")
_LISTING_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_LISTING_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+" + _PREDICATE + r"([A-Z][A-Z0-9_]*)")
_BLANK = {"", "-", "n/a", "N/A"}


class SourcePageError(ValueError):
    """The source page is not what ncu prints for SourceCounters; the message is one line."""


@dataclass(frozen=True)
class SourceRow:
    """One SASS instruction of one kernel, its counts summed over the profiled launches."""

    offset: int | None  # from the kernel's first instruction, as cuobjdump prints it; None: no address
    sass: str
    executed: int  # warp-level instructions executed
    threads: int  # thread instructions executed
    predicated_on: int  # thread instructions executed with a true predicate
    samples: int = 0  # warp-state samples at this instruction
    stalls: tuple[tuple[str, int], ...] = ()  # (reason, samples), most first

    @property
    def opcode(self) -> str:
        return opcode_of(self.sass)


class Counted(Protocol):
    """What the matcher needs of a row: a parsed `SourceRow` or the result's stored form of it."""

    @property
    def offset(self) -> int | None: ...
    @property
    def opcode(self) -> str: ...


def opcode_of(sass: str) -> str:
    """`@!P0 HGMMA.64x128x16.F32.BF16 R24, …` -> `HGMMA`; "" for a line that is no instruction."""
    match = _OPCODE.match(sass)
    return match.group(1) if match else ""


def _count(cell: str, what: str) -> int:
    text = cell.strip().replace(",", "")
    if text in _BLANK:
        return 0
    try:
        return round(float(text))
    except ValueError:
        raise SourcePageError(f"ncu source page: {what} {cell!r} is not a number") from None


def _addresses(cells: list[str]) -> list[int | None]:
    """The Address column as offsets from the kernel's first instruction.

    `0x…` is hex; so is a column with a hex letter in it; digits alone are decimal unless only the hex
    reading puts every instruction on a 16-byte boundary."""
    texts = [cell.strip().replace(",", "") for cell in cells]
    present = [t for t in texts if t]
    hex_column = any(t.lower().startswith("0x") or re.search(r"[a-fA-F]", t) for t in present)

    def read(base: int) -> list[int | None]:
        values: list[int | None] = []
        for text in texts:
            try:
                values.append(int(text, base) if text else None)
            except ValueError:
                values.append(None)
        return values

    def aligned(values: list[int | None]) -> bool:
        known = [v for v in values if v is not None]
        return bool(known) and all((v - min(known)) % INSTRUCTION_BYTES == 0 for v in known)

    values = read(16) if hex_column else read(10)
    if not hex_column and not aligned(values) and aligned(read(16)):
        values = read(16)
    known = [v for v in values if v is not None]
    start = min(known, default=0)
    return [None if v is None else v - start for v in values]


def _block(name: str, header: list[str], rows: list[list[str]]) -> list[SourceRow]:
    column = {cell: index for index, cell in enumerate(header)}
    for needed in (SOURCE, EXECUTED):
        if needed not in column:
            raise SourcePageError(
                f"ncu source page: kernel {name!r} has no {needed!r} column "
                "(was the SourceCounters section collected?)"
            )
    rows = [row for row in rows if len(row) >= len(header) and row[column[SOURCE]].strip()]
    offsets = _addresses([row[column[ADDRESS]] for row in rows]) if ADDRESS in column else [None] * len(rows)

    def cell(row: list[str], name: str) -> str:
        return row[column[name]] if name in column else ""

    reasons = [name for name in header if name.startswith(STALL_PREFIX) and "(" not in name]

    def stalls(row: list[str]) -> tuple[tuple[str, int], ...]:
        found = ((name.removeprefix(STALL_PREFIX), _count(cell(row, name), name)) for name in reasons)
        return _most(dict(found))

    return [
        SourceRow(
            offset=offset,
            sass=row[column[SOURCE]].strip(),
            executed=_count(cell(row, EXECUTED), EXECUTED),
            threads=_count(cell(row, THREADS), THREADS),
            predicated_on=_count(cell(row, PREDICATED_ON), PREDICATED_ON),
            samples=_count(cell(row, SAMPLES), SAMPLES),
            stalls=stalls(row),
        )
        for row, offset in zip(rows, offsets, strict=True)
    ]


def _most(by_reason: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The reasons with samples, most first (ties by name), at most `STALLS_KEPT`."""
    ranked = sorted(((r, n) for r, n in by_reason.items() if n > 0), key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:STALLS_KEPT])


def _merged(first: list[SourceRow], again: list[SourceRow]) -> list[SourceRow]:
    """Another launch of a kernel: counts added instruction by instruction (by offset, else by order)."""
    if all(row.offset is not None for row in (*first, *again)):
        more = {row.offset: row for row in again}
        keys = {row.offset for row in first}
        extra = [row for row in again if row.offset not in keys]
    elif len(first) == len(again):
        more = dict(enumerate(again))
        extra = []
    else:
        raise SourcePageError(
            f"ncu source page: two launches of one kernel list {len(first)} and {len(again)} "
            "instructions, without addresses to line them up"
        )
    merged = []
    for index, row in enumerate(first):
        other = more.get(row.offset if row.offset is not None else index)
        if other is not None:
            stalls = dict(row.stalls)
            for reason, samples in other.stalls:
                stalls[reason] = stalls.get(reason, 0) + samples
            row = replace(
                row,
                executed=row.executed + other.executed,
                threads=row.threads + other.threads,
                predicated_on=row.predicated_on + other.predicated_on,
                samples=row.samples + other.samples,
                stalls=_most(stalls),
            )
        merged.append(row)
    return merged + extra


def parse_source_page(text: str) -> dict[str, list[SourceRow]]:
    """kernel name as ncu printed it -> its instructions in address order, every launch of it summed."""
    kernels: dict[str, list[SourceRow]] = {}
    name: str | None = None
    header: list[str] | None = None
    rows: list[list[str]] = []

    def finish() -> None:
        if name is not None and header is not None:
            found = _block(name, header, rows)
            kernels[name] = _merged(kernels[name], found) if name in kernels else found

    for row in csv.reader(io.StringIO(text)):
        cells = [cell.strip() for cell in row]
        if cells[:1] == [KERNEL]:
            finish()
            name, header, rows = (cells[1] if len(cells) > 1 else ""), None, []
        elif name is not None and SOURCE in cells and (header is None or cells == header):
            header = cells  # the first row naming the columns (a repeat of it is no instruction)
        elif header is not None:
            rows.append(row)
    finish()
    return kernels


# How demanglers name the anonymous namespace: c++filt, NVIDIA's, and GCC's older form.
_ANONYMOUS = re.compile(r"\(anonymous namespace\)|<unnamed>|\{anonymous\}")


def _squeezed(name: str) -> str:
    return re.sub(r"\s+", "", _ANONYMOUS.sub("(anonymous)", name))


def _base_name(name: str) -> str:
    """`void ns::k<128>(float *)` -> `ns::k`: the function's qualified name without its signature."""
    head = _ANONYMOUS.sub("anonymous", name).split("(", 1)[0]
    depth, out = 0, []
    for char in head:  # drop template arguments, which may hold spaces
        depth += char == "<"
        if depth == 0:
            out.append(char)
        depth -= char == ">"
    words = "".join(out).split()
    return words[-1] if words else ""


def own_kernels(
    page: Mapping[str, list[SourceRow]], own: Iterable[str], demangled: Mapping[str, str]
) -> dict[str, list[SourceRow]]:
    """The page's kernels that are the candidate's own, keyed by their mangled names.

    ncu may print a kernel mangled or demangled, spaced otherwise than c++filt (`__nv_bfloat16 *`);
    a name matching none of these, or more than one own kernel by its bare function name, is left out."""
    own = sorted(own)
    by_signature = {_squeezed(demangled.get(symbol, symbol)): symbol for symbol in own}
    bases: dict[str, list[str]] = {}
    for symbol in own:
        bases.setdefault(_base_name(demangled.get(symbol, symbol)), []).append(symbol)
    kept: dict[str, list[SourceRow]] = {}
    for name, rows in page.items():
        mangled = name if name in own else by_signature.get(_squeezed(name))
        base = _base_name(name)
        if mangled is None and base and len(bases.get(base, [])) == 1:
            mangled = bases[base][0]
        if mangled is not None:
            kept[mangled] = _merged(kept[mangled], rows) if mangled in kept else rows
    return kept


def stored(rows: Iterable[SourceRow]) -> list[dict]:
    """Rows as the result keeps them (`InstructionCounts`): the opcode, not the whole SASS text."""
    return [
        {
            "offset": row.offset,
            "opcode": row.opcode,
            "executed": row.executed,
            "threads": row.threads,
            "predicated_on": row.predicated_on,
            "samples": row.samples,
            "stalls": dict(row.stalls),
        }
        for row in rows
    ]


@dataclass(frozen=True)
class ListingInstruction:
    line: int  # 0-based line of the listing
    kernel: str  # mangled, as the listing's `Function :` header names it
    offset: int
    opcode: str


def listing_instructions(lines: Sequence[str]) -> list[ListingInstruction]:
    """The instruction lines of a cuobjdump listing, each with its kernel and offset."""
    found: list[ListingInstruction] = []
    kernel: str | None = None
    for index, text in enumerate(lines):
        if match := _LISTING_FUNCTION.match(text):
            kernel = match.group(1)
        elif kernel is not None and (match := _LISTING_INSTRUCTION.match(text)):
            found.append(ListingInstruction(index, kernel, int(match.group(1), 16), match.group(2)))
    return found


R = TypeVar("R", bound=Counted)


@dataclass
class ListingMatch(Generic[R]):
    lines: dict[int, R]  # listing line -> its instruction's counts
    rows: int  # rows of the kernels the listing has
    by_order: list[str]  # kernels placed by order and opcode, their offsets not agreeing with the listing

    @property
    def matched(self) -> int:
        return len(self.lines)


def _by_offset(rows: Sequence[R], code: list[ListingInstruction]) -> tuple[dict[int, R], int]:
    """Rows placed at the listing line of their offset, and how many of those agree on the opcode."""
    at = {instruction.offset: instruction for instruction in code}
    placed: dict[int, R] = {}
    agreeing = 0
    for row in rows:
        instruction = at.get(row.offset) if row.offset is not None else None
        if instruction is not None:
            placed[instruction.line] = row
            agreeing += instruction.opcode == row.opcode
    return placed, agreeing


def _by_order(rows: Sequence[R], code: list[ListingInstruction]) -> dict[int, R]:
    """Rows placed where the two opcode sequences agree, in order (difflib's longest matching runs)."""
    matcher = difflib.SequenceMatcher(
        None, [row.opcode for row in rows], [i.opcode for i in code], autojunk=False
    )
    placed: dict[int, R] = {}
    for block in matcher.get_matching_blocks():
        for step in range(block.size):
            placed[code[block.b + step].line] = rows[block.a + step]
    return placed


def match_listing(
    instructions: Sequence[ListingInstruction], counts: Mapping[str, Sequence[R]]
) -> ListingMatch[R]:
    """Each kernel's rows placed on the listing's lines of that kernel."""
    code: dict[str, list[ListingInstruction]] = {}
    for instruction in instructions:
        code.setdefault(instruction.kernel, []).append(instruction)
    match: ListingMatch[R] = ListingMatch(lines={}, rows=0, by_order=[])
    for kernel, rows in counts.items():
        listed = code.get(kernel)
        if not listed or not rows:
            continue
        match.rows += len(rows)
        placed, agreeing = _by_offset(rows, listed)
        if placed and agreeing >= MIN_AGREEMENT * len(placed) and len(placed) >= MIN_AGREEMENT * len(rows):
            match.lines.update(placed)
        else:
            match.lines.update(_by_order(rows, listed))
            match.by_order.append(kernel)
    return match
