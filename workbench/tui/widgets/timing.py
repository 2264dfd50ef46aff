"""The timing pane: every turn's candidate against each baseline, and the speedup trend."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, Sparkline

from workbench.evaluate.result import TimingStats
from workbench.tui.model import SessionView
from workbench.tui.widgets.verdict import status_icon, status_style


def spread(stats: TimingStats) -> str:
    """Interquartile range as a share of the median: how noisy the number is."""
    if stats.median_ms <= 0:
        return "—"
    return f"±{(stats.p75_ms - stats.p25_ms) / 2 / stats.median_ms:.1%}"


def speedup_text(value: float | None) -> Text:
    if value is None:
        return Text("—", style="dim")
    return Text(f"{value:.2f}×", style="bold green" if value >= 1.0 else "yellow")


def short(name: str) -> str:
    """A baseline's name without its parenthesis: `cuBLAS (torch.matmul)` heads a column as `cuBLAS`."""
    return name.split(" (")[0]


def trend_caption(view: SessionView) -> str:
    points = [(n, t.speedup) for n, t in sorted(view.turns.items()) if t.speedup is not None]
    if not points:
        return "speedup trend: no timed turn yet"
    best_turn, best = max(points, key=lambda p: p[1])
    first, last = points[0][1], points[-1][1]
    return f"speedup {first:.2f}× → {last:.2f}×, best {best:.2f}× at turn {best_turn}"


class TimingPane(Vertical):
    ALLOW_MAXIMIZE = True  # `z` zooms the pane
    DEFAULT_CSS = """
    TimingPane > DataTable { height: 1fr; }
    TimingPane Sparkline { width: 1fr; height: 2; padding: 0 1; }
    TimingPane #trend-caption { width: 1fr; height: 1; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        table: DataTable[object] = DataTable(cursor_type="row", zebra_stripes=True, id="timing-table")
        yield table
        yield Sparkline([], id="trend")
        yield Label("speedup trend: no timed turn yet", id="trend-caption")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[object, ...] = ()

    def show(self, view: SessionView, selected: int | None) -> None:
        table = self.query_one(DataTable)
        key = tuple((n, id(t.evaluation), t.candidate is not None) for n, t in sorted(view.turns.items()))
        if key != self._shown:
            self._shown = key
            self._rebuild(view, table)
        if selected is not None and str(selected) in table.rows:
            table.move_cursor(row=table.get_row_index(str(selected)), animate=False)

    def _rebuild(self, view: SessionView, table: DataTable[object]) -> None:
        baselines: list[str] = []
        for turn in view.turns.values():
            timing = turn.evaluation.stages.timing if turn.evaluation else None
            for baseline in timing.baselines if timing else []:
                if baseline.name not in baselines:
                    baselines.append(baseline.name)
        table.clear(columns=True)
        # Fixed widths: the table reads the same however its rows arrived. Speedups first: they are
        # what a narrow pane must still show.
        table.add_column("turn", key="turn", width=4)
        for name in baselines:
            table.add_column(f"× {short(name)}", key=f"{name}-x", width=max(7, len(short(name)) + 2))
        table.add_column("ms", key="ms", width=13)
        table.add_column("verdict", key="verdict", width=16)
        for name in baselines:
            table.add_column(f"{short(name)} ms", key=f"{name}-ms", width=max(8, len(short(name)) + 3))
        for number, turn in sorted(view.turns.items()):
            result = turn.evaluation
            if result is None:
                pending = Text("…" if turn.candidate else "", style="dim")
                blanks = [""] * len(baselines)
                table.add_row(str(number), *blanks, "", pending, *blanks, key=str(number))
                continue
            candidate = result.stages.timing.candidate
            by_name = {b.name: b for b in result.stages.timing.baselines}
            speedups: list[object] = []
            baseline_ms: list[object] = []
            for name in baselines:
                baseline = by_name.get(name)
                if baseline is None or candidate is None or candidate.median_ms <= 0:
                    speedups.append(speedup_text(None))
                    baseline_ms.append("—")
                else:
                    speedups.append(speedup_text(baseline.median_ms / candidate.median_ms))
                    baseline_ms.append(f"{baseline.median_ms:.4g}")
            verdict = Text(
                f"{status_icon(result.status)} {result.status.value}", style=status_style(result.status)
            )
            ms = f"{candidate.median_ms:.4g} {spread(candidate)}" if candidate else "—"
            table.add_row(str(number), *speedups, ms, verdict, *baseline_ms, key=str(number))
        speedups = [t.speedup or 0.0 for _, t in sorted(view.turns.items()) if t.evaluation is not None]
        self.query_one(Sparkline).data = speedups
        self.query_one("#trend-caption", Label).update(trend_caption(view))
