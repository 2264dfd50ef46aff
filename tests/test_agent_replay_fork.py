"""`replay:` serves a recorded session's answers exactly; a fork keeps turns <= N and continues."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import (
    CANARY_KEY,
    answer,
    record_session,
    three_turn_answers,
    wgmma_kernel,
    write_script,
)
from build_support import session_cache
from openai_server import OpenAIServer

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import ReplayModel
from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.session import Evaluation, Message, SessionEnd, read_session

pytestmark = pytest.mark.nvcc
PTXWB = Path(sys.executable).parent / "ptxwb"


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    import asyncio

    out = tmp_path_factory.mktemp("replay") / "original.jsonl"
    asyncio.run(record_session(out, three_turn_answers(), build_cache))
    return out


def _answers(path: Path) -> list[Message]:
    return [e for e in read_session(path).events if isinstance(e, Message) and e.role == "assistant"]


async def _replay(recorded: Path, out: Path, turns: int, cache: Path) -> None:
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120", target="hopper", model=ReplayModel(recorded),
        executor=make_executor("static", cache), out=out, config=AgentConfig(turns=turns, pack=False),
    )  # fmt: skip
    async for _ in agent.run():
        pass


async def test_replay_reproduces_the_messages_exactly(
    recorded: Path, tmp_path: Path, build_cache: Path
) -> None:
    out = tmp_path / "replayed.jsonl"
    await _replay(recorded, out, 3, build_cache)
    original, replayed = read_session(recorded), read_session(out)
    # The recorded session by its name: its folder is this machine's business (no host path in a session).
    assert replayed.start.author == "replay" and replayed.start.model == f"replay:{recorded.name}"

    def conversation(events: list) -> list[tuple]:
        return [(e.turn, e.role, e.content) for e in events if isinstance(e, Message)]

    assert conversation(replayed.events) == conversation(original.events)
    assert all(m.source == "replay" for m in _answers(out))
    statuses = [
        [e.result.status for e in r.events if isinstance(e, Evaluation)] for r in (original, replayed)
    ]
    assert statuses[0] == statuses[1]


async def test_replay_past_its_end_stops_as_exhausted(
    recorded: Path, tmp_path: Path, build_cache: Path
) -> None:
    out = tmp_path / "longer.jsonl"
    await _replay(recorded, out, 5, build_cache)
    end = read_session(out).events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "model_exhausted" and end.turn == 4


def test_replay_of_a_file_without_answers_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        ReplayModel(tmp_path / "missing.jsonl")


def test_fork_keeps_turns_up_to_n_and_continues(recorded: Path, tmp_path: Path, build_cache: Path) -> None:
    before = recorded.read_bytes()
    new_answer = answer(wgmma_kernel(), words="Continuing from turn 2 with a wgmma kernel.")
    out = tmp_path / "fork.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY, "PTXWB_CACHE": str(build_cache)}
    with OpenAIServer([new_answer]) as server:
        done = subprocess.run(
            [str(PTXWB), "session", "fork", str(recorded), "--turn", "2", "--model", "openai/fork-model",
             "--api-base", server.base_url, "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        requests = server.requests
    assert done.returncode == 0, done.stdout + done.stderr
    assert recorded.read_bytes() == before  # the parent is untouched

    parent, fork = read_session(recorded), read_session(out)
    assert fork.start.parent_session == parent.start.session_id and fork.start.fork_turn == 2
    assert fork.start.model == "openai/fork-model" and fork.start.session_id != parent.start.session_id
    kept = [
        e
        for e in parent.events[1:]
        if (e.turn is not None and e.turn <= 2) or (e.turn is None and e.type == "message")
    ]
    assert fork.events[1 : 1 + len(kept)] == kept
    assert fork.turns() == [1, 2, 3]
    turn3 = [e for e in fork.events if isinstance(e, Message) and e.turn == 3 and e.role == "assistant"]
    assert [m.content for m in turn3] == [new_answer]
    # The continuation saw the kept history: system, task, two answers and their feedback.
    sent = requests[0].body["messages"]
    assert len(sent) == 6 and sent[2]["content"] == three_turn_answers()[0]
    end = fork.events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "turn_limit" and end.turn == 3


def test_fork_at_a_turn_that_does_not_exist(recorded: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", ["no code"])
    done = subprocess.run(
        [str(PTXWB), "session", "fork", str(recorded), "--turn", "7", "--model", f"scripted:{script}"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "no turn 7" in done.stderr
