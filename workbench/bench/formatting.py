"""How every report writes a number, so the terminal, Markdown and HTML show the same strings."""

from __future__ import annotations

NOT_MEASURED = "not measured"  # a tier that never ran: never 0 %


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def count_text(value: int | None, n: int, ci: tuple[float, float] | None) -> str:
    """`9/12 75% [47–91]`: the count, the rate and its 95 % Wilson interval."""
    if value is None:
        return NOT_MEASURED
    if n == 0:
        return "–"
    low, high = ci or (0.0, 0.0)
    return f"{value}/{n} {percent(value / n)} [{100 * low:.0f}–{100 * high:.0f}]"


def speedup(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}×"
