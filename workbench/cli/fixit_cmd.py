"""`ptxwb fixit …`: repair pairs from sessions and sweeps as SFT data; stats; reasoning; marks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.errors import UserError

app = typer.Typer(
    help="Repair pairs (a failed turn, then a passed one) from sessions and sweeps, as SFT data.",
    no_args_is_help=True,
)

Choice = TypeVar("Choice", bound=str)
ApiBase = Annotated[
    str | None, typer.Option("--api-base", help="OpenAI-compatible server URL for the teachers.")
]


def _choice(value: str, allowed: tuple[Choice, ...], option: str) -> Choice:
    if value not in allowed:
        raise UserError(f"{option}: unknown value {value!r}; choose one of: {', '.join(allowed)}")
    return allowed[allowed.index(value)]  # type: ignore[arg-type]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _tasks(value: str | None) -> tuple[str, ...]:
    return tuple(task.strip() for task in (value or "").split(",") if task.strip())


@app.command("export")
def export(
    sources: Annotated[
        list[Path], typer.Argument(help="Session .jsonl files and sweep folders (read recursively).")
    ],
    out: Annotated[Path, typer.Option("--out", help="The dataset FILE.jsonl (FILE.md is its card).")],
    failures: Annotated[
        str, typer.Option("--failures", help="all: every failure before a fix; last: the last one only.")
    ] = "all",
    improvements: Annotated[
        bool, typer.Option("--improvements", help="Also pairs of a passed turn and a later, faster one.")
    ] = False,
    min_gain: Annotated[
        float, typer.Option("--min-gain", help="How much faster an improvement is, at least (0.02 = 2%).")
    ] = 0.02,
    no_dedup: Annotated[
        bool, typer.Option("--no-dedup", help="Keep pairs whose failed and fixed sources repeat.")
    ] = False,
    teacher_repair: Annotated[
        str | None,
        typer.Option(
            "--teacher-repair", help="A model (litellm string, scripted:FILE) that fixes unfixed failures."
        ),
    ] = None,
    teacher_tries: Annotated[int, typer.Option("--teacher-tries", help="Answers per failure, at most.")] = 3,
    executor: Annotated[
        str | None,
        typer.Option("--executor", help="Judges the teacher's fixes (default: each session's own executor)."),
    ] = None,
    include_static: Annotated[
        bool,
        typer.Option(
            "--include-static", help="Keep fixes proven by the build and static tiers only (no GPU)."
        ),
    ] = False,
    teacher_reasoning: Annotated[
        str | None,
        typer.Option("--teacher-reasoning", help="A model that writes the reasoning from failure to fix."),
    ] = None,
    api_base: ApiBase = None,
    fmt: Annotated[str, typer.Option("--format", help="messages, or prompt-completion.")] = "messages",
    balance: Annotated[
        bool, typer.Option("--balance", help="Sample evenly across (task, failure category) groups.")
    ] = False,
    per_group: Annotated[
        int | None, typer.Option("--per-group", help="With --balance: rows per group (default: the median).")
    ] = None,
    eval_tasks: Annotated[
        str | None, typer.Option("--eval-tasks", help="Tasks held out as the eval split, comma-separated.")
    ] = None,
    eval_fraction: Annotated[
        float, typer.Option("--eval-fraction", help="Hold out this share of the tasks as the eval split.")
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="For the split and balancing.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Export repair pairs as chat-messages JSONL (FILE.jsonl, FILE.eval.jsonl with a split) and a card."""
    from workbench.fixit.export import ExportOptions, TeacherOptions, export, made_lines
    from workbench.fixit.pairs import FAILURES, MineOptions
    from workbench.fixit.rows import FORMATS

    if teacher_tries < 1:
        raise UserError(f"--teacher-tries must be at least 1, not {teacher_tries}")
    if min_gain < 0:
        raise UserError(f"--min-gain must not be negative, not {min_gain:g}")
    if executor is not None and teacher_repair is None:
        raise UserError("--executor judges the repair teacher's fixes: give --teacher-repair MODEL too")
    if eval_tasks is not None and eval_fraction:
        raise UserError(
            "--eval-tasks and --eval-fraction are two ways to choose the eval split: give one of them"
        )
    if per_group is not None and not balance:
        raise UserError("--per-group sets the size of --balance's groups: give --balance too")
    if per_group is not None and per_group < 1:
        raise UserError(f"--per-group must be at least 1, not {per_group}")
    options = ExportOptions(
        mine=MineOptions(
            failures=_choice(failures, FAILURES, "--failures"),
            improvements=improvements,
            min_gain=min_gain,
        ),
        teachers=TeacherOptions(
            repair=teacher_repair,
            tries=teacher_tries,
            executor=executor,
            reasoning=teacher_reasoning,
            api_base=api_base,
        ),
        dedup=not no_dedup,
        include_static=include_static,
        fmt=_choice(fmt, FORMATS, "--format"),
        balance=balance,
        per_group=per_group,
        eval_tasks=_tasks(eval_tasks),
        eval_fraction=eval_fraction,
        seed=seed,
    )
    report = asyncio.run(export(sources, out, options, say=_progress))
    if as_json:
        print_json(report.model_dump())
        return
    for line in made_lines(report, options):
        print(line)
    for path in report.files:
        print(path)


