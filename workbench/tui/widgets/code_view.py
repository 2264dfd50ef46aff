"""A read-only, virtualised code view: only the lines on screen are highlighted and rendered.

Built on Textual's Line API (`ScrollView.render_line`), like a log viewer, so a 20k-line SASS listing
opens as fast as a 20-line one. Lines of the target's instruction families carry a tag in the gutter
and a tinted background; `n` / `N` jump between them.
"""

from __future__ import annotations

import textwrap
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workbench.tui.document import CodeDocument
from workbench.tui.families import TAGS
from workbench.tui.highlight import LINE_ORIENTED, TokenStyles, highlight_line, highlight_whole

TAG_WIDTH = 7
SOURCE_WIDTH = 7  # "L1234 "
COUNT_WIDTH = 12  # " 4.59M  147M ": warp instructions executed, predicated-on threads


def short_count(value: int) -> str:
    """At most five characters: 987, 12.3K, 4.59M, 147G."""
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if value >= limit:
            scaled = value / limit
            text = next(t for d in (2, 1, 0) if len(t := f"{scaled:.{d}f}") <= 4 or d == 0)
            return text + suffix
    return str(value)


class CodeView(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "code-view--gutter",
        "code-view--mark",
        "code-view--tag",
        "code-view--cursor",
        "code-view--related",
        "code-view--missing",
        "code-view--count",
        "code-view--idle",
    }
    DEFAULT_CSS = """
    CodeView { background: $surface; }
    CodeView > .code-view--gutter { color: $text-muted; }
    CodeView > .code-view--mark { background: $success 12%; }
    CodeView > .code-view--tag { color: $success; text-style: bold; }
    CodeView > .code-view--cursor { background: $accent 30%; }
    CodeView > .code-view--related { background: $warning 18%; }
    CodeView > .code-view--missing { color: $text-warning; text-style: italic; }
    CodeView > .code-view--count { color: $text-accent; }
    CodeView > .code-view--idle { color: $text-disabled; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", show=False),
        Binding("down", "cursor(1)", show=False),
        Binding("pageup", "cursor(-20)", show=False),
        Binding("pagedown", "cursor(20)", show=False),
        Binding("home", "cursor(-1000000)", show=False),
        Binding("end", "cursor(1000000)", show=False),
    ]

    cursor_line: reactive[int | None] = reactive(None)

    class CursorMoved(Message):
        def __init__(self, view: CodeView, line: int | None) -> None:
            self.view = view
            self.line = line
            super().__init__()

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.document = CodeDocument.missing("nothing yet")
        self._strips: LRUCache[int, Strip] = LRUCache(2048)
        self._whole: list[Text] | None = None
        self._styles: TokenStyles | None = None
        self._mark_lines: list[int] = []
        self.related: set[int] = set()  # lines tied to a line of another view (source <-> SASS)

    def on_mount(self) -> None:
        self.watch(self.app, "theme", self._theme_changed, init=False)

    def _theme_changed(self) -> None:
        self._styles = None
        self._strips.clear()
        self.refresh()

    def show(self, document: CodeDocument, *, keep_position: bool = False) -> None:
        self.document = document
        self._strips.clear()
        self._whole = None
        self._mark_lines = sorted(document.marks)
        self.related = set()
        self.cursor_line = None
        self.virtual_size = Size(document.width + self._gutter_width(), len(document.lines))
        if not keep_position:
            self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def goto_line(self, line: int) -> None:
        """Put the cursor on a 0-based line and scroll it into view (a third from the top)."""
        if not self.document.lines:
            return
        line = max(0, min(line, len(self.document.lines) - 1))
        self.cursor_line = line
        self.scroll_to(y=max(0, line - self.scrollable_content_region.height // 3), animate=False)

    def action_cursor(self, step: int) -> None:
        """Move the line cursor (from the top line shown, the first time), scrolling to keep it in view."""
        if not self.document.lines:
            return
        top = self.scroll_offset.y
        line = (
            top
            if self.cursor_line is None
            else max(0, min(self.cursor_line + step, len(self.document.lines) - 1))
        )
        self.cursor_line = line
        height = self.scrollable_content_region.height
        if not self.scroll_offset.y <= line < self.scroll_offset.y + height:
            self.scroll_to(y=max(0, line - (height - 1 if step > 0 else 0)), animate=False)

    def on_click(self, event: Click) -> None:
        line = self.scroll_offset.y + event.y
        if 0 <= line < len(self.document.lines):
            self.cursor_line = line

    def relate(self, lines: set[int]) -> None:
        """Tint `lines`: the ones a line of the other view maps to."""
        self.related = lines
        self._strips.clear()
        self.refresh()

    def jump_to_mark(self, direction: int) -> None:
        """Put the cursor on the next (1) or previous (-1) marked line, wrapping around."""
        if not self._mark_lines:
            self.notify("no target-family lines in this listing", severity="warning", timeout=2)
            return
        here = self.cursor_line if self.cursor_line is not None else self.scroll_offset.y - 1
        if direction > 0:
            after = [m for m in self._mark_lines if m > here]
            self.goto_line(after[0] if after else self._mark_lines[0])
        else:
            before = [m for m in self._mark_lines if m < here]
            self.goto_line(before[-1] if before else self._mark_lines[-1])

    def watch_cursor_line(self, line: int | None) -> None:
        self.refresh()
        self.post_message(self.CursorMoved(self, line))

    def _gutter_width(self) -> int:
        return (
            self._number_width()
            + (SOURCE_WIDTH if self.document.source_lines else 0)
            + (TAG_WIDTH if self.document.marks else 0)
            + (COUNT_WIDTH if self.document.executed else 0)
        )

    def _number_width(self) -> int:
        return len(str(max(len(self.document.lines), 1))) + 1

    def _token_styles(self) -> TokenStyles:
        if self._styles is None:
            self._styles = TokenStyles(dark=self.app.current_theme.dark)
        return self._styles

    def _code_strip(self, index: int) -> Strip:
        strip = self._strips.get(index)
        if strip is not None:
            return strip
        doc = self.document
        styles = self._token_styles()
        if doc.language in LINE_ORIENTED:
            text = highlight_line(doc.line(index), doc.language, styles)
        else:
            if self._whole is None:
                self._whole = highlight_whole("\n".join(doc.lines), doc.language, styles)
            text = self._whole[index]
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        strip = Strip(segments, text.cell_len)
        self._strips.set(index, strip)
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        doc = self.document
        if doc.unavailable:
            # Wrapped to the pane: a path at the end of the reason is never cut off.
            lines = textwrap.wrap(doc.unavailable, max(10, width - 4), break_on_hyphens=False)
            if 1 <= y <= len(lines):
                style = base + self.get_component_rich_style("code-view--missing")
                return Strip([Segment(f"  {lines[y - 1]}", style)]).extend_cell_length(width, base)
            return Strip.blank(width, base)
        if index >= len(doc.lines):
            return Strip.blank(width, base)
        family = doc.marks.get(index)
        line_style = base
        if family:
            line_style = base + self.get_component_rich_style("code-view--mark")
        if index in self.related:
            line_style = line_style + self.get_component_rich_style("code-view--related")
        if index == self.cursor_line:
            line_style = line_style + self.get_component_rich_style("code-view--cursor")
        gutter = [Segment(f"{index + 1:>{self._number_width() - 1}} ", line_style + self._gutter_style())]
        if doc.source_lines:  # the CUDA line each instruction came from
            source = doc.source_lines.get(index)
            shown = f"L{source}" if source is not None else ""
            gutter.append(Segment(f"{shown:>{SOURCE_WIDTH - 1}} ", line_style + self._gutter_style()))
        if doc.marks:
            tag = TAGS.get(family, family)[: TAG_WIDTH - 1] if family else ""
            gutter.append(Segment(f"{tag:<{TAG_WIDTH - 1}} ", line_style + self._tag_style()))
        if doc.executed:  # the profiled call's counts: warp instructions, predicated-on threads
            counts = doc.executed.get(index)
            shown = (
                f"{short_count(counts.executed):>5} {short_count(counts.predicated_on):>5}" if counts else ""
            )
            component = "code-view--count" if counts and counts.executed else "code-view--idle"
            gutter.append(
                Segment(
                    f"{shown:>{COUNT_WIDTH - 1}} ",
                    line_style + self.get_component_rich_style(component, partial=True),
                )
            )
        code_width = max(0, width - self._gutter_width())
        code = self._code_strip(index).crop(scroll_x, scroll_x + code_width).apply_style(line_style)
        return Strip.join([Strip(gutter), code]).extend_cell_length(width, line_style)

    def _gutter_style(self) -> Style:
        return self.get_component_rich_style("code-view--gutter", partial=True)

    def _tag_style(self) -> Style:
        return self.get_component_rich_style("code-view--tag", partial=True)
