"""`ptxwb run --paused` in a real terminal: nothing runs before a key."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tui_tmux import needs_tmux, ptxwb_in_tmux

from workbench.session import read_session
from workbench.session.events import Message

TASK = "gemm_n7168_k5120"


@needs_tmux
def test_run_paused_waits_for_a_key_before_turn_one(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["no code here", "nor here", "nor here"]))
    out = tmp_path / "s.jsonl"
    args = (
        "run",
        "--task",
        TASK,
        "--model",
        f"scripted:{script}",
        "--turns",
        "3",
        "--no-pack",
        "--out",
        str(out),
    )
    with ptxwb_in_tmux(*args, "--paused", cwd=tmp_path) as pane:
        pane.wait(lambda screen: "paused" in screen and TASK in screen)
        time.sleep(1.0)
        answered = [e for e in read_session(out).events if isinstance(e, Message) and e.role == "assistant"]
        assert answered == []  # a scripted run without --paused is over by now
        pane.keys("s")  # one turn
        pane.wait(lambda screen: "turn 2/3" in screen and "paused" in screen)  # step: one turn, then waits
    assert [e.turn for e in read_session(out).events if isinstance(e, Message) and e.role == "assistant"] == [
        1
    ]


def test_paused_without_a_terminal_is_bad_input(tmp_path: Path) -> None:
    import subprocess

    from tui_tmux import PTXWB

    done = subprocess.run(
        [str(PTXWB), "run", "--task", TASK, "--model", "scripted:x.json", "--paused", "--headless"],
        check=False, capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "--paused waits for a key" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())
