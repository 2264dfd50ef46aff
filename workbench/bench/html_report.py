"""One self-contained HTML page: the paper's pivot per target, a filter, the plots inline as SVG, and
every run's row. No server, no CDN: the filter is a few lines of plain script in the page.

It fits a 1280-pixel window: the body is narrower than that, and a table wider than the body scrolls
inside its own box (its header and model column stay put). Light and dark follow the reader's system.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from workbench.bench import plots
from workbench.bench.labels import labelled
from workbench.bench.pivot import NOT_MEASURED, Pivot, PivotCell, TargetPivot, pivot
from workbench.bench.records import TrajectoryRecord
from workbench.bench.report import MERGE_NOTE, STATUS_LABELS, PaperRow, cell_legend, headers, row_texts

STYLE = """
:root { color-scheme: light dark; --bg: #fff; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0;
  --head: #f6f8fa; --good: 31, 136, 61; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #3d444d; --head: #151b23; --good: 63, 185, 80; }
}
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 76rem; padding: 1rem 1.25rem 3rem;
  background: var(--bg); color: var(--fg); }
h1 { font-size: 1.5rem; margin: 0.5rem 0; } h2 { font-size: 1.2rem; margin: 1.5rem 0 0.5rem; }
.note { color: var(--muted); font-size: 0.85rem; max-width: 60rem; }
.filters { position: sticky; top: 0; z-index: 3; display: flex; flex-wrap: wrap; gap: 0.5rem 1rem;
  align-items: center; padding: 0.5rem 0; background: var(--bg); border-bottom: 1px solid var(--line); }
.filters input[type=search] { width: 12rem; }
.scroll { overflow: auto; width: fit-content; max-width: 100%; max-height: 75vh; border: 1px solid var(--line); }
table { border-collapse: separate; border-spacing: 0; font-size: 12px; }
th, td { border-right: 1px solid var(--line); border-bottom: 1px solid var(--line); padding: 0.25rem 0.4rem;
  text-align: left; vertical-align: top; background: var(--bg); }
thead th { position: sticky; top: 0; z-index: 2; background: var(--head); font-weight: 600; }
.pivot thead th.task { min-width: 6.2rem; max-width: 8rem; overflow-wrap: anywhere; }
.pivot th.model { position: sticky; left: 0; z-index: 1; background: var(--head); min-width: 11rem;
  max-width: 15rem; overflow-wrap: anywhere; }
.pivot thead th.model { z-index: 3; }
.src { display: block; font-weight: 400; color: var(--muted); font-size: 11px; }
.cell { background: rgba(var(--good), calc(0.06 + 0.34 * var(--rate, 0))); }
.cell .ms, .key .ms { display: grid; grid-template-columns: minmax(2.6rem, auto) auto; gap: 0 0.6rem; white-space: nowrap; }
.nm { color: var(--muted); font-size: 11px; }
.i { display: none; } body.ci .i { display: inline; } body.ci .r { display: none; }
.key { display: inline-block; border: 1px solid var(--line); padding: 0.2rem 0.5rem; font-size: 12px; }
.runs td { white-space: nowrap; } .runs td.mix { white-space: normal; min-width: 18rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(26rem, 1fr)); gap: 1rem; }
figure { margin: 0.5rem 0; } svg { max-width: 100%; height: auto; }
.off { display: none !important; }
"""

SCRIPT = """
(function () {
  const field = (id) => document.getElementById(id);
  const words = (id) => field(id).value.toLowerCase().split(",").map((w) => w.trim()).filter(Boolean);
  const fits = (value, wanted) => !wanted.length || wanted.some((w) => value.toLowerCase().includes(w));
  function apply() {
    const model = words("f-model"), task = words("f-task"), target = field("f-target").value;
    document.querySelectorAll("[data-model],[data-task],[data-target]").forEach((el) => {
      const d = el.dataset;
      const shown = (d.model === undefined || fits(d.model, model)) &&
        (d.task === undefined || fits(d.task, task)) && (d.target === undefined || !target || d.target === target);
      el.classList.toggle("off", !shown);
    });
    // A target without a row left goes, and so does a task column without a number left.
    document.querySelectorAll("section[data-target]").forEach((section) => {
      const rows = [...section.querySelectorAll("tbody tr")].filter((row) => !row.classList.contains("off"));
      if (!rows.length) section.classList.add("off");
      section.querySelectorAll("th.task").forEach((th) => {
        const task = th.dataset.task;
        const filled = rows.some((row) => [...row.querySelectorAll("td.cell")].some((td) => td.dataset.task === task));
        if (!filled) section.querySelectorAll("[data-task]").forEach((el) => { if (el.dataset.task === task) el.classList.add("off"); });
      });
    });
    const rows = document.querySelectorAll(".pivot tbody tr");
    const left = [...rows].filter((row) => !row.closest(".off") && !row.classList.contains("off")).length;
    field("f-count").textContent = left + " of " + rows.length + " table rows shown";
  }
  ["f-model", "f-task", "f-target"].forEach((id) => field(id).addEventListener("input", apply));
  field("f-intervals").addEventListener("change", (e) => document.body.classList.toggle("ci", e.target.checked));
  apply();
})();
"""


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def _task_name(task: str) -> str:
    """A task's name, breakable after each underscore so a narrow header wraps it."""
    return "_<wbr>".join(html.escape(part) for part in task.split("_"))


