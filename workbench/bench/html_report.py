"""One self-contained HTML page: the paper-style table, the plots inline as SVG, the failure mix."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from workbench.bench import plots
from workbench.bench.metrics import CellMetrics
from workbench.bench.records import TrajectoryRecord
from workbench.bench.report import STATUS_LABELS, PaperRow, headers, row_texts

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 80rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; }
figure { margin: 1.5rem 0; }
svg { max-width: 100%; height: auto; }
.note { color: #555; font-size: 0.9rem; }
"""


def _table(rows: Sequence[PaperRow], first: int, last: int) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers(first, last))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(text)}</td>" for text in row_texts(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _mix(cells: Sequence[CellMetrics]) -> str:
    items = []
    for cell in cells:
        mix = ", ".join(f"{html.escape(STATUS_LABELS.get(k, k))} {v}" for k, v in cell.failure_mix.items())
        name = html.escape(f"{cell.run} · {cell.model} · {cell.target} · {cell.task} · {cell.variant}")
        items.append(f"<li>{name}: {mix or 'none'}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def render_html(
    records: Sequence[TrajectoryRecord], rows: Sequence[PaperRow], first: int, last: int, title: str
) -> str:
    curves = plots.correct_curves(records, last)
    speedups = plots.speedup_distribution(records, last)
    mix = plots.failure_mix(records, last, STATUS_LABELS)
    made = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">Made {made} by ptxwb bench report. Counts are trajectories; brackets are 95 % Wilson
intervals for rates and seeded 95 % bootstrap intervals for the geometric-mean speedup. correct@T,
SASS@T and best speedup@T follow PTXBench's definitions over each trajectory's first T turns.</p>
{_table(rows, first, last)}
<h2>correct@T per model</h2><figure>{curves}</figure>
<h2>Best speedup per correct trajectory</h2><figure>{speedups}</figure>
<h2>Failure mix</h2><figure>{mix}</figure>
<h3>Per cell (turns 1–{last})</h3>{_mix([row.last for row in rows])}
</body></html>
"""
