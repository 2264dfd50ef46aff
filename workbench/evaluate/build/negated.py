"""The candidate with its tensor-core products negated: does its answer depend on them?

A decoy runs the target's instructions for show and answers from another path (integer multiply-adds
in fixed point, tables in shared memory: work no counter credits to the task). In PTX every Hopper
tensor-core product is a `wgmma.mma_async` instruction, floating-point ones with an `imm-scale-a` of 1
or -1: flipping it negates A, so the instruction adds -A·B. The PTX is compiled again by the ptxas
command nvcc ran for the build (read from its dry run; the paths the cubin records come from the PTX's
`.file` lines, so the SASS is the original's but for the negation), and the new cubin is put where the
original lies in the library's fat binary: the same host code, the same kernels, every product negated.
An honest kernel's answer then moves; one that does not never depended on its tensor-core products
(`gpu/negated_check.py`).

The scale is flipped by writing it as `-(scale)`, which ptxas folds whatever form it had (a literal in
any base, a constant expression, comments around it). What runs decides, not what the PTX looks like:
the negated cubin's SASS must be the original's line for line but for every HGMMA and QGMMA, each with
its A negated (`.negA` on a descriptor, `-` on a register). A product written so that the flip missed
it still runs un-negated there, and the twin is refused as `hidden`: the check would otherwise pass a
decoy that hides its wgmma from it.

A Triton candidate's twin is made the same way from its build (`triton_build.with_negated_triton`): each
traced kernel's PTX flipped and assembled again by Triton's ptxas with the build's own flags, its SASS
compared; the runtime cache is made from the twin as from the original.

Integer wgmma has no scale to flip and Blackwell's tcgen05.mma takes its negation from a runtime
descriptor: neither is negated here.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from workbench.evaluate.build.sass import SASS_NAME, disassemble
from workbench.evaluate.result import BuildStage

NEGATED_DIR = "negated"  # the negated library lies in it, named as the original beside it
_FILE = re.compile(r'^(?P<head>\s*\.file\s+\d+\s+")(?P<path>[^"]+)"', re.MULTILINE)
PTXAS_TIMEOUT_S = 300.0

# Operands up to the `;` that ends the instruction, past any in a comment.
_WGMMA = re.compile(
    r"\bwgmma\.mma_async(?P<modifiers>(?:\.[A-Za-z0-9_]+)+)(?P<space>\s*)"
    r"(?P<operands>(?:/\*.*?\*/|//[^\n]*|[^;/]|/(?![*/]))*);",
    re.DOTALL,
)
_FLOAT_TYPES = frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2"})
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
# A floating-point product in SASS, after any predicate: its A is the second operand.
_FLOAT_PRODUCT = re.compile(r"^(?:@!?U?P\w+\s+)?(?:HGMMA|QGMMA)\b")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s*(?P<text>[^;]*;)")


class Twin(NamedTuple):
    """Why the negated library was not written ('' when it was), and whether that is the candidate's
    doing: products it wrote in a form that could not be negated, or its own cubin copied into it."""

    note: str
    hidden: bool = False


def _operand_spans(text: str) -> list[tuple[int, int]]:
    """Where each operand of `text` lies: split at the commas outside brackets and comments."""
    spans: list[tuple[int, int]] = []
    depth = start = at = 0
    while at < len(text):
        if text.startswith("/*", at):
            end = text.find("*/", at + 2)
            at = len(text) if end < 0 else end + 2
            continue
        if text.startswith("//", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end
            continue
        char = text[at]
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == "," and depth == 0:
            spans.append((start, at))
            start = at + 1
        at += 1
    spans.append((start, len(text)))
    return spans


def _flipped(scale: str) -> str:
    """`scale` negated as briefly as it can be: ptxas folds `-(…)` whatever form the scale had."""
    return {"1": "-1", "-1": "1"}.get(scale, f"-({scale})")


def _shortened(text: str, by: int, keep: tuple[int, int]) -> tuple[str, int]:
    """`text` with up to `by` spaces that follow a comma taken out (outside `keep`), from the right; and
    how many are still owed."""
    chars = list(text)
    for at in range(len(chars) - 1, 0, -1):
        if by == 0:
            break
        if not keep[0] <= at < keep[1] and chars[at] == " " and chars[at - 1] in ", ":
            del chars[at]
            by -= 1
    return "".join(chars), by


def _negate_one(match: re.Match[str]) -> tuple[str, int]:
    """The instruction with its imm-scale-a flipped (an integer one has none: left as it is), and how
    many characters longer it still is. The PTX's lines are kept in the cubin's debug sections, so the
    flip keeps the line's length where it can: a cubin of another size cannot take the original's place."""
    modifiers = match["modifiers"].split(".")[1:]
    if not _FLOAT_TYPES.intersection(modifiers[-2:]):
        return match[0], 0
    operands = match["operands"]
    spans = _operand_spans(operands)
    # d, a, b, scale-d, imm-scale-a, ...; sparse: d, a, b, sp-meta, sp-sel, scale-d, imm-scale-a, ...
    index = 6 if "sp" in modifiers else 4
    scale = _COMMENT.sub(" ", operands[slice(*spans[index])]).strip() if len(spans) > index else ""
    if not scale:
        return match[0], 0
    start, end = spans[index]
    lead = " " if operands[start : start + 1].isspace() else ""
    lines = "\n" * operands.count("\n", start, end)  # a comment's line ends stay: the PTX's lines are counted
    flipped = lead + _flipped(scale)
    flipped += " " * (end - start - len(flipped) - len(lines)) + lines
    text = operands[:start] + flipped + operands[end:]
    text, owed = _shortened(text, len(text) - len(operands), (start, start + len(flipped)))
    space = match["space"]
    if owed and space[-1:] in (" ", "\t"):  # `.bf16{` assembles as `.bf16 {` does; a line end stays
        space, owed = space[:-1], owed - 1
    return f"wgmma.mma_async{match['modifiers']}{space}{text};", owed


def negate_products(ptx: str) -> str:
    """`ptx` with every floating-point wgmma's imm-scale-a flipped, as long as it was where it can be: what
    a flip still owes is taken from the space before a tab in cicc's own lines (`mov.u32 \t%r1`)."""
    owed = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal owed
        text, more = _negate_one(match)
        owed += more
        return text

    negated = _WGMMA.sub(replace, ptx)
    return negated.replace(" \t", "\t", owed) if owed else negated


