"""The code pane: CUDA, PTX, SASS and Diff tabs over one virtualised view each."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import Label, TabbedContent, TabPane

from workbench.tui.artifacts import DocumentMaker
from workbench.tui.document import CodeDocument
from workbench.tui.widgets.code_view import CodeView

TABS = {"cuda": "CUDA", "ptx": "PTX", "sass": "SASS", "diff": "Diff"}


class CodePane(Vertical):
    ALLOW_MAXIMIZE = True  # `z` zooms the pane
    DEFAULT_CSS = """
    CodePane TabPane { padding: 0; }
    CodePane .summary { height: auto; max-height: 3; color: $text-muted; padding: 0 1; width: 1fr; }
    CodePane CodeView { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        with TabbedContent(id="code-tabs"):
            for key, title in TABS.items():
                with TabPane(title, id=f"tab-{key}"):
                    yield Label("", classes="summary", id=f"summary-{key}")
                    yield CodeView(id=f"code-{key}")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._pending: dict[str, DocumentMaker] = {}
        self._keep_position = False

    def show(
        self,
        documents: dict[str, DocumentMaker],
        *,
        keep_position: bool = False,
        error_line: int | None = None,
    ) -> None:
        """Show a turn: the visible tab's document now, the others when their tab is opened.

        `error_line` (0-based) puts the CUDA view's cursor on the first compiler error.
        """
        self._pending = dict(documents)
        self._keep_position = keep_position
        self._build(self.active)
        if error_line is not None:
            self._build("cuda")
            self.view("cuda").goto_line(error_line)

    def replace(self, key: str, maker: DocumentMaker) -> None:
        """A new document for one tab of the turn shown (a listing that was not ready before)."""
        self._pending[key] = maker
        if self.active == key:
            self._build(key)

    def update_placeholder(self, key: str, maker: DocumentMaker) -> None:
        """A listing that is now ready, for a tab that waits for it (a shown listing stays as it is). Where
        the pane's widgets are not there to ask, the listing waits for the tab to be built: a rebuilt
        listing once came while the pane's PTX view could not be found (a clean-clone run at acdb7be), and
        once while its tabs could not (at fc9a5b5, the view found), and the worker's error ended the app."""
        try:
            if key in self._pending or self.view(key).document.unavailable:
                self.replace(key, maker)
        except NoMatches:
            self._pending[key] = maker

    def _build(self, key: str) -> None:
        maker = self._pending.pop(key, None)
        if maker is None:
            return
        document = maker()
        self.view(key).show(document, keep_position=self._keep_position)
        self.query_one(f"#summary-{key}", Label).update(self._summary(key, document))
        self._show_legend()

    def _show_legend(self) -> None:
        # The SASS gutter's counts column says what it holds on the pane's lower border, out of the
        # summary's way.
        self.border_subtitle = self.view("sass").document.counts_legend() if self.active == "sass" else ""

    def on_code_view_cursor_moved(self, event: CodeView.CursorMoved) -> None:
        # The SASS cursor's instruction: its profiled counts and its CUDA line, shown above the listing
        # (Nsight's source view).
        sass = self.view("sass")
        document = sass.document
        if event.view is not sass or event.line is None:
            return
        said = []
        counts = document.executed.get(event.line)
        if counts is not None:
            # Executed by warps; threads with the predicate on, of all that reached it where some had it off.
            off = f"/{counts.threads:,}" if counts.threads != counts.predicated_on else ""
            said.append(f": {counts.executed:,}× · {counts.predicated_on:,}{off} threads on")
            sampled = document.samples_at(event.line)
            if sampled:
                said.append(f" · {sampled}")
        source = document.source_line_at(event.line) if document.source_lines else None
        cuda = self.document("cuda").lines if source is not None else []
        if source is not None and 0 < source <= len(cuda):
            said.append(f" ← CUDA line {source}: {cuda[source - 1].strip()}  (j jumps there)")
        label = self.query_one("#summary-sass", Label)
        if said:
            label.update(f"SASS line {event.line + 1}{''.join(said)}")
        elif document.executed:  # a line without counts: the listing's summary again
            label.update(self._summary("sass", document))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self._build(event.pane.id.removeprefix("tab-"))
        self._show_legend()

    @staticmethod
    def _summary(key: str, document: CodeDocument) -> str:
        if document.unavailable:
            return TABS[key]  # the view below says why, wrapped to the pane
        hint = " · n and N jump between the marked lines" if document.marks else ""
        return f"{TABS[key]} · {document.summary()}{hint}"

    @property
    def active(self) -> str:
        return (self.query_one(TabbedContent).active or "tab-cuda").removeprefix("tab-")

    def activate(self, key: str) -> None:
        self._build(key)
        self.query_one(TabbedContent).active = f"tab-{key}"
        self.view(key).focus()

    def view(self, key: str) -> CodeView:
        return self.query_one(f"#code-{key}", CodeView)

    def document(self, key: str) -> CodeDocument:
        self._build(key)
        return self.view(key).document
