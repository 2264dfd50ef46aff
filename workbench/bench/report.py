"""The reports for the terminal, Markdown, CSV and JSON: first the paper's pivot (`workbench.bench.pivot`),
then one row per run and cell with every metric. The HTML page with plots is `workbench.bench.html_report`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from workbench.bench.formatting import count_text
from workbench.bench.labels import model_label
from workbench.bench.metrics import CellMetrics
from workbench.bench.pivot import Pivot, TargetPivot, metric_text

SPREAD = {"fast_p": "fast_", "pass_at_k": "pass@"}  # dict-valued metrics: one CSV column per key
STATUS_LABELS = {"not_run": "GPU tiers not run", "no_code": "no kernel in the answer"}


@dataclass(frozen=True)
class PaperRow:
    """One cell of the table: its metrics at the first and at the last turn limit."""

    first: CellMetrics
    last: CellMetrics

    @property
    def cell(self) -> tuple[str, str, str, str, str]:
        return self.last.cell


def paper_rows(cells: Sequence[CellMetrics], first: int, last: int) -> list[PaperRow]:
    by_limit = {(c.cell, c.turn_limit): c for c in cells}
    keys = dict.fromkeys(c.cell for c in cells)
    return [PaperRow(by_limit[(key, first)], by_limit[(key, last)]) for key in keys]


def geomean(cell: CellMetrics) -> str:
    if cell.geomean_speedup is None:
        return "–"
    low, high = cell.geomean_speedup_ci or (cell.geomean_speedup, cell.geomean_speedup)
    return f"{cell.geomean_speedup:.3f}× [{low:.3f}–{high:.3f}]"


def headers(first: int, last: int) -> list[str]:
    return [
        "run",
        "model",
        "target",
        "task",
        "variant",
        "n",
        f"correct@{first}",
        f"correct@{last}",
        f"SASS@{last}",
        f"best speedup@{last}",
        f"static@{last}",
        f"geomean@{last}",
    ]


def row_texts(row: PaperRow) -> list[str]:
    first, last = row.first, row.last
    n = last.n_trajectories
    unfinished = f" (+{last.n_unfinished} unfinished)" if last.n_unfinished else ""
    return [
        last.run,
        model_label(last.model),
        last.target,
        last.task,
        last.variant,
        f"{n}{unfinished}",
        count_text(first.correct, first.n_trajectories, first.correct_ci),
        count_text(last.correct, n, last.correct_ci),
        count_text(last.sass_verified, n, last.sass_verified_ci),
        metric_text(last, "best_speedup"),
        count_text(last.static_passed, n, last.static_passed_ci),
        geomean(last),
    ]


def terminal_table(rows: Sequence[PaperRow], first: int, last: int) -> Table:
    """The table for a terminal: a key column whose value is the same in every row moves to the title."""
    texts = [row_texts(row) for row in rows]
    names = headers(first, last)
    constant = [i for i in range(5) if len({t[i] for t in texts}) == 1] if len(texts) > 1 else []
    same = " · ".join(f"{names[i]} {texts[0][i]}" for i in constant)
    title = f"Per run: correct@T, SASS-verified@T, best speedup@T (95 % intervals) · T = {first}, {last}"
    table = Table(title=f"{title}\n{same}" if same else title)
    shown = [i for i in range(len(names)) if i not in constant]
    for i in shown:
        table.add_column(names[i], no_wrap=names[i] in ("n", "target"))
    for text in texts:
        table.add_row(*(text[i] for i in shown))
    return table


def cell_legend(pivot: Pivot) -> str:
    first, last = pivot.first, pivot.last
    shown = f"correct@{first} / correct@{last}" if last != first else f"correct@{first}"
    return f"each cell: {shown} / SASS@{last} / best speedup@{last}"


MERGE_NOTE = (
    "Runs of one model, variant, target and task are merged: their trajectories are pooled and every number "
    'is computed again over the pool. "not measured": the tier that decides it never ran there '
    '(a static sweep runs no GPU tier) or T exceeds the turns the run allowed; "–": nothing to count.'
)


MODEL_COLUMN = 28  # a longer model name wraps in its column; the numbers never do


def _chunks(tasks: list[str], fixed: int, cell: int, width: int) -> list[list[str]]:
    """Task columns in groups that fit the console beside the `fixed` columns (each column's borders
    and padding take 3 characters)."""
    per = max(1, (width - fixed - 1) // (cell + 3))
    return [tasks[i : i + per] for i in range(0, len(tasks), per)] or [[]]


def _folded(task: str, width: int) -> str:
    """A task's name on lines of about `width` characters, broken after underscores, so that the
    column is as wide as its numbers rather than its name."""
    lines = [""]
    for part in task.split("_"):
        piece = part if not lines[-1] else f"_{part}"
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def pivot_tables(pivot: Pivot, width: int, intervals: bool = False) -> list[Table]:
    """The paper's table for a terminal: one per target, split by task where it would not fit, so that
    no cell's numbers wrap."""
    tables = []
    for target in pivot.targets:
        sources = {row.source_label for row in target.rows}
        one = f" · {sources.pop()}" if len(sources) == 1 else ""  # one source: said once, in the title
        lines = {key: cell.line(intervals) for key, cell in target.cells.items()}
        model = min(MODEL_COLUMN, max(len(row.label) for row in target.rows))
        fixed = model + 3 + (0 if one else max(len(row.source_label) for row in target.rows) + 3)
        cell = max(len(line) for line in lines.values())
        for tasks in _chunks(target.tasks, fixed, cell, width):
            table = Table(title=f"{target.target}{one} · {cell_legend(pivot)}", title_justify="left")
            table.add_column("model", max_width=model, overflow="fold")
            if not one:
                table.add_column("source", no_wrap=True)
            for task in tasks:
                table.add_column(_folded(task, cell), no_wrap=True)
            for row in target.rows:
                cells = [lines.get((row, task), "") for task in tasks]
                table.add_row(row.label, *([] if one else [row.source_label]), *cells)
            tables.append(table)
    return tables


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown_pivot(target: TargetPivot, intervals: bool) -> list[str]:
    lines = [
        f"## {target.target}",
        "",
        "| model | source | " + " | ".join(target.tasks) + " |",
        "|---|---|" + "---|" * len(target.tasks),
    ]
    for row in target.rows:
        cells = [target.cells.get((row, task)) for task in target.tasks]
        texts = [c.line(intervals) if c else "" for c in cells]
        lines.append("| " + " | ".join(_md_escape(t) for t in [row.label, row.source_label, *texts]) + " |")
    return [*lines, ""]