@app.command("stats")
def stats(
    path: Annotated[Path, typer.Argument(help="A Fixit .jsonl file (either form).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Count a Fixit file's rows: by split, kind, failure category, task, target, origin, verification."""
    from workbench.fixit.card import counts
    from workbench.fixit.rows import read_rows

    tally = counts([row for row, _ in read_rows(path)])
    if as_json:
        print_json(tally.model_dump())
        return
    out = console()
    out.print(
        f"[bold]{tally.rows}[/bold] rows from {tally.sessions} sessions; {tally.with_reasoning} with "
        f"reasoning, {tally.marked} marked by a person"
    )
    table = Table(title_justify="left")
    for column in ("by", "value", "rows"):
        table.add_column(column, justify="right" if column == "rows" else "left")
    for title, values in tally.sections():
        for number, (value, count) in enumerate(values.items()):
            table.add_row(title if number == 0 else "", value, str(count))
    out.print(table)
    out.print(f"mean characters: prompt {tally.mean_prompt_chars:.0f}, answer {tally.mean_answer_chars:.0f}")


@app.command("reason")
def reason(
    path: Annotated[Path, typer.Argument(help="A Fixit .jsonl file (either form).")],
    teacher_reasoning: Annotated[
        str, typer.Option("--teacher-reasoning", help="The model that writes the reasoning.")
    ],
    out: Annotated[Path, typer.Option("--out", help="The new FILE.jsonl (FILE.md is its card).")],
    api_base: ApiBase = None,
) -> None:
    """Write every row's reasoning again with another teacher; the pairs and all else stay as they are."""
    from workbench.fixit.export import TeacherOptions, regenerate_reasoning

    options = TeacherOptions(reasoning=teacher_reasoning, api_base=api_base)
    report = asyncio.run(regenerate_reasoning(path, out, options, say=_progress))
    print(f"{report.written} reasonings written by {report.model}, {report.empty} empty")
    if report.stopped:
        print(f"stopped: {report.stopped}")
    print(out)


@app.command("mark")
def mark(
    session: Annotated[Path, typer.Argument(help="A session .jsonl file.")],
    failed: Annotated[int, typer.Option("--failed", help="The failed (or slower) turn.")],
    fixed: Annotated[int, typer.Option("--fixed", help="The later turn that passed.")],
    unmark: Annotated[bool, typer.Option("--unmark", help="Take the pair out instead.")] = False,
    note: Annotated[str, typer.Option("--note", help="Why, in a few words.")] = "",
) -> None:
    """Mark (or unmark) two turns of a session as a repair example; the mark is a session event."""
    from workbench.fixit.marks import mark_pair

    event = mark_pair(session, failed, fixed, marked=not unmark, note=note)
    what = "marked" if event.marked else "unmarked"
    print(f"{session}: turns {event.failed_turn} -> {event.fixed_turn} {what} as a repair example")
