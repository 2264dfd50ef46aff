"""The code pane's tabs: a listing that becomes ready is shown where its tab waits for it, and one that
comes while the tab's view cannot be found waits for the tab instead of ending the app."""

from __future__ import annotations

from textual.app import App, ComposeResult

from workbench.tui.document import CodeDocument
from workbench.tui.widgets.code_pane import CodePane


class PaneApp(App[None]):
    def __init__(self, pane: CodePane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        yield self.pane


def _listing() -> CodeDocument:
    return CodeDocument.from_text(".version 8.7\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "ptx")


async def test_a_listing_ready_before_the_panes_views_are_there_is_shown_when_its_tab_opens() -> None:
    pane = CodePane(id="code")
    pane.update_placeholder("ptx", _listing)  # not mounted: no view to ask
    async with PaneApp(pane).run_test() as pilot:
        assert pane.view("ptx").document.lines == []  # not built while its tab is closed
        pane.activate("ptx")
        await pilot.pause()
        assert "wgmma.mma_async" in "\n".join(pane.view("ptx").document.lines)


async def test_a_listing_ready_for_a_waiting_tab_replaces_its_placeholder_and_a_shown_one_stays() -> None:
    pane = CodePane(id="code")
    async with PaneApp(pane).run_test() as pilot:
        pane.show({"ptx": lambda: CodeDocument.missing("rebuilding…")})
        pane.activate("ptx")
        await pilot.pause()
        assert pane.view("ptx").document.unavailable == "rebuilding…"
        pane.update_placeholder("ptx", _listing)
        await pilot.pause()
        assert "wgmma.mma_async" in "\n".join(pane.view("ptx").document.lines)
        pane.update_placeholder("ptx", lambda: CodeDocument.missing("should not replace a shown listing"))
        await pilot.pause()
        assert pane.view("ptx").document.unavailable == ""


async def test_a_listing_ready_while_the_panes_tabs_are_gone_waits_instead_of_ending_the_app() -> None:
    """The tabs went (the screen being dismissed) while the PTX listing was still waited for: before
    it waited, the query of the active tab raised in the listing worker and ended the app (CI at fc9a5b5)."""
    from textual.widgets import TabbedContent

    pane = CodePane(id="code")
    async with PaneApp(pane).run_test() as pilot:
        pane.show({"cuda": lambda: CodeDocument.from_text("__global__ void k() {}", "cuda"), "ptx": _listing})
        await pilot.pause()
        await pane.query_one(TabbedContent).remove()
        pane.update_placeholder("ptx", _listing)  # waits for a tab that is not there: no error
        await pilot.pause()
        assert pilot.app.is_running
