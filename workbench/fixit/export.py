"""`ptxwb fixit export`: sessions or sweep folders in, a chat-messages JSONL dataset and its card out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

import workbench
from workbench.agent.models import make_model
from workbench.errors import UserError
from workbench.fixit.card import card
from workbench.fixit.hygiene import Host
from workbench.fixit.pairs import MineOptions, Pair, dedup, mine
from workbench.fixit.rows import Format, MessagesRow, build_row, read_rows
from workbench.fixit.select import balance, held_out_tasks
from workbench.fixit.teachers import (
    Executors,
    ReasoningReport,
    ReasoningTeacher,
    RepairReport,
    RepairTeacher,
    Say,
    quiet,
)
from workbench.fixit.trajectory import Trajectory, Turn, find_sessions, load
from workbench.session.log import create_new


@dataclass(frozen=True)
class TeacherOptions:
    repair: str | None = None  # a model string (litellm, scripted:FILE)
    tries: int = 3
    executor: str | None = None  # judges the repair teacher's fixes; default: each session's own
    reasoning: str | None = None
    api_base: str | None = None
    cache_dir: Path | None = None  # the build cache for the fixes ($PTXWB_CACHE if unset)

    def repair_teacher(self, host: Host, say: Say) -> RepairTeacher | None:
        if self.repair is None:
            return None
        model = make_model(self.repair, api_base=self.api_base)
        return RepairTeacher(model, self.tries, Executors(self.executor, self.cache_dir), host, say)

    def reasoning_teacher(self, host: Host, say: Say) -> ReasoningTeacher | None:
        if self.reasoning is None:
            return None
        return ReasoningTeacher(make_model(self.reasoning, api_base=self.api_base), host, say)


@dataclass(frozen=True)
class ExportOptions:
    mine: MineOptions = field(default_factory=MineOptions)
    teachers: TeacherOptions = field(default_factory=TeacherOptions)
    dedup: bool = True
    include_static: bool = False  # keep fixes proven by the build and static tiers only
    fmt: Format = "messages"
    balance: bool = False
    per_group: int | None = None
    eval_tasks: tuple[str, ...] = ()
    eval_fraction: float = 0.0
    seed: int = 0

    @property
    def split(self) -> bool:
        return bool(self.eval_tasks or self.eval_fraction)


class ExportReport(BaseModel):
    sessions: int
    other_files: int
    pairs_found: int
    duplicates: int
    notes: dict[str, int]
    unfixed: int
    repair: RepairReport | None
    static_excluded: int
    host_dropped: int
    eval_tasks: list[str]
    balanced_out: int
    reasoning: ReasoningReport | None
    rows: dict[str, int]
    files: list[str]


def output_paths(out: Path, split: bool) -> dict[str, Path]:
    """train (OUT), eval (OUT's stem + .eval.jsonl, with a split) and the card (OUT's stem + .md)."""
    if out.suffix != ".jsonl":
        raise UserError(f"{out}: --out must name a .jsonl file")
    paths = {"train": out, "card": out.with_suffix(".md")}
    if split:
        paths["eval"] = out.with_name(f"{out.stem}.eval.jsonl")
    for path in paths.values():
        if path.exists() or path.is_symlink():
            raise UserError(f"{path}: already exists; name another --out (nothing is overwritten)")
    return paths


def write_outputs(paths: dict[str, Path], texts: dict[str, str]) -> list[str]:
    for key, text in texts.items():
        with create_new(paths[key], "a file") as handle:
            handle.write(text)
    return [str(paths[key]) for key in texts]


async def _teacher_fixes(
    teacher: RepairTeacher, unfixed: list[tuple[Trajectory, Turn]], once: bool
) -> list[Pair]:
    """A fix for each failure never fixed in its trajectory (each failed source once, with dedup)."""
    fixes: list[Pair] = []
    asked: set[str] = set()
    for trajectory, failed in unfixed:
        if once and failed.sha256 in asked:
            continue
        asked.add(failed.sha256)
        pair = await teacher.fix(trajectory, failed)
        if pair is not None:
            fixes.append(pair)
    return fixes


def made_lines(report: ExportReport, options: ExportOptions) -> list[str]:
    """How the rows were made, for the card and the command's summary."""
    mined = options.mine
    lines = [
        f"{report.sessions} session files read"
        + (f" ({report.other_files} other .jsonl files skipped)" if report.other_files else ""),
        (
            f"{report.pairs_found} pairs found in the trajectories (failures: {mined.failures}; "
            f"improvement pairs: {f'at least {mined.min_gain:.0%} faster' if mined.improvements else 'no'})"
        ),
    ]
    if options.dedup:
        lines.append(f"{report.duplicates} repeated pairs (same failed and fixed source) dropped")
    lines.extend(f"{count} {note}" for note, count in report.notes.items())
    if (repair := report.repair) is not None:
        lines.append(
            f"repair teacher {repair.model}: {repair.failures} failures never fixed in their trajectory, "
            f"{repair.calls} answers (up to {repair.tries} tries each); {repair.fixed_gpu} fixes passed "
            f"every tier on a GPU, {repair.fixed_static} the build and static tiers only, "
            f"{repair.not_fixed} not fixed" + (f"; stopped: {repair.stopped}" if repair.stopped else "")
        )
    else:
        lines.append(f"{report.unfixed} failures never fixed in their trajectory (no repair teacher)")
    if report.static_excluded:
        lines.append(
            f"{report.static_excluded} fixes proven by the build and static tiers only left out "
            "(--include-static keeps them)"
        )
    if report.host_dropped:
        lines.append(f"{report.host_dropped} pairs dropped: a kernel holds a detail of this machine")
    if report.eval_tasks:
        lines.append(f"eval split by task: {', '.join(report.eval_tasks)}")
    if options.balance:
        lines.append(f"{report.balanced_out} rows left out by balancing across tasks and categories")
    if (reasoning := report.reasoning) is not None:
        lines.append(
            f"reasoning teacher {reasoning.model}: {reasoning.written} reasonings written, {reasoning.empty} empty"
            + (f"; stopped: {reasoning.stopped}" if reasoning.stopped else "")
        )
    lines.append("rows: " + ", ".join(f"{split} {count}" for split, count in report.rows.items()))
    return lines