def ptxas_line(dry_run: str, ptx: str, cubin: str) -> list[str] | None:
    """The ptxas command of nvcc's `--dryrun` output that compiles `ptx` into `cubin`, its program found
    where nvcc finds it (on the PATH the dry run sets), or None."""
    path = None
    for line in dry_run.splitlines():
        if line.startswith("#$ PATH="):
            path = line[len("#$ PATH=") :].strip()
        if not line.startswith("#$ ptxas "):
            continue
        words = shlex.split(line[3:])
        program = shutil.which(words[0], path=path)
        if ptx in words and cubin in words and program is not None:
            return [program, *words[1:]]
    return None


async def _output(command: list[str], cwd: Path) -> tuple[int | None, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), PTXAS_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, ""
    return process.returncode, out.decode(errors="replace")


def _instructions(sass: str) -> list[str]:
    """A cuobjdump listing's instructions, in order, without addresses, encodings or column padding."""
    return [" ".join(found["text"].split()) for found in _INSTRUCTION.finditer(sass)]


def _negated_a(original: str, negated: str) -> bool:
    """Whether `negated` is the SASS product `original` with its A operand's sign flipped and nothing else."""
    a, b = original.split(", "), negated.split(", ")
    if len(a) != len(b) or len(a) < 2:
        return False

    def sign(operand: str) -> tuple[str, bool]:
        return operand.lstrip("-").replace(".negA", ""), operand.startswith("-") or ".negA" in operand

    (a_base, a_negative), (b_base, b_negative) = sign(a[1]), sign(b[1])
    return a_base == b_base and a_negative != b_negative and a[:1] + a[2:] == b[:1] + b[2:]


def products_not_negated(original: str, negated: str) -> tuple[int, int, str]:
    """The original's and the negated cubin's SASS listings compared: its floating-point products, how
    many of them the negated one runs un-negated, and what else differs ('' where nothing does)."""
    before, after = _instructions(original), _instructions(negated)
    if len(before) != len(after):
        return 0, 0, f"the negated SASS has {len(after)} instructions, the original {len(before)}"
    products = left = other = 0
    for line, twin in zip(before, after, strict=True):
        if _FLOAT_PRODUCT.match(line):
            products += 1
            left += not _negated_a(line, twin)
        elif line != twin:
            other += 1
    return products, left, f"the negated SASS differs in {other} other instructions" if other else ""


async def sass_listings(*cubins: Path) -> list[str] | str:
    """Each cubin's SASS listing (the one the build kept beside it, where it did), or why one could not be
    read."""

    async def listing(cubin: Path) -> tuple[str | None, str]:
        kept = cubin.with_name(SASS_NAME)
        if kept.is_file():
            return kept.read_text(), ""
        found = await disassemble(cubin)
        return found.text, found.error

    found = await asyncio.gather(*(listing(cubin) for cubin in cubins))
    texts = [text for text, _ in found if text is not None]
    return texts if len(texts) == len(found) else next(error for text, error in found if text is None)


