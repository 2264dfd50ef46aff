"""The report's plots, drawn with matplotlib to SVG text (no display, no files).

correct@T curves per target (each model's line; PTXBench's published runs dashed beside the user's
solid ones), each series' distribution of per-trajectory best speedups, and the failure mix. Legends sit
outside the axes, so they never cover data. Text, axes and ticks are drawn in `currentColor` on a
transparent background, so a plot reads in the page's light and dark colours alike. Each curve and its
legend entry carry `data-model`, so the page's model filter hides them with the table rows.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from workbench.bench.labels import model_labels
from workbench.bench.metrics import answered, best_speedup, correctness_known
from workbench.bench.pivot import PLAIN_VARIANTS
from workbench.bench.ptxbench import SOURCE as PTXBENCH
from workbench.bench.records import TrajectoryRecord

INK = "#010203"  # drawn as this, then written as currentColor: the page's text colour
STYLE = {
    "svg.fonttype": "none",  # text stays text: smaller, searchable, in the page's font
    "svg.hashsalt": "ptxwb",  # the same data gives the same SVG
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.edgecolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "grid.color": INK,
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "legend.facecolor": "none",
    "legend.edgecolor": INK,
    "legend.framealpha": None,
    "font.size": 9,
}
COLOURS = "tab20"
WIDE = 10.0  # inches: a plot with a series' name beside each row keeps a readable axis


@dataclass(frozen=True, order=True)
class Series:
    """One line of a plot: a model (and variant) of one source."""

    source: str
    model: str
    variant: str

    @property
    def label(self) -> str:
        variant = "" if self.variant in PLAIN_VARIANTS else f" · {self.variant}"
        source = " (PTXBench)" if self.source == PTXBENCH else ""
        return f"{self.model}{variant}{source}"


@contextmanager
def _figure(width: float, height: float) -> Iterator[tuple[Any, Any]]:
    import matplotlib

    matplotlib.use("svg", force=False)
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, STYLE)):  # its stubs want each key as a literal
        figure = Figure(figsize=(width, height), layout="constrained")
        yield figure, figure.subplots()


def _svg(figure: Any, prefix: str, models: dict[str, str] | None = None) -> str:
    """The figure as inline SVG: ink as currentColor, tagged groups given their `data-model`, and every
    id prefixed, so that several plots in one page never share an id (a clip path would be another's)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg") :].replace(INK, "currentColor")  # no XML prologue inside HTML
    for old, new in (
        (' id="', f' id="{prefix}-'),
        ("url(#", f"url(#{prefix}-"),
        ('href="#', f'href="#{prefix}-'),
    ):
        text = text.replace(old, new)
    for gid, model in (models or {}).items():
        gid = f"{prefix}-{gid}"
        text = text.replace(
            f'<g id="{gid}">', f'<g id="{gid}" class="series" data-model="{html.escape(model)}">'
        )
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.DOTALL)  # the tool's date: not ours


def _by_series(records: Sequence[TrajectoryRecord]) -> dict[Series, list[TrajectoryRecord]]:
    labels = model_labels(r.key.model for r in records)
    series: dict[Series, list[TrajectoryRecord]] = {}
    for record in records:
        if record.finished:
            key = Series(record.source, labels[record.key.model], record.key.variant)
            series.setdefault(key, []).append(record)
    return dict(sorted(series.items(), key=lambda item: (item[0].source != "sweep", item[0])))


def _legend_below(figure: Any, columns: int) -> Any:
    """The figure's legend under its axes: the layout makes room for it, so it covers nothing."""
    if not figure.axes[0].get_legend_handles_labels()[0]:
        return None
    return figure.legend(loc="outside lower center", ncol=columns, fontsize="small")


def _correct_rate(group: list[TrajectoryRecord], limit: int) -> float:
    """correct@T of the pooled trajectories; NaN (no point drawn) where it was not measured."""
    answers = [answered([r for r in t.rows if r.turn <= limit], "correct", correctness_known) for t in group]
    return math.nan if None in answers else sum(bool(a) for a in answers) / len(answers)


