"""The conversation pane: messages as markdown, the model's reply streamed as its tokens arrive.

Long messages (the system prompt with its knowledge pack, evaluation feedback) start collapsed, and
their markdown is only parsed when opened.
"""

from __future__ import annotations

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import Collapsible, Label, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from workbench.session.events import Message

FLUSH_HZ = 20
LONG_LINES = 40
LONG_CHARS = 4000


def is_long(content: str) -> bool:
    return len(content) > LONG_CHARS or content.count("\n") > LONG_LINES


def message_title(message: Message) -> str:
    parts: list[str] = [message.role]
    if message.source != "model" or message.role != "assistant":
        parts.append(message.source)
    if message.usage:
        parts.append(f"{message.usage.prompt_tokens:,}↑ {message.usage.completion_tokens:,}↓ tok")
    if message.cost_usd is not None:
        parts.append(f"${message.cost_usd:.4f}")
    if message.latency_s is not None:
        parts.append(f"{message.latency_s:.1f} s")
    return " · ".join(parts)


def summary_line(content: str) -> str:
    # The line count first: a narrow pane cuts the title's end, and the count is what it must keep.
    first = next((line.strip("# ").strip() for line in content.splitlines() if line.strip()), "")
    lines = content.count("\n") + 1
    return f"{lines:,} lines · {first[:60]}{'…' if len(first) > 60 else ''}"


class MessageText(Static):
    """A finished message: one widget (Rich's markdown), far lighter to lay out than a Markdown tree."""

    DEFAULT_CSS = """
    MessageText { padding: 0 1; }
    """

    def __init__(self, content: str, *, plain: bool = False) -> None:
        super().__init__()
        self.text = content
        self.plain = plain

    def on_mount(self) -> None:
        if self.plain:
            self.update(Text(self.text))
        else:
            code_theme = "monokai" if self.app.current_theme.dark else "friendly"
            self.update(RichMarkdown(self.text, code_theme=code_theme))


class LazyMarkdown(Collapsible):
    """A collapsed message whose markdown is built the first time it is opened."""

    def __init__(self, content: str, *, plain: bool = False) -> None:
        super().__init__(title=summary_line(content), collapsed=True)
        self._content = content
        self._plain = plain
        self._built = False

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible is self and not self._built:
            self._built = True
            self.query_one(Collapsible.Contents).mount(MessageText(self._content, plain=self._plain))


