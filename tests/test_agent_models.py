"""Models: litellm's error handling over real HTTP, the scripted, replay and human models, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import CANARY_KEY
from openai_server import HttpError, OpenAIServer

from workbench.agent.models import (
    ChatMessage,
    HumanModel,
    LitellmModel,
    ModelError,
    ModelExhausted,
    PersonStopped,
    RetryNotice,
    ScriptedModel,
    make_model,
)
from workbench.errors import UserError
from workbench.secrets import REDACTED, redact

ASK = [ChatMessage(role="user", content="write a kernel")]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    return CANARY_KEY


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (HttpError(401, f"Incorrect API key provided: {CANARY_KEY}", "invalid_request_error"), "AuthenticationError"),
        (HttpError(404, "The model `test-model` does not exist", "invalid_request_error"), "NotFoundError"),
        (
            HttpError(400, "This model's maximum context length is 8192 tokens. However, your messages resulted "
                      "in 9000 tokens.", "invalid_request_error"),
            "ContextWindowExceededError",
        ),
    ],
)  # fmt: skip
async def test_fatal_errors_stop_at_once(key: str, error: HttpError, kind: str) -> None:
    with OpenAIServer([error, "never served"]) as server:
        model = LitellmModel("openai/test-model", api_base=server.base_url, backoff_s=0.0)
        retries: list[RetryNotice] = []
        with pytest.raises(ModelError) as caught:
            await model.complete(ASK, on_retry=retries.append)
        assert len(server.requests) == 1 and retries == []
    assert kind in str(caught.value)
    assert key not in str(caught.value) and key[:8] not in str(caught.value)


async def test_transient_errors_are_retried_until_the_limit(key: str) -> None:
    errors = [HttpError(503, "busy"), HttpError(429, "slow down", "rate_limit_error"), HttpError(500, "oops")]
    with OpenAIServer(errors) as server:
        model = LitellmModel("openai/test-model", api_base=server.base_url, retries=2, backoff_s=0.001)
        retries: list[RetryNotice] = []
        with pytest.raises(ModelError, match="after 3 attempts"):
            await model.complete(ASK, on_retry=retries.append)
        assert len(server.requests) == 3
    assert [(r.attempt, r.delay_s) for r in retries] == [(1, 0.001), (2, 0.002)]


async def test_a_streamed_answer_with_usage_and_price(key: str) -> None:
    text = "Here it is:\n```cuda\n__global__ void k() {}\n```\n"
    with OpenAIServer([text], chunk_chars=5) as server:
        model = LitellmModel(
            "openai/test-model",
            api_base=server.base_url,
            input_cost_per_token=1e-6,
            output_cost_per_token=2e-6,
        )
        deltas: list[str] = []
        reply = await model.complete(ASK, on_delta=deltas.append)
    assert reply.content == text and "".join(deltas) == text and len(deltas) > 5
    assert reply.usage is not None and (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (3, 9)
    assert reply.cost_usd == pytest.approx(3 * 1e-6 + 9 * 2e-6)  # the server counts words


async def test_no_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIServer(["unused"]) as server:
        model = LitellmModel("openai/test-model", api_base=server.base_url)
        with pytest.raises(ModelError, match="OPENAI_API_KEY not set"):
            await model.complete(ASK)
        assert server.requests == []


async def test_scripted_model_serves_in_order_then_is_exhausted(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(["one", "two"]))
    model = make_model(f"scripted:{path}")
    assert isinstance(model, ScriptedModel) and model.author == "scripted"
    assert [(await model.complete(ASK)).content for _ in range(2)] == ["one", "two"]
    with pytest.raises(ModelExhausted):
        await model.complete(ASK)


@pytest.mark.parametrize(
    ("content", "message"), [("{", "malformed JSON"), ('{"a": 1}', "list of strings"), ("[]", "no messages")]
)
def test_scripted_model_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        ScriptedModel(path)


async def test_human_model_asks_the_callback() -> None:
    seen: list[str] = []

    async def write(messages: object) -> str | None:
        seen.append(ASK[-1].content)
        return None if len(seen) > 1 else "```cuda\nint x;\n```"

    model = HumanModel(write)
    reply = await model.complete(ASK)
    assert reply.content == "```cuda\nint x;\n```" and model.author == "human"
    with pytest.raises(PersonStopped):
        await model.complete(ASK)


def test_make_model_specs(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    with pytest.raises(UserError, match="someone to write"):
        make_model("human")
    assert make_model("litellm:openai/gpt-x").name == "openai/gpt-x"
    assert make_model("anthropic/claude-x").name == "anthropic/claude-x"
    with pytest.raises(UserError, match="empty model"):
        make_model("  ")


def test_make_model_refuses_a_provider_whose_key_is_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # An OpenAI-compatible server at --api-base still gets the OpenAI SDK, which wants a key.
    for base in (None, "http://127.0.0.1:9/v1"):
        with pytest.raises(UserError, match=r"^no credentials for openai/gpt-x: OPENAI_API_KEY not set"):
            make_model("openai/gpt-x", api_base=base)
    with pytest.raises(UserError, match="GOOGLE_API_KEY, GEMINI_API_KEY not set"):
        make_model("gemini/gemini-x")
    # A provider meant for local servers needs none.
    assert make_model("hosted_vllm/x", api_base="http://127.0.0.1:9/v1").name == "hosted_vllm/x"


def test_redact_removes_keys_and_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789abcdef")
    text = f"key {CANARY_KEY}, masked {CANARY_KEY[:10]}****, token tok-0123456789abcdef, url http://me:pw@host/v1"
    cleaned = redact(text)
    assert CANARY_KEY[:8] not in cleaned and "tok-0123456789abcdef" not in cleaned and "me:pw" not in cleaned
    assert cleaned.count(REDACTED) >= 4 and "http://" in cleaned