def correct_curves(records: Sequence[TrajectoryRecord], target: str) -> str:
    """Per series, the share of its trajectories on this target (all tasks pooled) with a correct turn
    among the first T, for every T its runs reached: the whole per-turn curve, whatever T the tables use."""
    series = _by_series([r for r in records if r.key.target == target])
    longest = max((row.turn for group in series.values() for t in group for row in t.rows), default=1)
    tags: dict[str, str] = {}
    with _figure(6.0, 3.0 + 0.1 * len(series)) as (figure, axes):
        colours = _palette()
        for index, (key, group) in enumerate(series.items()):
            turns = list(range(1, max((row.turn for t in group for row in t.rows), default=1) + 1))
            rates = [_correct_rate(group, limit) for limit in turns]
            note = " not measured" if all(math.isnan(rate) for rate in rates) else ""
            style = {"linestyle": "--", "marker": "."} if key.source == PTXBENCH else {"marker": "o"}
            colour = _colour(colours, index)
            label = f"{key.label} (n={len(group)}){note}"
            (line,) = axes.plot(turns, rates, label=label, color=colour, **style)
            line.set_gid(f"line-{index}")
            tags[f"line-{index}"] = key.model
        axes.set(xlabel="turn limit T", ylabel="correct@T", ylim=(-0.03, 1.03), title=target)
        axes.set_xticks(range(1, longest + 1))
        axes.grid(alpha=0.25)
        legend = _legend_below(figure, 2 if len(series) > 3 else 1)
        if legend is not None:
            for index, (key, handle, text) in enumerate(
                zip(series, legend.get_lines(), legend.get_texts(), strict=True)
            ):
                for kind, artist in (("key", handle), ("text", text)):
                    artist.set_gid(f"{kind}-{index}")
                    tags[f"{kind}-{index}"] = key.model
        return _svg(figure, f"curves-{target}", tags)


def _palette() -> Any:
    import matplotlib

    return matplotlib.colormaps[COLOURS]


def _colour(colours: Any, index: int) -> Any:
    """tab20's dark shades first, then its light ones: 20 series before a colour repeats."""
    return colours((2 * index + (index // 10)) % 20 / 20 + 0.025)


def _label(key: Series, target: str, targets: int) -> str:
    return key.label if targets == 1 else f"{key.label} · {target}"


def speedup_distribution(records: Sequence[TrajectoryRecord], max_turn: int) -> str:
    """Each correct trajectory's best speedup within the first T turns, one box per series and target."""
    targets = sorted({r.key.target for r in records})
    values: dict[str, list[float]] = {}
    for target in targets:
        for key, group in _by_series([r for r in records if r.key.target == target]).items():
            bests = [best_speedup(r for r in t.rows if r.turn <= max_turn) for t in group]
            found = [b for b in bests if b is not None]
            if found:
                values[f"{_label(key, target, len(targets))} (n={len(found)})"] = found
    with _figure(WIDE, 0.9 + 0.28 * max(1, len(values))) as (figure, axes):
        if values:
            ink = {"color": INK}
            axes.boxplot(
                list(values.values()), tick_labels=list(values), orientation="horizontal", widths=0.5,
                boxprops=ink, whiskerprops=ink, capprops=ink, flierprops={"markeredgecolor": INK},
            )  # fmt: skip
            axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
            axes.invert_yaxis()  # the first series on top, as in the table
            axes.grid(alpha=0.25, axis="x")
            axes.set(xlabel=f"best speedup over the baseline per correct trajectory (turns 1–{max_turn})")
        else:
            axes.text(0.5, 0.5, "no correct, timed turn: no speedup measured", ha="center", va="center")
            axes.set_axis_off()
        return _svg(figure, "speedups")


def failure_mix(records: Sequence[TrajectoryRecord], max_turn: int, labels: dict[str, str]) -> str:
    """Every evaluated turn's outcome as a share of the series' turns, stacked per series and target."""
    targets = sorted({r.key.target for r in records})
    mixes: dict[str, Counter[str]] = {}
    for target in targets:
        for key, group in _by_series([r for r in records if r.key.target == target]).items():
            mix = Counter(r.status for t in group for r in t.rows if r.turn <= max_turn)
            mixes[f"{_label(key, target, len(targets))} ({mix.total()} turns)"] = mix
    statuses = sorted({s for mix in mixes.values() for s in mix}, key=lambda s: (s != "passed", s))
    names = list(mixes)
    with _figure(WIDE, 1.2 + 0.28 * max(1, len(names)) + 0.1 * len(statuses)) as (figure, axes):
        colours = _palette()
        left = [0.0] * len(names)
        for index, status in enumerate(statuses):
            widths = [mixes[name][status] / max(1, mixes[name].total()) for name in names]
            axes.barh(
                names, widths, left=left, label=labels.get(status, status), color=_colour(colours, index)
            )
            left = [a + b for a, b in zip(left, widths, strict=True)]
        axes.invert_yaxis()
        axes.set(xlabel=f"share of turns 1–{max_turn}", xlim=(0, 1))
        _legend_below(figure, 3)
        return _svg(figure, "mix")
