"""Table columns fitted to a pane's width: words wrap between their pieces before a column goes, and
no cell is ever cut."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rich.text import Text


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int  # the widest of its title and cells, on one line
    priority: int  # the highest goes first when the pane is too narrow for all
    least: int | None = None  # a column that may wrap its words down to this width
    bend: int = 0  # which wrapping column wraps first (the lowest)


CELL_PADDING = 2  # DataTable's one cell of padding either side

# Where a cell's text may break: after an underscore (`incorrect_` / `numerical`) or a space.
_PIECE = re.compile(r"[^_ ]*[_ ]|[^_ ]+")


def pieces(text: str) -> list[str]:
    """`text` in the pieces a line may break between; a one-cell mark (✘, ×) stays with its word."""
    found = _PIECE.findall(text)
    if len(found) > 1 and len(found[0].strip()) <= 1:
        found[:2] = [found[0] + found[1]]
    return found


def narrowest(text: str) -> int:
    """The narrowest width that wraps `text` without cutting a word."""
    return max((len(piece.rstrip()) for piece in pieces(text)), default=0)


def lines(text: Text) -> int:
    return len(text.plain.splitlines()) or 1


def wrap(text: Text, width: int) -> Text:
    """`text` broken into lines of at most `width` cells between its pieces; nothing is cut."""
    if text.cell_len <= width:
        return text
    done: list[str] = []
    line = ""
    for piece in pieces(text.plain):
        if line and len((line + piece).rstrip()) > width:
            done.append(line.rstrip())
            line = ""
        line += piece
    done.append(line.rstrip())
    return Text("\n".join(done), style=text.style)


def fitting(columns: list[Column], width: int) -> list[Column]:
    """The columns that fit in `width` cells, order kept: the columns that may wrap do so (in their
    `bend` order, each only as far as needed) before the least important column goes."""
    kept = list(columns)
    while True:
        over = sum(c.width + CELL_PADDING for c in kept) - width
        wrapped = list(kept)
        for column in sorted((c for c in kept if c.least is not None), key=lambda c: c.bend):
            cut = min(max(over, 0), column.width - (column.least or column.width))
            wrapped[wrapped.index(column)] = replace(column, width=column.width - cut)
            over -= cut
        if over <= 0 or len(kept) == 1:
            return wrapped
        kept.remove(max(kept, key=lambda c: (c.priority, kept.index(c))))