class MessageBlock(Vertical):
    DEFAULT_CSS = """
    MessageBlock { height: auto; margin: 0 0 1 0; }
    MessageBlock > .title { width: 1fr; color: $text-muted; text-style: bold; }  /* wraps, never cut */
    MessageBlock.-assistant > .title { color: $accent; }
    MessageBlock.-user > .title { color: $secondary; }
    MessageBlock Markdown { margin: 0; padding: 0 1; }
    MessageBlock MarkdownBlock:last-child { margin-bottom: 0; }
    MessageBlock Collapsible { padding-bottom: 0; border-top: none; }
    """

    def __init__(self, message: Message | None, *, role: str = "assistant", turn: int | None = None) -> None:
        super().__init__(classes=f"-{message.role if message else role}")
        self.message = message
        self.turn = message.turn if message else turn
        self._stream: MarkdownStream | None = None
        self._pending: list[str] = []
        self._flush_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        if self.message is None:
            yield Label("assistant · streaming…", classes="title")
            yield Markdown("")
            return
        yield Label(message_title(self.message), classes="title")
        # The workbench's feedback on a turn is laid out in lines, not markdown paragraphs.
        plain = self.message.source == "workbench" and self.message.turn is not None
        if is_long(self.message.content):
            yield LazyMarkdown(self.message.content, plain=plain)
        else:
            yield MessageText(self.message.content, plain=plain)

    @property
    def streaming(self) -> bool:
        return self.message is None

    async def write(self, delta: str) -> None:
        """Queue a piece of the answer; pieces go to the markdown stream at most FLUSH_HZ times a second.

        Tokens can arrive far faster than markdown can be laid out; sending each one would keep the
        stream busy re-parsing (and the screen behind) long after the model finished.
        """
        self._pending.append(delta)
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(1 / FLUSH_HZ, self._flush)

    async def _flush(self) -> None:
        self._flush_timer = None
        if not self._pending or self.message is not None:  # nothing to send, or already finished
            return
        text = "".join(self._pending)
        self._pending.clear()
        if self._stream is None:
            live = self.query(Markdown)
            if not live:  # the block was taken down mid-stream (its screen left): nowhere to show it
                return
            self._stream = Markdown.get_stream(live.first())
        await self._stream.write(text)

    async def finish(self, message: Message) -> None:
        """The whole message arrived: stop streaming; the recorded text wins over the deltas."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._pending.clear()
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.message = message
        self.query_one(".title", Label).update(message_title(message))
        # Done streaming: the recorded text replaces the live markdown with the light widget; a long
        # answer (its kernel is in the code pane) folds away.
        await self.query_one(Markdown).remove()
        await self.mount(
            LazyMarkdown(message.content) if is_long(message.content) else MessageText(message.content)
        )


class ConversationPane(VerticalScroll):
    ALLOW_MAXIMIZE = True  # `z` zooms the pane
    DEFAULT_CSS = """
    ConversationPane { padding: 0 1; }
    ConversationPane > .turn-rule { color: $text-muted; width: 1fr; text-align: center; margin: 0 0 1 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._turns_shown: set[int] = set()

    def on_mount(self) -> None:
        # Stay at the bottom as messages arrive, until the person scrolls up.
        self.anchor()

    async def reset(self) -> None:
        self._turns_shown.clear()
        await self.remove_children()

    async def load(self, messages: list[Message]) -> None:
        """Show exactly these messages (a replay seeking), mounted in one go."""
        await self.reset()
        widgets: list[Label | MessageBlock] = []
        for message in messages:
            if message.turn is not None and message.turn not in self._turns_shown:
                self._turns_shown.add(message.turn)
                widgets.append(self._rule(message.turn))
            widgets.append(MessageBlock(message))
        await self.mount_all(widgets)
        self.scroll_end(animate=False)

    async def add_message(self, message: Message) -> None:
        if message.role == "assistant":
            streaming = self._streaming_block(message.turn)
            if streaming is not None:
                await streaming.finish(message)
                return
        await self._turn_rule(message.turn)
        await self.mount(MessageBlock(message))

    async def stream(self, turn: int | None, delta: str) -> None:
        block = self._streaming_block(turn)
        if block is None:
            await self._turn_rule(turn)
            block = MessageBlock(None, turn=turn)
            await self.mount(block)
        await block.write(delta)

    async def discard_stream(self, turn: int | None) -> None:
        """The model call is retried: what it streamed so far is void."""
        block = self._streaming_block(turn)
        if block is not None:
            await block.remove()

    def _streaming_block(self, turn: int | None) -> MessageBlock | None:
        for block in reversed(self.query(MessageBlock)):
            if block.streaming and block.turn == turn:
                return block
        return None

    async def _turn_rule(self, turn: int | None) -> None:
        if turn is None or turn in self._turns_shown:
            return
        self._turns_shown.add(turn)
        await self.mount(self._rule(turn))

    @staticmethod
    def _rule(turn: int) -> Label:
        return Label(f"── turn {turn} ──", classes="turn-rule", id=f"turn-{turn}")

    def scroll_to_turn(self, turn: int) -> None:
        found = self.query(f"#turn-{turn}")
        if found:
            self.release_anchor()
            self.scroll_to_widget(found.first(), top=True, animate=False)

    def follow(self) -> None:
        self.anchor()
        self.scroll_end(animate=False)
