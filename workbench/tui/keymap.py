"""Every action of the session screen in one table: its keys, its name, its group.

The screen's bindings, the help screen and the command palette are all made from this table, so a
key cannot be missing from one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

ALL = frozenset({"replay", "author", "live"})
LIVE = frozenset({"live"})
REPLAY = frozenset({"replay"})
AUTHOR = frozenset({"author"})


@dataclass(frozen=True)
class Action:
    action: str
    keys: str
    title: str
    help: str
    group: str
    footer: bool = False
    modes: frozenset[str] = ALL
    # The driver says when it is possible (`Driver.can`); the others always are, in their modes.
    driver: bool = False


ACTIONS: list[Action] = [
    # Playback and the loop.
    Action(
        "toggle_pause",
        "space",
        "Pause/resume",
        "Pause or resume the replay or the agent loop",
        "control",
        True,
        REPLAY | LIVE,
        driver=True,
    ),
    Action("step", "s", "Step", "Run one turn, then pause (live)", "control", True, LIVE, driver=True),
    Action("auto", "a", "Auto", "Run turns without asking (live)", "control", True, LIVE, driver=True),
    Action(
        "stop",
        "X",
        "Stop",
        "End the live session after the current step",
        "control",
        False,
        LIVE,
        driver=True,
    ),
    Action(
        "faster", "plus,equals_sign", "Faster", "Replay faster (×2)", "control", True, REPLAY, driver=True
    ),
    Action("slower", "minus", "Slower", "Replay slower (÷2)", "control", False, REPLAY, driver=True),
    Action(
        "seek_back",
        "less_than_sign,comma",
        "Seek back",
        "Rewind the replay to the end of the previous turn",
        "control",
        False,
        REPLAY,
        driver=True,
    ),
    Action(
        "seek_forward",
        "greater_than_sign,full_stop",
        "Seek on",
        "Jump the replay to the end of the next turn",
        "control",
        False,
        REPLAY,
        driver=True,
    ),
    Action(
        "evaluate_now",
        "x",
        "Evaluate",
        "Evaluate the kernel file now (author)",
        "control",
        True,
        AUTHOR,
        driver=True,
    ),
    # Before an evaluation (live, when the loop asks).
    Action(
        "approve",
        "r",
        "Run it",
        "Evaluate the candidate as the model wrote it",
        "candidate",
        True,
        LIVE,
        driver=True,
    ),
    Action(
        "edit",
        "e",
        "Edit",
        "Edit the candidate in the built-in editor, then evaluate it",
        "candidate",
        True,
        LIVE,
        driver=True,
    ),
    Action(
        "edit_external",
        "E",
        "Edit in $EDITOR",
        "Edit the candidate in $EDITOR, then evaluate it",
        "candidate",
        False,
        LIVE,
        driver=True,
    ),
    Action(
        "override",
        "o",
        "Override",
        "Replace the candidate with a file of your own",
        "candidate",
        False,
        LIVE,
        driver=True,
    ),
    Action("skip", "k", "Skip", "Evaluate nothing this turn", "candidate", False, LIVE, driver=True),
    Action(
        "message",
        "m",
        "Message",
        "Type a message for the model's next turn",
        "candidate",
        True,
        LIVE,
        driver=True,
    ),
    Action(
        "fork",
        "f",
        "Fork",
        "Fork at the shown turn (live: go on from it, paused, same model)",
        "session",
        True,
        REPLAY | LIVE,
        driver=True,
    ),
    # Looking around.
    Action("previous_turn", "left_square_bracket,h", "Prev turn", "Show the previous turn", "view", True),
    Action("next_turn", "right_square_bracket,l", "Next turn", "Show the next turn", "view", True),
    Action("follow", "L", "Follow", "Follow the latest turn", "view", False),
    Action("tab('cuda')", "1", "CUDA", "Show the CUDA source", "view"),
    Action("tab('ptx')", "2", "PTX", "Show the PTX", "view"),
    Action("tab('sass')", "3", "SASS", "Show the SASS, target-family lines marked", "view"),
    Action("tab('diff')", "4,d", "Diff", "Show the diff against the previous turn", "view"),
    Action("next_mark", "n", "Next mark", "Next line of a target family in the code shown", "view"),
    Action("previous_mark", "N", "Prev mark", "Previous line of a target family in the code shown", "view"),
    Action(
        "source_sass",
        "j",
        "Source↔SASS",
        "From the SASS line at the cursor to its CUDA line, or from a CUDA line to its SASS",
        "view",
    ),
    Action("goto_error", "g", "Go to error", "Show the line of the first compiler error", "view"),
    Action("focus_pane('conversation')", "c", "Chat", "Show and focus the conversation", "view", True),
    Action("focus_pane('code')", "v", "Code", "Show and focus the code pane", "view"),
    Action("focus_pane('timing')", "t", "Timing", "Focus the timing table", "view"),
    Action("zoom", "z", "Zoom", "Maximise the focused pane (z or escape again to restore)", "view"),
    # Keeping things.
    Action("copy_kernel", "w", "Write kernel", "Write the shown turn's kernel to a file", "files", False),
    Action("screenshot", "S", "Screenshot", "Save an SVG screenshot", "files", False),
    Action("help", "question_mark,f1", "Help", "Show the keys", "app", True),
    Action("back", "escape,backspace", "Back", "Back to the screen this one was opened from", "app", True),
    Action("quit", "q", "Quit", "Quit (a live run still going asks first)", "app", True),
]


# Actions the screen asks the driver about (`Driver.can`) before offering them.
DRIVER_ACTIONS: frozenset[str] = frozenset(a.action for a in ACTIONS if a.driver)


def bindings() -> list[BindingType]:
    return [Binding(a.keys, a.action, a.title, show=a.footer) for a in ACTIONS]


def for_mode(mode: str) -> list[Action]:
    return [a for a in ACTIONS if mode in a.modes]


# action name (without its arguments) -> every mode it belongs to; asked on every binding refresh.
_MODES: dict[str, frozenset[str]] = {}
for _entry in ACTIONS:
    _name = _entry.action.split("(")[0]
    _MODES[_name] = _MODES.get(_name, frozenset()) | _entry.modes


def is_mode_action(action: str, mode: str) -> bool | None:
    """Whether `action` belongs to `mode`; None when the table does not list it."""
    modes = _MODES.get(action)
    return None if modes is None else mode in modes


def key_label(keys: str) -> str:
    names = {
        "space": "space",
        "plus": "+",
        "equals_sign": "=",
        "minus": "-",
        "less_than_sign": "<",
        "greater_than_sign": ">",
        "comma": ",",
        "full_stop": ".",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "question_mark": "?",
        "escape": "esc",
    }
    return " ".join(names.get(k, k) for k in keys.split(","))
