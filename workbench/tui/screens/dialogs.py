"""Modal dialogs: the candidate editor and a one-line prompt (a message, a path)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Markdown, Static

from workbench.tui.widgets.cuda_editor import CudaEditor


class EditorScreen(ModalScreen[str | None]):
    """Edit a candidate; ctrl+s evaluates the edit, escape keeps the original."""

    DEFAULT_CSS = """
    EditorScreen { align: center middle; }
    EditorScreen > Horizontal { width: 100%; height: 100%; border: thick $accent; background: $surface; }
    EditorScreen #context { width: 2fr; border-right: vkey $panel-lighten-2; }
    EditorScreen #editing { width: 3fr; }
    EditorScreen CudaEditor { height: 1fr; }
    EditorScreen .hint { height: 1; color: $text-muted; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Evaluate this", priority=True),
        Binding("escape", "cancel", "Cancel", priority=True),
    ]

    def __init__(self, source: str, title: str, context: str = "", *, plain: bool = False) -> None:
        """`plain`: the context is the workbench's feedback, laid out in lines (not markdown)."""
        super().__init__()
        self.source = source
        self.title_text = title
        self.context = context
        self.plain = plain

    def compose(self) -> ComposeResult:
        with Horizontal() as box:
            box.border_title = self.title_text
            if self.context:
                # What the person answers: the task, or the feedback on their last kernel.
                with VerticalScroll(id="context"):
                    yield (
                        Static(Text(self.context), id="context-text")
                        if self.plain
                        else Markdown(self.context)
                    )
            with Vertical(id="editing"):
                yield Label("ctrl+s: evaluate this kernel · escape: cancel", classes="hint")
                yield CudaEditor(self.source, show_line_numbers=True, tab_behavior="indent", id="editor")

    def on_mount(self) -> None:
        self.query_one(CudaEditor).focus()

    def action_save(self) -> None:
        text = self.query_one(CudaEditor).text
        self.dismiss(text if text.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PromptScreen(ModalScreen[str | None]):
    """One line of input; enter returns it, escape returns None."""

    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 80; max-width: 100%; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    PromptScreen Label { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, hint: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            yield Label(self.hint)
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: y or enter says yes; n or escape says no."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 72; max-width: 100%; height: auto; border: thick $warning; background: $surface; padding: 0 1; }
    ConfirmScreen .hint { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self.title_text = title
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            yield Static(self.question)
            yield Label("y / enter: yes · n / escape: no", classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
