"""The run form: a live run's settings, as `ptxwb run` takes them, opened from the home screen."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from workbench.agent.config import AgentConfig, agent_config
from workbench.errors import UserError
from workbench.knowledge import list_packs
from workbench.tasks import TARGETS, Task, Workload
from workbench.tui.drivers.live import Pace
from workbench.tui.runs import live_screen
from workbench.tui.screens.session import SessionScreen

# The run's limits, as `AgentConfig` fields (their defaults and checks are the config's) and labels.
LIMITS = [
    ("turns", "Turns"),
    ("cost_limit_usd", "Cost limit, USD"),
    ("wall_limit_s", "Wall limit, s"),
    ("target_speedup", "Target speedup"),
]
# A pack choice is the config's (pack, pack_variant) pair.
PackChoice = tuple[bool, str | None]


def _default_text(field: str) -> str:
    default = AgentConfig.model_fields[field].default
    return "" if default is None else f"{default:g}"


def pack_choices(target: str) -> list[tuple[str, PackChoice]]:
    """No pack, the target's pack, or the pack with one of its variants (`--no-pack`, `--pack-variant`)."""
    variants = [v for m in list_packs() if m.target == target for v in m.variants]
    return [
        ("no pack", (False, None)),
        (f"{target} pack", (True, None)),
        *((f"{target} pack + {v}", (True, v)) for v in variants),
    ]


def workload_label(workload: Workload) -> str:
    axes = ", ".join(f"{k}={v}" for k, v in workload.axes.items())
    return f"{axes or 'no axes'} · {workload.uuid[:8]}"


class StartRunScreen(ModalScreen[SessionScreen | None]):
    """Settings for a live run of one task, as `ptxwb run` takes them; Start checks them all first."""

    DEFAULT_CSS = """
    StartRunScreen { align: center middle; }
    StartRunScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
        border: thick $accent; background: $surface; padding: 0 1; }
    StartRunScreen Label { margin-top: 1; color: $text-muted; }
    StartRunScreen Horizontal { height: auto; }
    StartRunScreen Horizontal > Vertical { height: auto; width: 1fr; }
    StartRunScreen #error { display: none; margin-top: 1; color: $error; text-style: bold; }
    StartRunScreen #error.-shown { display: block; }
    StartRunScreen #buttons { margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self.run_task = task

    def compose(self) -> ComposeResult:
        task = self.run_task
        target = "hopper"  # `ptxwb run`'s default
        headline = task.workload().uuid
        workloads = [
            (workload_label(w) + (" ★" if w.uuid == headline else ""), w.uuid) for w in task.workloads
        ]
        with VerticalScroll() as box:
            box.border_title = f"Run {task.name}"
            yield Label(
                "Model: a litellm model string, `human` (you write each turn) or `scripted:FILE`"
                " · enter starts the run · escape cancels"
            )
            yield Input("human", id="model")
            with Horizontal():
                with Vertical():
                    yield Label("Target")
                    yield Select([(t, t) for t in TARGETS], value=target, allow_blank=False, id="target")
                with Vertical():
                    yield Label("Executor")
                    yield Input("static", placeholder="static, local or ssh://host", id="executor")
                with Vertical():
                    yield Label("Pace")
                    yield Select(
                        [("step", "step"), ("auto", "auto")],
                        value="step",
                        allow_blank=False,
                        id="pace",
                        tooltip="step asks before each turn and each evaluation; auto runs on",
                    )
            with Horizontal():
                with Vertical():
                    yield Label("Workload (★ the headline)")
                    yield Select(workloads, value=headline, allow_blank=False, id="workload")
                with Vertical():
                    yield Label("Knowledge pack")
                    default: PackChoice = (
                        AgentConfig.model_fields["pack"].default,
                        AgentConfig.model_fields["pack_variant"].default,
                    )
                    yield Select(pack_choices(target), value=default, allow_blank=False, id="pack")
            with Horizontal():
                for field, label in LIMITS:
                    with Vertical():
                        yield Label(label)
                        kind: Literal["integer", "number"] = "integer" if field == "turns" else "number"
                        yield Input(_default_text(field), placeholder="none", type=kind, id=field)
            yield Static(id="error")
            with Horizontal(id="buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        # Typing goes to the model box at once; enter in any box starts the run.
        self.query_one("#model", Input).focus()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.start()

    @on(Select.Changed, "#target")
    def _target_changed(self, event: Select.Changed) -> None:
        # Variants differ by target: keep the pack on or off, drop a variant the new target lacks.
        pack = self.query_one("#pack", Select)
        kept: PackChoice = pack.value  # type: ignore[assignment]
        choices = pack_choices(str(event.value))
        pack.set_options(choices)
        pack.value = kept if kept in [value for _, value in choices] else (kept[0], None)

    def config(self) -> AgentConfig:
        """The form as an `AgentConfig`, checked as `ptxwb run` checks its options (a `UserError`)."""
        pack, variant = self.query_one("#pack", Select).value  # type: ignore[misc]
        values: dict[str, object] = {
            "workload": self.query_one("#workload", Select).value,
            "pack": pack,
            "pack_variant": variant,
        }
        for field, _ in LIMITS:
            text = self.query_one(f"#{field}", Input).value.strip()
            if text:  # an empty box keeps the config's default
                values[field] = text
        return agent_config(**values)

    @on(Button.Pressed, "#start")
    def start(self) -> None:
        pace: Pace = "auto" if self.query_one("#pace", Select).value == "auto" else "step"
        try:
            screen = live_screen(
                self.run_task.name,
                str(self.query_one("#target", Select).value),
                self.query_one("#model", Input).value.strip() or "human",
                self.query_one("#executor", Input).value.strip() or "static",
                self.config(),
                pace,
            )
        except UserError as exc:
            error = self.query_one("#error", Static)
            error.update(str(exc))
            error.add_class("-shown")
            error.scroll_visible()
            return
        self.dismiss(screen)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
