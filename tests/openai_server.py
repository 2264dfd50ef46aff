"""A real local OpenAI-compatible HTTP server for tests: `/v1/chat/completions`, streamed (SSE) or not.

It serves scripted answers in order (or from a function of each request's body) and can answer one
request with an HTTP error, so the model's retry path runs over a real socket. Every request body and its headers are kept for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass(frozen=True)
class HttpError:
    """Answer the next request with this status and an OpenAI-style error body."""

    status: int
    message: str = "scripted error"
    kind: str = "server_error"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Answer = str | HttpError
Answers = list[Answer] | Callable[[dict[str, Any]], Answer]


@dataclass
class _Script:
    answers: Answers
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, recorded: Recorded) -> str | HttpError:
        with self.lock:
            self.requests.append(recorded)
            if callable(self.answers):
                return self.answers(recorded.body)
            if not self.answers:
                return HttpError(400, "the test server has no scripted answer left", "invalid_request_error")
            return self.answers.pop(0)


def _tokens(text: str) -> int:
    return len(text.split())


def _handler(script: _Script, chunk_chars: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            recorded = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            answer = script.next(recorded)
            if isinstance(answer, HttpError):
                self._json(
                    answer.status, {"error": {"message": answer.message, "type": answer.kind, "code": None}}
                )
                return
            prompt_tokens = sum(_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": _tokens(answer),
                "total_tokens": prompt_tokens + _tokens(answer),
            }
            model = body.get("model", "test-model")
            if body.get("stream"):
                self._stream(
                    model, answer, usage if body.get("stream_options", {}).get("include_usage") else None
                )
            else:
                message = {"role": "assistant", "content": answer}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._json(
                    200, {**self._envelope(model, "chat.completion"), "choices": [choice], "usage": usage}
                )

        def _envelope(self, model: str, kind: str) -> dict[str, Any]:
            return {"id": "chatcmpl-test", "object": kind, "created": int(time.time()), "model": model}

        def _json(self, status: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _stream(self, model: str, answer: str, usage: dict[str, int] | None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            envelope = self._envelope(model, "chat.completion.chunk")
            pieces = [answer[i : i + chunk_chars] for i in range(0, len(answer), chunk_chars)] or [""]
            for number, piece in enumerate(pieces):
                delta = {"role": "assistant", "content": piece} if number == 0 else {"content": piece}
                self._event({**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            self._event({**envelope, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if usage is not None:
                self._event({**envelope, "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, data: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


class OpenAIServer:
    """`with OpenAIServer(["answer 1", HttpError(500), "answer 2"]) as server: … server.base_url …`

    A function for `answers` is called with each request's body (under a lock, one at a time).
    """

    def __init__(self, answers: Answers, chunk_chars: int = 40) -> None:
        self._script = _Script(answers if callable(answers) else list(answers))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._script, chunk_chars))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[Recorded]:
        return list(self._script.requests)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
