"""The timing pane: every turn's candidate against each baseline, and the speedup trend."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, Sparkline

from workbench.evaluate.result import EvalResult, TimingStats
from workbench.tui.model import SessionView
from workbench.tui.widgets.columns import Column, fitting, lines, narrowest, wrap
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
    # Two short lines: each fits the narrowest pane whole, where one long line was cut.
    return f"speedup {first:.2f}× → {last:.2f}×\nbest {best:.2f}× at turn {best_turn}"


def verdict_text(result: EvalResult) -> Text:
    return Text(f"{status_icon(result.status)} {result.status.value}", style=status_style(result.status))


class TimingPane(Vertical):
    ALLOW_MAXIMIZE = True  # `z` zooms the pane
    DEFAULT_CSS = """
    TimingPane > DataTable { height: 1fr; overflow-x: hidden; }
    TimingPane Sparkline { width: 1fr; height: 2; padding: 0 1; display: none; }
    TimingPane #trend-caption { width: 1fr; height: auto; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        table: DataTable[object] = DataTable(cursor_type="row", zebra_stripes=True, id="timing-table")
        yield table
        yield Sparkline([], id="trend")
        yield Label("speedup trend: no timed turn yet", id="trend-caption")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[object, ...] = ()
        self._view: SessionView | None = None
        self._selected: int | None = None

    def on_resize(self) -> None:
        if self._view is not None:
            self.show(self._view, self._selected)  # the columns that fit depend on the width

    def show(self, view: SessionView, selected: int | None) -> None:
        self._view, self._selected = view, selected
        table = self.query_one(DataTable)
        # The columns are fitted to the width, so the table never scrolls sideways; room is kept for
        # the vertical scrollbar, which appears only once the rows overflow.
        width = table.size.width - table.styles.gutter.width - table.styles.scrollbar_size_vertical
        turns = tuple((n, id(t.evaluation), t.candidate is not None) for n, t in sorted(view.turns.items()))
        if (turns, width) != self._shown:
            self._shown = (turns, width)
            self._rebuild(view, table, width)
        # The cursor on the turn shown: the latest while following, so the newest row stays in view.
        shown = selected if selected is not None else view.latest_turn
        if shown is not None and str(shown) in table.rows:
            table.move_cursor(row=table.get_row_index(str(shown)), animate=False)

    @staticmethod
    def _columns(view: SessionView, baselines: list[str]) -> list[Column]:
        """Every column, widest content first measured; speedups and the verdict matter most. A speedup's
        header wraps first (its values are short), then the verdict."""
        verdicts = [verdict_text(t.evaluation).plain for t in view.turns.values() if t.evaluation]
        columns = [Column("turn", "turn", 4, 0)]
        for index, name in enumerate(baselines):
            title = f"× {short(name)}"
            least = max(6, narrowest(title))
            columns.append(Column(f"{name}-x", title, max(6, len(title)), 1 if index == 0 else 4, least))
        columns.append(Column("ms", "ms", 13, 3))
        widest = max([7, *map(len, verdicts)])
        columns.append(Column("verdict", "verdict", widest, 2, max([7, *map(narrowest, verdicts)]), bend=1))
        for name in baselines:
            title = f"{short(name)} ms"
            least = max(8, narrowest(title))
            columns.append(Column(f"{name}-ms", title, max(8, len(title)), 5, least, bend=2))
        return columns

    def _rebuild(self, view: SessionView, table: DataTable[object], width: int) -> None:
        baselines: list[str] = []
        for turn in view.turns.values():
            timing = turn.evaluation.stages.timing if turn.evaluation else None
            for baseline in timing.baselines if timing else []:
                if baseline.name not in baselines:
                    baselines.append(baseline.name)
        table.clear(columns=True)
        shown = fitting(self._columns(view, baselines), width)
        titles = [wrap(Text(column.title), column.width) for column in shown]
        table.header_height = max(map(lines, titles))
        for column, title in zip(shown, titles, strict=True):
            table.add_column(title, key=column.key, width=column.width)
        for number, turn in sorted(view.turns.items()):
            cells = self._cells(number, turn.evaluation, turn.candidate is not None, baselines)
            row = [wrap(cells[c.key], c.width) for c in shown]
            table.add_row(*row, key=str(number), height=max(map(lines, row)))
        # Timed turns only: an untimed turn has no speedup (not zero); a trend needs two of them.
        speedups = [t.speedup for _, t in sorted(view.turns.items()) if t.speedup is not None]
        sparkline = self.query_one(Sparkline)
        sparkline.data = speedups
        sparkline.display = len(speedups) > 1
        self.query_one("#trend-caption", Label).update(trend_caption(view))

    @staticmethod
    def _cells(
        number: int, result: EvalResult | None, has_candidate: bool, baselines: list[str]
    ) -> dict[str, Text]:
        cells = {"turn": Text(str(number))}
        if result is None:
            blank = {key: Text("") for name in baselines for key in (f"{name}-x", f"{name}-ms")}
            return {
                **cells,
                **blank,
                "ms": Text(""),
                "verdict": Text("…" if has_candidate else "", style="dim"),
            }
        candidate = result.stages.timing.candidate
        by_name = {b.name: b for b in result.stages.timing.baselines}
        for name in baselines:
            baseline = by_name.get(name)
            if baseline is None or candidate is None or candidate.median_ms <= 0:
                cells[f"{name}-x"], cells[f"{name}-ms"] = speedup_text(None), Text("—")
            else:
                cells[f"{name}-x"] = speedup_text(baseline.median_ms / candidate.median_ms)
                cells[f"{name}-ms"] = Text(f"{baseline.median_ms:.4g}")
        cells["ms"] = Text(f"{candidate.median_ms:.4g} {spread(candidate)}" if candidate else "—")
        cells["verdict"] = verdict_text(result)
        return cells