def _cell(cell: PivotCell) -> str:
    plain, full = cell.texts(), cell.texts(intervals=True)
    rate = cell.last.correct_rate
    numbers = []
    for (header, text), (_, detail) in zip(plain, full, strict=True):
        muted = ' class="nm"' if text == NOT_MEASURED else ""
        numbers.append(
            f'<span data-metric="{_attr(header)}" title="{_attr(f"{header}: {detail}")}"{muted}>'
            f'<span class="r">{html.escape(text)}</span><span class="i">{html.escape(detail)}</span></span>'
        )
    runs = ", ".join(cell.runs)
    tip = f"{cell.last.n_trajectories} trajectories from {runs}"
    style = f' style="--rate:{rate:.3f}"' if rate is not None else ""
    return (
        f'<td class="cell" data-task="{_attr(cell.task)}"{style} title="{_attr(tip)}">'
        f'<div class="ms">{"".join(numbers)}</div></td>'
    )


def _pivot_table(target: TargetPivot) -> str:
    head = "".join(f'<th class="task" data-task="{_attr(t)}">{_task_name(t)}</th>' for t in target.tasks)
    body = []
    for row in target.rows:
        cells = []
        for task in target.tasks:
            cell = target.cells.get((row, task))
            cells.append(_cell(cell) if cell else f'<td data-task="{_attr(task)}"></td>')
        label = f'{html.escape(row.label)}<span class="src">{html.escape(row.source_label)}</span>'
        body.append(
            f'<tr data-model="{_attr(row.label)}"><th class="model">{label}</th>{"".join(cells)}</tr>'
        )
    return (
        f'<section data-target="{_attr(target.target)}"><h2>{html.escape(target.target)}</h2>'
        f'<div class="scroll"><table class="pivot"><thead><tr><th class="model">model</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


def _key(table: Pivot) -> str:
    """The cell layout, drawn as a cell."""
    names = [header for header, _, _ in PivotCell.metrics_for(table.first, table.last)]
    return f'<div class="key"><div class="ms">{"".join(f"<span>{html.escape(n)}</span>" for n in names)}</div></div>'


def _runs_table(rows: Sequence[PaperRow], first: int, last: int) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in [*headers(first, last), "failure mix (turns 1–T)"])
    body = []
    for row in rows:
        cell = row.last
        mix = ", ".join(f"{STATUS_LABELS.get(k, k)} {v}" for k, v in cell.failure_mix.items()) or "none"
        texts = "".join(f"<td>{html.escape(t)}</td>" for t in row_texts(row))
        body.append(
            f'<tr data-model="{_attr(cell.model)}" data-task="{_attr(cell.task)}" '
            f'data-target="{_attr(cell.target)}">{texts}<td class="mix">{html.escape(mix)}</td></tr>'
        )
    return (
        f'<div class="scroll"><table class="runs"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _filters(table: Pivot) -> str:
    targets = "".join(
        f'<option value="{_attr(t.target)}">{html.escape(t.target)}</option>' for t in table.targets
    )
    return (
        '<form class="filters" onsubmit="return false">'
        '<label>model <input id="f-model" type="search" placeholder="all (a, b: either)"></label>'
        '<label>task <input id="f-task" type="search" placeholder="all"></label>'
        f'<label>target <select id="f-target"><option value="">all</option>{targets}</select></label>'
        '<label><input id="f-intervals" type="checkbox"> counts and 95 % intervals</label>'
        '<span id="f-count" class="note"></span></form>'
    )


def render_html(
    records: Sequence[TrajectoryRecord],
    rows: Sequence[PaperRow],
    first: int,
    last: int,
    title: str,
    table: Pivot | None = None,
    note: str | None = None,
) -> str:
    """The page; `table` is the pivot the other reports showed (made here from `records` if not given)."""
    records = labelled(records)
    table = table if table is not None else pivot(records, first, last)
    curves = "".join(f"<figure>{plots.correct_curves(records, t.target)}</figure>" for t in table.targets)
    speedups = plots.speedup_distribution(records, last)
    mix = plots.failure_mix(records, last, STATUS_LABELS)
    made = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    limits = f"T = {', '.join(map(str, sorted({first, last})))}" + (f"; {note}" if note else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">{html.escape(limits)} · made {made} by ptxwb bench report · how to read it: at the end.</p>
{_filters(table)}
<p>{html.escape(_sentence(cell_legend(table)))}: {_key(table)} <span class="note">hover a number for its
count and 95 % Wilson interval, a cell for its runs; the shade is correct@{last}.</span></p>
{"".join(_pivot_table(t) for t in table.targets)}
<h2>correct@T per model, every task of the target pooled</h2>
<p class="note">For every T each run reached. Solid: this workbench's runs; dashed: PTXBench's published runs.
No point where correctness was not measured. The model filter hides lines too.</p>
<div class="plots">{curves}</div>
<h2>Best speedup per correct trajectory</h2><figure>{speedups}</figure>
<h2>Failure mix</h2><figure>{mix}</figure>
<h2>Per run</h2>
<p class="note">One row per run and cell with every metric: counts, rates and 95 % Wilson intervals; the geometric
mean speedup over correct trajectories with a seeded 95 % bootstrap interval.</p>
{_runs_table(rows, first, last)}
<h2>How to read it</h2>
<p class="note">correct@T, SASS@T and best speedup@T follow PTXBench's definitions over each trajectory's first
T turns: the share of trajectories with a correct turn; with a correct turn whose target instructions were
proven executed; the largest speedup of a correct turn over the vendor baseline. {html.escape(MERGE_NOTE)}</p>
<script>{SCRIPT}</script>
</body></html>
"""
