"""The session log: typed round trip, crash safety at every byte, fork."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.errors import UserError
from workbench.evaluate.result import EvalResult, Status
from workbench.session import (
    Candidate,
    Control,
    Evaluation,
    Message,
    SessionEnd,
    SessionStart,
    SessionWriter,
    fork_session,
    read_session,
)
from workbench.session.events import EVENT_ADAPTER

text = st.text(alphabet=string.printable + "éλ→★\u2028", max_size=200)


def _start(**extra: object) -> SessionStart:
    return SessionStart(
        session_id="s1",
        task="gemm_n7168_k5120",
        target="hopper",
        model="scripted:x.json",
        author="scripted",
        **extra,
    )


def _result(status: Status) -> EvalResult:
    result = EvalResult(task="gemm_n7168_k5120", target="hopper", executor="static", source_sha256="ab" * 32)
    result.status = status
    result.stages.build.status = Status.passed
    result.stages.static.status = status
    result.stages.static.families = {"GMMA": 4, "TMA": 2}
    return result


def _sample_events() -> list:
    events = [Message(role="system", content="instructions", source="workbench")]
    for turn in (1, 2, 3):
        events += [
            Message(turn=turn, role="user", content=f"feedback {turn}", source="workbench"),
            Message(
                turn=turn,
                role="assistant",
                content=f"```cuda\n// kernel {turn}\n```",
                source="scripted",
                cost_usd=0.001 * turn,
                latency_s=1.5,
            ),
            Candidate(turn=turn, source=f"// kernel {turn}\n", origin="model", sha256=f"{turn:064x}"),
            Control(turn=turn, action="run", by="human"),
            Evaluation(
                turn=turn, result=_result(Status.passed if turn == 3 else Status.static_missing_family)
            ),
        ]
    events.append(SessionEnd(reason="turn_limit"))
    return events


def _write(path: Path, events: list) -> None:
    with SessionWriter(path, _start()) as writer:
        for event in events:
            writer.append(event)


event_strategy = st.one_of(
    st.builds(
        Message,
        turn=st.none() | st.integers(1, 64),
        role=st.sampled_from(["system", "user", "assistant"]),
        content=text,
        source=st.sampled_from(["model", "human", "replay", "scripted", "workbench"]),
        cost_usd=st.none() | st.floats(0, 10, allow_nan=False),
    ),
    st.builds(
        Candidate,
        turn=st.integers(1, 64),
        source=text,
        origin=st.sampled_from(["model", "edited", "override"]),
        original=st.none() | text,
        sha256=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    ),
    st.builds(
        Control,
        turn=st.none() | st.integers(1, 64),
        action=st.sampled_from(["pause", "step", "auto", "edit"]),
        by=st.sampled_from(["human", "workbench"]),
        note=text,
    ),
    st.builds(SessionEnd, reason=st.sampled_from(["target_met", "turn_limit", "model_error"]), note=text),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event_strategy, max_size=12))
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, events: list) -> None:
    path = tmp_path_factory.mktemp("rt") / "s.jsonl"
    _write(path, events)
    read = read_session(path)
    assert read.events == [_start().model_copy(update={"ts": read.events[0].ts}), *events]
    assert read.dropped_bytes == 0 and read.problems == []


def test_every_line_is_one_typed_event_and_the_first_is_the_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write(path, _sample_events())
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1 + len(_sample_events())
    header = EVENT_ADAPTER.validate_json(lines[0])
    assert (
        header.type == "session_start"
        and header.schema_version == 1
        and header.schema_name == "ptxwb.session"
    )


def test_truncation_at_every_byte_reads_up_to_the_last_whole_event(tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    _write(full, _sample_events())
    data = full.read_bytes()
    line_ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    cut = tmp_path / "cut.jsonl"
    for offset in range(len(data) + 1):
        cut.write_bytes(data[:offset])
        read = read_session(cut)
        whole = sum(1 for end in line_ends if end <= offset)
        assert len(read.events) == whole, offset
        assert read.dropped_bytes == offset - (line_ends[whole - 1] if whole else 0)
        assert bool(read.problems) == (read.dropped_bytes > 0)


def test_damaged_last_line_is_dropped_but_damage_inside_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write(path, _sample_events()[:3])
    good = path.read_bytes()
    path.write_bytes(good + b'{"type": "message", "ro\n')
    read = read_session(path)
    assert len(read.events) == 4 and read.problems == ["line 5 is damaged: dropped"]
    lines = good.splitlines(keepends=True)
    path.write_bytes(lines[0] + b"garbage\n" + b"".join(lines[1:]))
    with pytest.raises(UserError, match=r"s\.jsonl:2: not a session event"):
        read_session(path)


def test_writer_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write(path, [])
    with pytest.raises(UserError, match="already exists"):
        SessionWriter(path, _start())


def test_fork_keeps_turns_up_to_n_and_names_its_parent(tmp_path: Path) -> None:
    parent = tmp_path / "parent.jsonl"
    _write(parent, _sample_events())
    child = fork_session(parent, 2, tmp_path / "child.jsonl", session_id="s2", model="openai/gpt-x")
    read = read_session(child)
    assert read.start.parent_session == "s1" and read.start.fork_turn == 2 and read.start.session_id == "s2"
    assert read.start.model == "openai/gpt-x"
    assert read.turns() == [1, 2]
    assert [e.type for e in read.events if e.turn is None] == ["session_start", "message"]
    assert not any(e.type == "session_end" for e in read.events)
    with pytest.raises(UserError, match="no turn 7"):
        fork_session(parent, 7, tmp_path / "other.jsonl", session_id="s3")