def _sources_beside(ptx: str, entry: Path, work: Path) -> str:
    """`ptx` with its sources that were in the original's build folder (gone: the cache entry holds them)
    named in `work` instead, copied there. ptxas records each source's size and time where the file
    exists, and the original's existed: a path of the same length to a file of the same size keeps the
    negated cubin the original's size."""

    def moved(match: re.Match[str]) -> str:
        path = Path(match["path"])
        kept = entry / path.name
        if path.exists() or not kept.is_file() or len(str(path.parent)) != len(str(work)):
            return match[0]
        shutil.copyfile(kept, work / path.name)
        return f'{match["head"]}{work / path.name}"'

    return _FILE.sub(moved, ptx)


async def build_negated(
    entry: Path, work: Path, nvcc_command: list[str], built: tuple[str, str, str], kept: tuple[str, str]
) -> Twin:
    """Write the negated library of the finished build in `entry`, whose library, PTX and cubin are the
    files `built` names there, the last two written by nvcc's command as `kept` (keep/ paths), into the
    empty folder `work` (where the negated PTX and cubin go too): as `NEGATED_DIR`/library, its SASS
    checked against the original's; why not where it was not."""
    library_name, ptx_name, cubin_name = built
    ptx = (entry / ptx_name).read_text()
    if "wgmma" not in ptx:  # ptxas has no macros: a product it assembles is spelt out
        return Twin("its PTX holds no wgmma")
    negated = negate_products(ptx)
    original = (entry / cubin_name).read_bytes()
    code, dry_run = await _output([*nvcc_command, "--dryrun"], work)
    command = ptxas_line(dry_run, *kept) if code == 0 else None
    if command is None:
        return Twin("nvcc's dry run names no ptxas command for its PTX")
    (work / kept[0]).parent.mkdir(parents=True, exist_ok=True)
    # Compiled as nvcc compiled the original: the same command, names and sources (`_sources_beside`).
    (work / kept[0]).write_text(_sources_beside(negated, entry, work))
    code, output = await _output(command, work)
    if code is None:
        return Twin(f"ptxas did not finish the negated PTX within {PTXAS_TIMEOUT_S:g} s")
    if code != 0:
        last = output.strip().splitlines()[-1:] or [f"exit {code}"]
        return Twin(f"ptxas failed on the negated PTX: {last[0]}")
    changed = (work / kept[1]).read_bytes()
    if len(changed) != len(original):
        return Twin(f"the negated cubin is {len(changed)} bytes, the original {len(original)}")
    listings = await sass_listings(entry / cubin_name, work / kept[1])
    if isinstance(listings, str):
        return Twin(f"its SASS could not be compared: {listings}")
    products, left, other = products_not_negated(*listings)
    if not products:
        return Twin("its SASS runs no HGMMA or QGMMA to negate")
    if left:
        return Twin(
            f"{left} of its {products} HGMMA/QGMMA still run un-negated in the build with every wgmma's A "
            "flipped: their wgmma are written in a form the workbench cannot negate",
            hidden=True,
        )
    if other:
        return Twin(other)
    library = (entry / library_name).read_bytes()
    copies = library.count(original)
    if copies != 1:
        if copies > 1:  # only a kernel that copied its own cubin into itself holds it twice
            return Twin(f"the library holds its cubin {copies} times", hidden=True)
        return Twin("the library does not hold its cubin uncompressed")
    at = library.index(original)
    (work / NEGATED_DIR).mkdir()
    target = work / NEGATED_DIR / library_name
    target.write_bytes(library[:at] + changed + library[at + len(changed) :])
    target.chmod(0o755)
    return Twin("")


async def in_cache_entry(
    stage: BuildStage, entry: Path, made: Path, root: Path, make: Callable[[Path], Awaitable[Twin]]
) -> BuildStage:
    """`stage` naming its negated twin `made` (in `entry`'s `NEGATED_DIR`), made on first use: `make` writes
    `NEGATED_DIR` into an empty folder under `root`, which then moves into the cache entry; or with why
    there is none."""
    if made.exists():
        return stage.model_copy(update={"negated_library_path": str(made)})
    # Named as a build's folder is (`nvcc.build`): its path as long as the one the original's sources had.
    work = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        twin = await make(work)
        if not twin.note:
            with contextlib.suppress(OSError):  # another evaluation's twin got there first: as good
                (work / NEGATED_DIR).rename(entry / NEGATED_DIR)
    except (OSError, ValueError, KeyError) as exc:  # a cache entry unlike the one its build wrote
        twin = Twin(f"it could not be made: {getattr(exc, 'strerror', None) or exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if twin.note or not made.exists():
        note = twin.note or "it could not be kept in the build cache"
        return stage.model_copy(update={"negated_note": note, "negated_hidden": twin.hidden})
    return stage.model_copy(update={"negated_library_path": str(made)})
