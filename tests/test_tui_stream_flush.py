"""A streaming answer's pieces are flushed on a timer: one that fires after its block was taken down (a
screen left mid-stream, as pressing back from a live replay does) has nowhere to go and must not end the
app (a clean-clone CI once failed `test_back_from_a_replay_opened_at_home` with NoMatches here)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from workbench.tui.widgets.conversation import FLUSH_HZ, MessageBlock


class OneBlock(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageBlock(None, role="assistant", turn=1)


async def test_a_flush_after_the_block_lost_its_markdown_drops_the_pieces() -> None:
    app = OneBlock()
    async with app.run_test() as pilot:
        block = app.query_one(MessageBlock)
        await block.write("a piece")
        await block.query_one(Markdown).remove()  # taken down before the timer fires
        for _ in range(5):
            await pilot.pause(1 / FLUSH_HZ)
        assert app.is_running