def _rows(pairs: list[Pair], host: Host) -> tuple[list[MessagesRow], int]:
    rows = [build_row(pair, host, workbench.__version__) for pair in pairs]
    clean = [row for row in rows if not host.leaks(row.model_dump_json())]
    return clean, len(rows) - len(clean)


async def export(paths: Sequence[Path], out: Path, options: ExportOptions, say: Say = quiet) -> ExportReport:
    """`say` gets a line per teacher answer (they can take minutes each on a GPU)."""
    outputs = output_paths(out, options.split)  # before any work: a teacher's answers cost money
    host = Host.current()
    repair = options.teachers.repair_teacher(host, say)
    reasoning = options.teachers.reasoning_teacher(host, say)
    files, other = find_sessions(paths)
    mined = mine([load(file) for file in files], options.mine)
    pairs, duplicates = dedup(mined.pairs) if options.dedup else (mined.pairs, 0)
    if repair is not None:
        try:
            pairs += await _teacher_fixes(repair, mined.unfixed, options.dedup)
        finally:
            await repair.executors.close()
    kept = [pair for pair in pairs if options.include_static or pair.fixed.proof == "gpu"]
    rows, host_dropped = _rows(kept, host)
    tasks = {row.metadata.task for row in rows}
    held_out = held_out_tasks(tasks, options.eval_tasks, options.eval_fraction, options.seed)
    rows = [_in_split(row, "eval" if row.metadata.task in held_out else "train") for row in rows]
    balanced_out = 0
    if options.balance:
        rows, balanced_out = balance(rows, options.per_group, options.seed)
    if reasoning is not None:
        rows = [await reasoning.explain(row) for row in rows]
    splits = ["train", "eval"] if options.split else ["train"]
    by_split = {split: [row for row in rows if row.metadata.split == split] for split in splits}
    report = ExportReport(
        sessions=len(files),
        other_files=other,
        pairs_found=len(mined.pairs),
        duplicates=duplicates,
        notes=dict(mined.notes),
        unfixed=len(mined.unfixed),
        repair=repair.report if repair else None,
        static_excluded=len(pairs) - len(kept),
        host_dropped=host_dropped,
        eval_tasks=sorted(held_out),
        balanced_out=balanced_out,
        reasoning=reasoning.report if reasoning else None,
        rows={split: len(members) for split, members in by_split.items()},
        files=[],
    )
    texts = {split: dump_rows(members, options.fmt) for split, members in by_split.items()}
    names = {split: outputs[split].name for split in splits}
    texts["card"] = card(names, rows, options.fmt, made_lines(report, options))
    report.files = write_outputs(outputs, texts)
    return report


def _in_split(row: MessagesRow, split: str) -> MessagesRow:
    return row.model_copy(update={"metadata": row.metadata.model_copy(update={"split": split})})


def dump_rows(rows: Sequence[MessagesRow], fmt: Format) -> str:
    return "".join(row.dump(fmt) + "\n" for row in rows)


async def regenerate_reasoning(
    source: Path, out: Path, options: TeacherOptions, say: Say = quiet
) -> ReasoningReport:
    """A Fixit file's rows again, each with new reasoning by the reasoning teacher; all else unchanged."""
    outputs = output_paths(out, split=False)
    loaded = list(read_rows(source))
    teacher = options.reasoning_teacher(Host.current(), say)
    if teacher is None:
        raise UserError("name the reasoning teacher (--teacher-reasoning MODEL)")
    rows = [await teacher.explain(row) for row, _ in loaded]
    fmt: Format = loaded[0][1] if loaded else "messages"
    split = "eval" if rows and all(row.metadata.split == "eval" for row in rows) else "train"
    made = [
        f"{len(rows)} rows of {source.name}, their reasoning written again by {teacher.report.model}: "
        f"{teacher.report.written} written, {teacher.report.empty} empty"
        + (f"; stopped: {teacher.report.stopped}" if teacher.report.stopped else "")
    ]
    texts = {"train": dump_rows(rows, fmt), "card": card({split: out.name}, rows, fmt, made)}
    write_outputs(outputs, texts)
    return teacher.report
