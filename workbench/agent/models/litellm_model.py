"""Any model litellm speaks, streamed; tokens, cost and latency per call; retries with backoff.

litellm is imported on first use (it takes seconds): the CLI and the TUI start without it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

from workbench.agent.models.base import Author, ChatMessage, ModelError, OnDelta, OnRetry, Reply, RetryNotice
from workbench.secrets import is_secret_name, redact
from workbench.session.events import Usage


def _litellm() -> Any:
    # The bundled cost map: no network fetch at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _fatal_errors(litellm: Any) -> tuple[type[BaseException], ...]:
    """Errors a retry cannot fix: bad key, no such model, a malformed request, a prompt too long."""
    return (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,  # includes ContextWindowExceededError and ContentPolicyViolationError
        litellm.UnprocessableEntityError,
    )


def _retryable_errors(litellm: Any) -> tuple[type[BaseException], ...]:
    return (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,  # includes Timeout
        litellm.APIError,
    )


def _describe(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}".strip())


class LitellmModel:
    """`litellm:MODEL` or a bare litellm model string such as `openai/gpt-5` or `anthropic/claude-…`.

    Keys come from the provider's usual environment variables (litellm reads them); none is recorded.
    """

    author: Author = "model"

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 600.0,
        retries: int = 4,
        backoff_s: float = 2.0,
        input_cost_per_token: float | None = None,
        output_cost_per_token: float | None = None,
    ) -> None:
        self.name = model
        self.api_base = api_base
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.prices = (input_cost_per_token, output_cost_per_token)

    def _request_options(self) -> dict[str, Any]:
        """The optional litellm arguments that are set."""
        given = {"api_base": self.api_base, "temperature": self.temperature, "max_tokens": self.max_tokens}
        return {key: value for key, value in given.items() if value is not None}

    def settings(self) -> dict[str, object]:
        settings: dict[str, object] = {"retries": self.retries, "timeout_s": self.timeout_s}
        settings.update(self._request_options())
        prices = zip(("input_cost_per_token", "output_cost_per_token"), self.prices, strict=True)
        settings.update((key, value) for key, value in prices if value is not None)
        return settings

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        on_delta: OnDelta | None = None,
        on_retry: OnRetry | None = None,
    ) -> Reply:
        litellm = _litellm()
        self._check_credentials()
        fatal, retryable = _fatal_errors(litellm), _retryable_errors(litellm)
        payload = [m.model_dump() for m in messages]
        for attempt in range(1, self.retries + 2):
            try:
                return await self._once(litellm, payload, on_delta)
            except fatal as exc:
                raise ModelError(_describe(exc)) from None
            except retryable as exc:
                if attempt > self.retries:
                    raise ModelError(f"{_describe(exc)} (after {attempt} attempts)") from None
                delay = self.backoff_s * 2 ** (attempt - 1)
                if on_retry is not None:
                    on_retry(RetryNotice(attempt=attempt, delay_s=delay, error=_describe(exc)))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def credentials_problem(self) -> str | None:
        """What key the provider lacks (variable names only), asked of litellm without a request; None if none.

        litellm knows which providers need no key (a local `hosted_vllm/…` server at `api_base`).
        """
        found = _litellm().validate_environment(model=self.name, api_base=self.api_base)
        missing = [name for name in found.get("missing_keys", []) if is_secret_name(name)]
        if not missing:
            return None
        return f"no credentials for {self.name}: {', '.join(missing)} not set in the environment"

    def _check_credentials(self) -> None:
        """Fail at once without a key: the provider SDK's error for it would look retryable."""
        problem = self.credentials_problem()
        if problem is not None:
            raise ModelError(problem)

    async def _once(self, litellm: Any, payload: list[dict[str, str]], on_delta: OnDelta | None) -> Reply:
        options: dict[str, Any] = {
            "model": self.name,
            "messages": payload,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self.timeout_s,
            # Our own retry loop decides; litellm's and the provider SDK's would hide the errors from it.
            "num_retries": 0,
            "max_retries": 0,
            **self._request_options(),
        }
        began = time.monotonic()
        stream = await litellm.acompletion(**options)
        chunks: list[Any] = []
        parts: list[str] = []
        async for chunk in stream:
            chunks.append(chunk)
            text = chunk.choices[0].delta.content if chunk.choices else None
            if text:
                parts.append(text)
                if on_delta is not None:
                    on_delta(text)
        latency = time.monotonic() - began
        built = litellm.stream_chunk_builder(chunks, messages=payload)
        usage = None
        if built is not None and getattr(built, "usage", None) is not None:
            usage = Usage(
                prompt_tokens=built.usage.prompt_tokens or 0,
                completion_tokens=built.usage.completion_tokens or 0,
            )
        return Reply(
            content="".join(parts), usage=usage, cost_usd=self._cost(litellm, built), latency_s=latency
        )

    def _cost(self, litellm: Any, built: Any) -> float | None:
        if built is None:
            return None
        prices = self.prices
        try:
            if prices[0] is not None or prices[1] is not None:
                custom = {"input_cost_per_token": prices[0] or 0.0, "output_cost_per_token": prices[1] or 0.0}
                return float(litellm.completion_cost(completion_response=built, custom_cost_per_token=custom))
            return float(litellm.completion_cost(completion_response=built))
        except Exception:  # noqa: BLE001 - litellm raises plain exceptions for models it has no price for
            return None
