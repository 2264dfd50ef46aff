"""The whole loop through litellm's real HTTP path: a local OpenAI-compatible server streams the answers
(SSE), fails once with HTTP 500 to exercise the retry, and the static executor compiles every kernel
with the real nvcc and cuobjdump. `ptxwb run` runs as the console script, as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import CANARY_KEY, three_turn_answers
from build_support import session_cache
from openai_server import HttpError, OpenAIServer

from workbench.agent.config import AgentConfig
from workbench.agent.items import ModelRetry, TextDelta
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import LitellmModel
from workbench.evaluate.executors import make_executor
from workbench.evaluate.result import Status
from workbench.session import Evaluation, Message, SessionEnd, read_session

pytestmark = pytest.mark.nvcc
PTXWB = Path(sys.executable).parent / "ptxwb"


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@pytest.mark.slow  # the headless litellm path is also run by the bench sweep tests
def test_three_turns_over_http_fail_then_pass_static(tmp_path: Path, build_cache: Path) -> None:
    answers = three_turn_answers()
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY, "PTXWB_CACHE": str(build_cache)}
    with OpenAIServer(
        [answers[0], HttpError(500, "overloaded, try again"), answers[1], answers[2]]
    ) as server:
        done = subprocess.run(
            [str(PTXWB), "run", "--task", "gemm_n7168_k5120", "--target", "hopper", "--model", "openai/test-model",
             "--api-base", server.base_url, "--turns", "3", "--executor", "static", "--no-pack", "--headless",
             "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=900, env=env,
        )  # fmt: skip
        requests = server.requests
    log = done.stdout + done.stderr
    assert done.returncode == 0, log

    # Four HTTP requests: the retry repeated turn 2's; each streamed and asked for usage.
    assert len(requests) == 4
    assert all(
        r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True} for r in requests
    )
    assert all(r.body["model"] == "test-model" for r in requests)
    assert requests[0].headers["authorization"] == f"Bearer {CANARY_KEY}"  # the key went to the server only
    assert requests[1].body == requests[2].body
    # Full context: turn 3's request carries both earlier answers and their feedback.
    turn3 = requests[3].body["messages"]
    assert [m["role"] for m in turn3] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert turn3[2]["content"] == answers[0] and turn3[4]["content"] == answers[1]
    assert "compile_error" in turn3[3]["content"] and "static_missing_family" in turn3[5]["content"]

    read = read_session(out)
    start = read.start
    assert (start.model, start.author, start.task, start.target) == (
        "openai/test-model",
        "model",
        "gemm_n7168_k5120",
        "hopper",
    )
    assert start.settings["executor"] == "static" and start.settings["turns"] == 3
    assert start.pack_id is None and start.pack_hash is None  # --no-pack
    verdicts = [e.result for e in read.events if isinstance(e, Evaluation)]
    assert [v.status for v in verdicts] == [
        Status.compile_error,
        Status.static_missing_family,
        Status.not_run,
    ]
    assert "no_such_identifier" in verdicts[0].stages.build.errors[0]
    assert verdicts[2].stages.static.status == Status.passed and verdicts[2].stages.static.required_present
    assert verdicts[2].stages.timing.speedup is None
    replies = [e for e in read.events if isinstance(e, Message) and e.role == "assistant"]
    assert [m.content for m in replies] == answers
    for reply in replies:
        assert reply.source == "model" and reply.usage is not None and reply.usage.completion_tokens > 0
        assert reply.latency_s is not None and reply.latency_s > 0
    last_feedback = [e for e in read.events if isinstance(e, Message) and e.role == "user"][-1]
    assert "measures no time" in last_feedback.content and "static" in last_feedback.content
    end = read.events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "turn_limit" and end.turn == 3

    # The live view said what happened.
    assert "retry 1" in log and "static_missing_family" in log and "ended: turn_limit" in log

    # The canary key is nowhere: not in the session, the log, or an export.
    exported = tmp_path / "run.traj.json"
    done = subprocess.run([str(PTXWB), "session", "export", str(out), "--out", str(exported)],
                          check=False, capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for text in (out.read_text(), log, exported.read_text(), done.stdout + done.stderr):
        assert CANARY_KEY not in text and CANARY_KEY[:12] not in text


async def test_loop_yields_streamed_deltas_and_the_retry(
    tmp_path: Path, build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    answers = three_turn_answers()[2:]
    with OpenAIServer(
        [HttpError(429, "rate limited", "rate_limit_error"), answers[0]], chunk_chars=64
    ) as server:
        model = LitellmModel("openai/test-model", api_base=server.base_url, backoff_s=0.01)
        agent = MiniPTXAgent(
            task="gemm_n7168_k5120", target="hopper", model=model,
            executor=make_executor("static", build_cache), out=tmp_path / "s.jsonl",
            config=AgentConfig(turns=1, pack=False),
        )  # fmt: skip
        items = [item async for item in agent.run()]
    deltas = [i for i in items if isinstance(i, TextDelta)]
    assert len(deltas) > 10 and "".join(d.text for d in deltas) == answers[0]
    retries = [i for i in items if isinstance(i, ModelRetry)]
    assert len(retries) == 1 and "RateLimitError" in retries[0].error
    # What was yielded and is not live is exactly what the file holds.
    saved = [
        i
        for i in items
        if not isinstance(i, TextDelta | ModelRetry) and i.__class__.__name__ != "EvalProgress"
    ]
    assert saved == read_session(tmp_path / "s.jsonl").events
    assert json.loads((tmp_path / "s.jsonl").read_text().splitlines()[-1])["reason"] == "turn_limit"


def test_a_model_error_ends_the_session_without_leaking_the_key(tmp_path: Path) -> None:
    out = tmp_path / "err.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY}
    with OpenAIServer(
        [HttpError(401, f"Incorrect API key provided: {CANARY_KEY}", "invalid_request_error")]
    ) as server:
        done = subprocess.run(
            [str(PTXWB), "run", "--task", "gemm_n7168_k5120", "--model", "openai/test-model",
             "--api-base", server.base_url, "--no-pack", "--headless", "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert len(server.requests) == 1
    assert done.returncode == 1
    end = read_session(out).events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "model_error" and "AuthenticationError" in end.note
    for text in (out.read_text(), done.stdout, done.stderr):
        assert CANARY_KEY not in text and CANARY_KEY[:12] not in text


@pytest.mark.slow
def test_a_local_server_of_a_keyless_provider_needs_no_key(tmp_path: Path, build_cache: Path) -> None:
    out = tmp_path / "local.jsonl"
    keyless = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    with OpenAIServer(["no code this time"]) as server:
        done = subprocess.run(
            [str(PTXWB), "run", "--task", "gemm_n7168_k5120", "--model", "hosted_vllm/test-model",
             "--api-base", server.base_url, "--turns", "1", "--no-pack", "--headless", "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=300,
            env={**keyless, "PTXWB_CACHE": str(build_cache)},
        )  # fmt: skip
        requests = server.requests
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(requests) == 1 and requests[0].body["model"] == "test-model"
    end = read_session(out).events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "turn_limit"
