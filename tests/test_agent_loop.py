"""The loop's rules: approval decisions, a person's messages, context policies, limits, stops."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_support import (
    CANARY_KEY,
    answer,
    broken_kernel,
    record_session,
    simt_kernel,
    wgmma_kernel,
)
from build_support import session_cache
from openai_server import OpenAIServer

from workbench.agent.approval import Decision
from workbench.agent.config import AgentConfig
from workbench.agent.items import LoopItem
from workbench.agent.loop import MiniPTXAgent, target_met
from workbench.agent.models import LitellmModel
from workbench.evaluate.executors import make_executor
from workbench.evaluate.result import EvalResult, Status, TimingStats
from workbench.session import Candidate, Control, Evaluation, Message, SessionEnd, read_session

pytestmark = pytest.mark.nvcc


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


class Scripted:
    """An approver that answers from a table: {turn: Decision}, and may refuse a turn."""

    def __init__(self, decisions: dict[int, Decision], refuse_turn: int | None = None) -> None:
        self.decisions = decisions
        self.refuse_turn = refuse_turn
        self.reviewed: list[tuple[int, str]] = []

    async def before_turn(self, turn: int) -> bool:
        return turn != self.refuse_turn

    async def review(self, turn: int, source: str) -> Decision:
        self.reviewed.append((turn, source))
        return self.decisions.get(turn, Decision.run(by="workbench"))


def _of(items: list[LoopItem], kind: type) -> list:
    return [i for i in items if isinstance(i, kind)]


async def test_edit_keeps_the_original_and_evaluates_the_edit(tmp_path: Path, build_cache: Path) -> None:
    approver = Scripted({1: Decision.edit(wgmma_kernel(), note="fixed the typo")})
    items = await record_session(
        tmp_path / "s.jsonl", [answer(broken_kernel())], build_cache, approver=approver
    )
    assert approver.reviewed == [(1, broken_kernel())]
    [candidate] = _of(items, Candidate)
    assert (candidate.origin, candidate.source, candidate.original) == (
        "edited",
        wgmma_kernel(),
        broken_kernel(),
    )
    [control] = _of(items, Control)
    assert (control.action, control.by, control.note) == ("edit", "human", "fixed the typo")
    [evaluation] = _of(items, Evaluation)
    assert evaluation.result.stages.static.status == Status.passed
    feedback = [m for m in _of(items, Message) if m.turn == 1 and m.role == "user"][-1].content
    assert "The person edited your kernel" in feedback and "wgmma.mma_async" in feedback


async def test_replace_skip_and_stop(tmp_path: Path, build_cache: Path) -> None:
    approver = Scripted({1: Decision.replace(simt_kernel()), 2: Decision.skip(), 3: Decision.stop("enough")})
    answers = [answer(broken_kernel())] * 4
    config = AgentConfig(turns=4, pack=False)
    items = await record_session(tmp_path / "s.jsonl", answers, build_cache, config=config, approver=approver)
    candidates = _of(items, Candidate)
    assert [(c.turn, c.origin, c.original) for c in candidates] == [(1, "override", broken_kernel())]
    assert [e.turn for e in _of(items, Evaluation)] == [1]
    assert [(c.turn, c.action) for c in _of(items, Control)] == [(1, "replace"), (2, "skip"), (3, "stop")]
    skipped = [m for m in _of(items, Message) if m.turn == 2 and m.role == "user"]
    assert "chose not to evaluate" in skipped[0].content
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn, end.note) == (
        "stopped_by_person",
        3,
        "enough",
    )


async def test_refusing_a_turn_stops_before_the_model_is_asked(tmp_path: Path, build_cache: Path) -> None:
    items = await record_session(
        tmp_path / "s.jsonl", [answer(simt_kernel())] * 3, build_cache, approver=Scripted({}, refuse_turn=2)
    )
    assert [m.turn for m in _of(items, Message) if m.role == "assistant"] == [1]
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("stopped_by_person", 2)


async def test_an_answer_without_code_gets_feedback_and_the_turn_counts(
    tmp_path: Path, build_cache: Path
) -> None:
    items = await record_session(
        tmp_path / "s.jsonl", ["I think wgmma is the way.", "Still thinking."], build_cache
    )
    assert _of(items, Candidate) == [] and _of(items, Evaluation) == []
    feedback = [m.content for m in _of(items, Message) if m.role == "user" and m.turn is not None]
    assert (
        len(feedback) == 2
        and "no complete fenced code block" in feedback[0]
        and "1 turns left" not in feedback[1]
    )
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("turn_limit", 2)


@pytest.mark.slow
async def test_a_persons_message_and_the_latest_pair_context(
    tmp_path: Path, build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    replies = ["no code yet", answer(broken_kernel()), answer(simt_kernel())]
    with OpenAIServer(replies) as server:
        agent = MiniPTXAgent(
            task="gemm_n7168_k5120", target="hopper",
            model=LitellmModel("openai/test-model", api_base=server.base_url),
            executor=make_executor("static", build_cache), out=tmp_path / "s.jsonl",
            config=AgentConfig(turns=3, pack=False, context="latest-pair"),
        )  # fmt: skip
        async for item in agent.run():
            if isinstance(item, Message) and item.turn == 1 and item.role == "user":
                agent.add_user_message("Use a 64x64 tile with wgmma m64n64k16.")
        requests = [r.body["messages"] for r in server.requests]
    events = read_session(tmp_path / "s.jsonl").events
    [note] = [e for e in events if isinstance(e, Message) and e.source == "human"]
    assert (note.turn, note.role) == (2, "user")
    # Turn 2 sees turn 1's answer and feedback plus the note; turn 3 sees only turn 2: the note, the
    # answer, its feedback.
    assert [m["role"] for m in requests[1]] == ["system", "user", "assistant", "user", "user"]
    assert requests[1][2]["content"] == "no code yet" and requests[1][4]["content"] == note.content
    assert [m["role"] for m in requests[2]] == ["system", "user", "user", "assistant", "user"]
    assert requests[2][2]["content"] == note.content and requests[2][3]["content"] == replies[1]
    assert "compile_error" in requests[2][4]["content"]
    assert "no code yet" not in [m["content"] for m in requests[2]]


async def test_cost_and_wall_limits(
    tmp_path: Path, build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    with OpenAIServer(["no code"] * 3) as server:
        model = LitellmModel("openai/test-model", api_base=server.base_url, input_cost_per_token=0.01)
        agent = MiniPTXAgent(
            task="gemm_n7168_k5120", target="hopper", model=model,
            executor=make_executor("static", build_cache), out=tmp_path / "cost.jsonl",
            config=AgentConfig(turns=3, pack=False, cost_limit_usd=0.05),
        )  # fmt: skip
        items = [i async for i in agent.run()]
    [reply] = [m for m in _of(items, Message) if m.role == "assistant"]
    assert reply.cost_usd is not None and reply.cost_usd >= 0.05 and agent.cost_usd == reply.cost_usd
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("cost_limit", 1)

    config = AgentConfig(turns=3, pack=False, wall_limit_s=1e-6)
    items = await record_session(tmp_path / "wall.jsonl", ["no code"] * 3, build_cache, config=config)
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("wall_limit", 1)


async def test_closing_the_loop_early_records_a_stop(tmp_path: Path, build_cache: Path) -> None:
    from agent_support import write_script

    from workbench.agent.models import ScriptedModel

    agent = MiniPTXAgent(
        task="gemm_n7168_k5120", target="hopper",
        model=ScriptedModel(write_script(tmp_path / "s.json", [answer(simt_kernel())] * 2)),
        executor=make_executor("static", build_cache), out=tmp_path / "s.jsonl", config=AgentConfig(turns=2, pack=False),
    )  # fmt: skip
    run = agent.run()
    async for item in run:
        if isinstance(item, Candidate):
            break
    await run.aclose()
    end = read_session(tmp_path / "s.jsonl").events[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.note, end.turn) == (
        "stopped_by_person",
        "interrupted",
        1,
    )


def _timed(status: Status, speedup: float | None) -> EvalResult:
    result = EvalResult(task="t", target="hopper", executor="local", source_sha256="0" * 64, status=status)
    for name, stage in result.stages.in_order():
        stage.status = status if name == "timing" else Status.passed
    result.stages.timing.speedup = speedup
    if speedup is not None:
        stats = TimingStats(
            name="candidate", median_ms=1.0, p25_ms=1.0, p75_ms=1.0, min_ms=1.0, max_ms=1.0, iterations=50
        )
        result.stages.timing.candidate = stats
    return result


def test_target_met_needs_every_stage_passed_and_the_speedup() -> None:
    assert target_met(_timed(Status.passed, 1.2), 1.0)
    assert target_met(_timed(Status.passed, 1.0), 1.0)
    assert not target_met(_timed(Status.passed, 0.9), 1.0)
    assert not target_met(_timed(Status.passed, None), 1.0)
    assert not target_met(_timed(Status.timeout, 1.5), 1.0)


def test_decision_needs_a_source_exactly_for_edit_and_replace() -> None:
    with pytest.raises(ValueError, match="needs the new source"):
        Decision(action="edit")
    with pytest.raises(ValueError, match="takes no source"):
        Decision(action="run", source="x")


async def test_a_stop_requested_while_the_turn_is_held_asks_no_model(
    tmp_path: Path, build_cache: Path
) -> None:
    from agent_support import write_script

    from workbench.agent.models import ScriptedModel

    class StopWhileHeld:
        agent: MiniPTXAgent

        async def before_turn(self, turn: int) -> bool:
            if turn == 2:
                self.agent.request_stop()  # the person presses stop while the loop waits here
            return True

        async def review(self, turn: int, source: str) -> Decision:
            return Decision.run(by="workbench")

    approver = StopWhileHeld()
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=ScriptedModel(write_script(tmp_path / "s.json", ["no code"] * 3)),
        executor=make_executor("static", build_cache),
        out=tmp_path / "s.jsonl",
        config=AgentConfig(turns=3, pack=False),
        approver=approver,
    )
    approver.agent = agent
    agent.record_control("pause")
    items = [i async for i in agent.run()]
    assert [m.turn for m in _of(items, Message) if m.role == "assistant"] == [1]
    [control] = _of(items, Control)
    assert (control.action, control.by) == ("pause", "human")
    end = items[-1]
    assert isinstance(end, SessionEnd) and (end.reason, end.turn) == ("stopped_by_person", 2)
