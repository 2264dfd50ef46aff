"""`ptxwb session …` on the shipped sessions: where new files go, what `show` tells, exact round trips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.session import read_session

PTXWB = Path(sys.executable).parent / "ptxwb"
SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
LADDER = SESSIONS / "gemm_n7168_k5120_ladder_h200.jsonl"


def ptxwb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PTXWB_CACHE": str(cwd / "cache")},
    )


def test_export_and_fork_default_into_the_runs_folder_not_beside_the_session(tmp_path: Path) -> None:
    # A copy of the install's sessions folder: the commands must leave it as it is.
    install = tmp_path / "install" / "sessions"
    install.mkdir(parents=True)
    ladder = install / LADDER.name
    ladder.write_bytes(LADDER.read_bytes())
    exported = ptxwb("session", "export", str(ladder), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == "runs/gemm_n7168_k5120_ladder_h200.traj.json"
    script = tmp_path / "script.json"
    script.write_text('["no code this time"]')
    forked = ptxwb(
        "session", "fork", str(ladder), "--turn", "1", "--model", f"scripted:{script}", "--turns", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    [child] = (tmp_path / "runs").glob("gemm_n7168_k5120_ladder_h200.fork1-*.jsonl")
    assert read_session(child).start.fork_turn == 1
    assert [p.name for p in install.iterdir()] == [LADDER.name]


@pytest.mark.parametrize("session", sorted(p.name for p in SESSIONS.glob("*.jsonl")))
def test_export_then_import_gives_back_the_shipped_file_byte_for_byte(session: str, tmp_path: Path) -> None:
    exported = ptxwb("session", "export", str(SESSIONS / session), "--out", "t.traj.json", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    messages = json.loads((tmp_path / "t.traj.json").read_text())["messages"]
    carried = json.dumps([m["extra"]["ptxwb_events"] for m in messages])
    assert '"evaluation"' in carried
    imported = ptxwb("session", "import", "t.traj.json", "--out", "back.jsonl", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert (tmp_path / "back.jsonl").read_bytes() == (SESSIONS / session).read_bytes()


def _session_with_human_work(path: Path) -> Path:
    """Three scripted turns: the person edits turn 1, replaces turn 2 with a file, skips turn 3."""
    import hashlib

    from workbench.evaluate.result import EvalResult, Status
    from workbench.session import SessionWriter
    from workbench.session.events import Candidate, Control, Evaluation, Message, SessionEnd, SessionStart

    def judged(turn: int, source: str, origin: str) -> list[object]:
        sha = hashlib.sha256(source.encode()).hexdigest()
        result = EvalResult(
            status=Status.compile_error, task="gemm_n7168_k5120", target="hopper", executor="static",
            source_sha256=sha,
        )  # fmt: skip
        return [
            Candidate(turn=turn, source=source, origin=origin, original="model's", sha256=sha),  # type: ignore[arg-type]
            Evaluation(turn=turn, result=result),
        ]

    start = SessionStart(
        session_id="s1", task="gemm_n7168_k5120", target="hopper", model="scripted:x.json", author="scripted"
    )
    events = [
        Message(turn=1, role="assistant", content="```cuda\nmodel's\n```", source="scripted"),
        Control(turn=1, action="edit", by="human"),
        *judged(1, "edited", "edited"),
        Message(turn=2, role="user", content="try TMA", source="human"),
        Message(turn=2, role="assistant", content="```cuda\nmodel's\n```", source="scripted"),
        Control(turn=2, action="replace", by="human"),
        *judged(2, "mine", "override"),
        Message(turn=3, role="assistant", content="```cuda\nmodel's\n```", source="scripted"),
        Control(turn=3, action="skip", by="human", note="skipped by the person"),
        SessionEnd(turn=3, reason="turn_limit"),
    ]
    with SessionWriter(path, start) as writer:
        for event in events:
            writer.append(event)  # type: ignore[arg-type]
    return path


def test_session_show_tells_every_turn_and_whose_kernel_it_was(tmp_path: Path) -> None:
    path = _session_with_human_work(tmp_path / "s.jsonl")
    table = ptxwb("session", "show", str(path), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert "(scripted; the person: edited 1, replaced with own file 1, skipped 1, messages 1)" in text
    assert "kernel" in text and "edited by the person" in text and "the person's file" in text
    assert "│ 3 │ skipped │ skipped │" in text
    data = json.loads(ptxwb("session", "show", str(path), "--json", cwd=tmp_path).stdout)
    assert [(r["turn"], r["origin"], r["status"]) for r in data["turn_rows"]] == [
        (1, "edited", "compile_error"), (2, "override", "compile_error"), (3, "skipped", "skipped"),
    ]  # fmt: skip
    assert data["human_work"] == {"edited": 1, "override": 1, "skipped": 1, "messages": 1}


def test_forking_with_the_parents_script_goes_on_from_the_fork_turn(tmp_path: Path) -> None:
    from workbench.session import SessionWriter
    from workbench.session.events import Message, SessionEnd, SessionStart

    script = tmp_path / "script.json"
    script.write_text(json.dumps(["first, no code", "second, no code", "third, no code"]))
    model = f"scripted:{script}"
    start = SessionStart(
        session_id="p", task="gemm_n7168_k5120", target="hopper", model=model, author="scripted",
        settings={"turns": 3, "pack": False},
    )  # fmt: skip
    with SessionWriter(tmp_path / "parent.jsonl", start) as writer:
        for turn, text in enumerate(["first, no code", "second, no code", "third, no code"], 1):
            writer.append(Message(turn=turn, role="assistant", content=text, source="scripted"))
        writer.append(SessionEnd(turn=3, reason="turn_limit"))
    done = ptxwb(
        "session", "fork", "parent.jsonl", "--turn", "1", "--model", model, "--out", "f.jsonl", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    answers = [
        e
        for e in read_session(tmp_path / "f.jsonl").events
        if isinstance(e, Message) and e.role == "assistant"
    ]
    assert [(m.turn, m.content) for m in answers] == [
        (1, "first, no code"),
        (2, "second, no code"),
        (3, "third, no code"),
    ]
