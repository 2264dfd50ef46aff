"""The paper-style table (correct@1 / correct@T / SASS@T / best speedup@T per cell) for the terminal,
Markdown, CSV and JSON. The HTML page with plots is `workbench.bench.html_report`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from workbench.bench.metrics import CellMetrics

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


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def count(value: int | None, n: int, ci: tuple[float, float] | None) -> str:
    """`9/12 75% [47–91]`: the count, the rate and its 95 % Wilson interval."""
    if value is None:
        return "n/a"
    if n == 0:
        return "–"
    low, high = ci or (0.0, 0.0)
    return f"{value}/{n} {percent(value / n)} [{100 * low:.0f}–{100 * high:.0f}]"


def speedup(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}×"


def geomean(cell: CellMetrics) -> str:
    if cell.geomean_speedup is None:
        return "–"
    low, high = cell.geomean_speedup_ci or (cell.geomean_speedup, cell.geomean_speedup)
    return f"{cell.geomean_speedup:.3f}× [{low:.3f}–{high:.3f}]"


def _model_name(model: str) -> str:
    """A scripted or replayed model by its file's name: the full path is in the session."""
    for prefix in ("scripted:", "replay:"):
        if model.startswith(prefix):
            return prefix + model.removeprefix(prefix).rsplit("/", 1)[-1]
    return model


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
        _model_name(last.model),
        last.target,
        last.task,
        last.variant,
        f"{n}{unfinished}",
        count(first.correct, first.n_trajectories, first.correct_ci),
        count(last.correct, n, last.correct_ci),
        count(last.sass_verified, n, last.sass_verified_ci),
        speedup(last.best_speedup),
        count(last.static_passed, n, last.static_passed_ci),
        geomean(last),
    ]


def terminal_table(rows: Sequence[PaperRow], first: int, last: int) -> Table:
    """The table for a terminal: a key column whose value is the same in every row moves to the title."""
    texts = [row_texts(row) for row in rows]
    names = headers(first, last)
    constant = [i for i in range(5) if len({t[i] for t in texts}) == 1] if len(texts) > 1 else []
    same = " · ".join(f"{names[i]} {texts[0][i]}" for i in constant)
    title = f"correct@T, SASS-verified@T, best speedup@T (95 % intervals) · T = {first}, {last}"
    table = Table(title=f"{title}\n{same}" if same else title)
    shown = [i for i in range(len(names)) if i not in constant]
    for i in shown:
        table.add_column(names[i], no_wrap=names[i] in ("n", "target"))
    for text in texts:
        table.add_row(*(text[i] for i in shown))
    return table


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(rows: Sequence[PaperRow], first: int, last: int) -> str:
    head = headers(first, last)
    lines = [
        f"# Benchmark: correct@{first} / correct@{last} / SASS@{last} / best speedup@{last}",
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
        f"## Failure mix (turns 1–{last})",
        "",
        "| run | model | task | target | variant | outcomes |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cell = row.last
        mix = ", ".join(f"{STATUS_LABELS.get(k, k)} {v}" for k, v in cell.failure_mix.items()) or "none"
        lines.append(
            f"| {_md_escape(cell.run)} | {_md_escape(_model_name(cell.model))} | {cell.task} | {cell.target} | "
            f"{cell.variant} | {_md_escape(mix)} |"
        )
    return "\n".join(lines) + "\n"


def _flat(cell: CellMetrics) -> dict[str, object]:
    """One CSV row: intervals as low/high columns, the dicts as one column per key."""
    out: dict[str, object] = {}
    for key, value in cell.as_dict().items():
        if key.endswith("_ci"):
            low, high = value if value is not None else (None, None)  # type: ignore[misc]
            out[f"{key}_low"], out[f"{key}_high"] = low, high
        elif key in SPREAD:
            for sub, number in value.items():  # type: ignore[union-attr]
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


def cells_json(cells: Sequence[CellMetrics]) -> str:
    return json.dumps({"cells": [c.as_dict() for c in cells]}, indent=2) + "\n"
