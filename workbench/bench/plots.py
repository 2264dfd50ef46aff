"""The report's plots, drawn with matplotlib to SVG text (no display, no files): correct@T curves per
model, the distribution of each model's per-trajectory best speedups, and the failure mix.
"""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from workbench.bench.metrics import best_speedup
from workbench.bench.records import TrajectoryRecord


def _figure(width: float, height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("svg", force=False)
    from matplotlib.figure import Figure

    # Text stays text (smaller, searchable); the page is still one self-contained file.
    matplotlib.rcParams["svg.fonttype"] = "none"
    figure = Figure(figsize=(width, height))
    return figure, figure.subplots()


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # the XML prologue does not belong inside HTML


def _label(record: TrajectoryRecord) -> str:
    model = record.key.model
    for prefix in ("scripted:", "replay:"):
        if model.startswith(prefix):
            model = prefix + model.removeprefix(prefix).rsplit("/", 1)[-1]
    return f"{model} · {record.key.target}" + ("" if record.source == "sweep" else f" ({record.source})")


def _by_series(records: Sequence[TrajectoryRecord]) -> dict[str, list[TrajectoryRecord]]:
    series: dict[str, list[TrajectoryRecord]] = defaultdict(list)
    for record in records:
        if record.finished:
            series[_label(record)].append(record)
    return dict(sorted(series.items()))


def correct_curves(records: Sequence[TrajectoryRecord], max_turn: int) -> str:
    """Share of a model's trajectories (over all its tasks) with a correct turn among the first T."""
    figure, axes = _figure(7.0, 3.6)
    turns = list(range(1, max_turn + 1))
    for label, group in _by_series(records).items():
        rates = [
            sum(any(r.correct for r in t.rows if r.turn <= limit) for t in group) / len(group)
            for limit in turns
        ]
        axes.plot(turns, rates, marker="o", label=f"{label} (n={len(group)})")
    axes.set(xlabel="turn limit T", ylabel="correct@T (share of trajectories)", ylim=(-0.02, 1.02))
    axes.set_xticks(turns)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small", loc="best")
    return _svg(figure)


def speedup_distribution(records: Sequence[TrajectoryRecord], max_turn: int) -> str:
    """Each correct trajectory's best speedup within the first T turns, one box per model."""
    figure, axes = _figure(7.0, 3.6)
    series = _by_series(records)
    values = {
        label: [
            b for b in (best_speedup(r for r in t.rows if r.turn <= max_turn) for t in group) if b is not None
        ]
        for label, group in series.items()
    }
    shown = {label: v for label, v in values.items() if v}
    if shown:
        axes.boxplot(list(shown.values()), tick_labels=list(shown), orientation="horizontal", widths=0.5)
        axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
        axes.set(xlabel=f"best speedup over the baseline (turns 1–{max_turn})")
    else:
        axes.text(0.5, 0.5, "no correct, timed turn: no speedup measured", ha="center", va="center")
        axes.set_axis_off()
    return _svg(figure)


def failure_mix(records: Sequence[TrajectoryRecord], max_turn: int, labels: dict[str, str]) -> str:
    """Every evaluated turn's outcome, stacked per model."""
    series = _by_series(records)
    mixes = {
        label: Counter(r.status for t in group for r in t.rows if r.turn <= max_turn)
        for label, group in series.items()
    }
    statuses = sorted({s for mix in mixes.values() for s in mix}, key=lambda s: (s != "passed", s))
    figure, axes = _figure(7.0, 0.6 + 0.5 * max(1, len(mixes)))
    left = [0] * len(mixes)
    names = list(mixes)
    for status in statuses:
        widths = [mixes[name][status] for name in names]
        axes.barh(names, widths, left=left, label=labels.get(status, status))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.set(xlabel=f"turns (1–{max_turn})")
    if statuses:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(figure)