def markdown(
    rows: Sequence[PaperRow], first: int, last: int, pivot: Pivot | None = None, intervals: bool = False
) -> str:
    """The pivot (where given) per target, then every run's row and the failure mix."""
    head = headers(first, last)
    lines = [f"# Benchmark: correct@{first} / correct@{last} / SASS@{last} / best speedup@{last}", ""]
    if pivot is not None:
        legend = cell_legend(pivot)
        lines += [f"{legend[:1].upper()}{legend[1:]}. {MERGE_NOTE}", ""]
        for target in pivot.targets:
            lines += _markdown_pivot(target, intervals)
    lines += [
        "## Per run",
        "",
        "Counts of trajectories, the rate and its 95 % Wilson interval; best speedup over correct turns;",
        "geometric-mean speedup over correct trajectories with a seeded 95 % bootstrap interval.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    lines += ["| " + " | ".join(_md_escape(t) for t in row_texts(row)) + " |" for row in rows]
    lines += [
        "",
        f"### Failure mix (turns 1–{last})",
        "",
        "| run | model | task | target | variant | outcomes |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cell = row.last
        mix = ", ".join(f"{STATUS_LABELS.get(k, k)} {v}" for k, v in cell.failure_mix.items()) or "none"
        lines.append(
            f"| {_md_escape(cell.run)} | {_md_escape(model_label(cell.model))} | {cell.task} | {cell.target} | "
            f"{cell.variant} | {_md_escape(mix)} |"
        )
    return "\n".join(lines) + "\n"


def _flat(cell: CellMetrics) -> dict[str, object]:
    """One CSV row: intervals as low/high columns, the dicts as one column per key."""
    out: dict[str, object] = {}
    for key, value in cell.as_dict().items():
        if key.endswith("_ci"):
            low, high = value if isinstance(value, tuple) else (None, None)
            out[f"{key}_low"], out[f"{key}_high"] = low, high
        elif key in SPREAD and isinstance(value, dict):
            for sub, number in value.items():
                out[f"{SPREAD[key]}{sub}"] = number
        elif key == "failure_mix":
            out[key] = json.dumps(value, sort_keys=True)
        else:
            out[key] = value
    return out


def cells_csv(cells: Sequence[CellMetrics]) -> str:
    rows = [_flat(c) for c in cells]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def cells_json(cells: Sequence[CellMetrics], pivot: Pivot | None = None) -> str:
    """`{"cells": [...]}`, per run and turn limit; with the pivot, also `{"turn_limits", "pivot": [...]}`
    whose cells hold the very strings the other reports show."""
    data: dict[str, object] = {}
    if pivot is not None:
        data["turn_limits"] = sorted({pivot.first, pivot.last})
        data["pivot"] = pivot.as_dicts()
    data["cells"] = [c.as_dict() for c in cells]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
