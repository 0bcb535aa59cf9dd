"""A loopback stand-in for an OpenAI-compatible Chat Completions server (what Ollama, vLLM and
llama.cpp serve), for running agents built on the ``openai`` client offline (fast-agent's
``generic`` provider, gptme's ``local`` provider). The agent finds it through its base URL
(``http://127.0.0.1:PORT/v1``) and sends a fake key; no request leaves the machine.

Each ``POST /v1/chat/completions`` takes the next step of the script, answered with server-sent
events (``chat.completion.chunk`` objects, ``data: [DONE]`` last) when it asks to stream, as one
JSON completion otherwise; ``GET /v1/models`` lists the models asked for; anything else is a 404.

A step of the script, one per request, in order (or the one ``decide(request)``
picks, from what the request asks):

- ``Words(prefix, n, interval=0)``: the words ``prefix0 .. prefix{n-1}`` as content deltas,
  ``interval`` seconds apart, then ``finish_reason: stop``. Each word is a line of its own:
  gptme forwards the model's text to the client a whole line at a time;
- ``Endless(prefix, interval=0.02)``: a word every ``interval`` seconds until the agent hangs up;
- ``Until(prefix, release, interval=0.02)``: a word every ``interval`` seconds until the test
  sets ``release``, then ``finish_reason: stop`` (a model that ends when the test says so);
- ``Silent()`` (also when the script is empty): the request is read and never answered.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

from . import fake_model_server as base
from .fake_model_server import Endless, Silent, Words

__all__ = ["Endless", "FakeChatCompletions", "Request", "Silent", "Step", "Until", "Words"]


@dataclass(frozen=True)
class Until:
    prefix: str
    release: asyncio.Event
    interval: float = 0.02


Step = Words | Endless | Until | Silent


@dataclass
class Request(base.Request):
    """One request the agent made: its request line and its JSON body."""

    words_sent: int = 0

    def last_user_text(self) -> str:
        """The text of the last user message: what this model call was asked."""
        users = [m for m in self.body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            return ""
        content = users[-1].get("content")
        if isinstance(content, str):
            return content
        parts = content if isinstance(content, list) else []
        return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


_ids = itertools.count(1)


class FakeChatCompletions(base.FakeModelServer[Request, Words | Endless | Until]):
    """The server: ``await start()``, point the agent at ``base_url``, append steps to ``script``."""

    def __init__(self) -> None:
        super().__init__()
        self.words_sent = asyncio.Condition()
        """Notified after each word streamed (``Request.words_sent`` counts them)."""

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def next_request(self, after: int | None = None) -> Request:
        """Wait for request number ``after`` (default: the next one to arrive)."""
        return await self.wait_for_request(
            len(self.requests) if after is None else after, lambda: self.requests
        )

    async def streamed(self, request: Request, words: int) -> None:
        """Wait until ``words`` words of ``request``'s answer were written to the agent."""
        async with self.words_sent:
            await self.words_sent.wait_for(lambda: request.words_sent >= words)

    def recognise(self, line: str, body: dict[str, Any]) -> Request | None:
        return Request(line, body) if line.startswith("POST /v1/chat/completions") else None

    async def answer_other(self, writer: asyncio.StreamWriter, line: str) -> None:
        if line.startswith("GET /v1/models"):
            names = sorted({str(r.body.get("model")) for r in self.requests if r.body.get("model")})
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
            base.write_json(writer, 200, {"object": "list", "data": data})
        else:
            base.write_json(writer, 404, {"error": {"type": "not_found_error", "message": line}})
        await writer.drain()

    async def answer(
        self, writer: asyncio.StreamWriter, request: Request, step: Words | Endless | Until
    ) -> None:
        if request.body.get("stream") is True:
            await self._stream(writer, request, step)
            return
        text = "".join(f"{step.prefix}{i}\n" for i in range(step.n)) if isinstance(step, Words) else "ok"
        completion = {
            "id": f"chatcmpl-fake-{next(_ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": str(request.body.get("model", "fake")),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        base.write_json(writer, 200, completion)
        await writer.drain()

    async def _stream(
        self, writer: asyncio.StreamWriter, request: Request, step: Words | Endless | Until
    ) -> None:
        fields = {
            "id": f"chatcmpl-fake-{next(_ids)}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": str(request.body.get("model", "fake")),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            base.write_event(writer, "data: " + json.dumps({**fields, "choices": [choice], **extra}))

        writer.write(base.STREAM_HEAD)
        chunk({"role": "assistant", "content": ""})
        await writer.drain()
        i = 0
        while not isinstance(step, Words) or i < step.n:
            if isinstance(step, Until) and step.release.is_set():
                break
            chunk({"content": f"{step.prefix}{i}\n"})
            await writer.drain()
            async with self.words_sent:
                request.words_sent += 1
                self.words_sent.notify_all()
            if step.interval:
                await asyncio.sleep(step.interval)
            i += 1
        chunk({}, "stop")
        options = request.body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": 1, "completion_tokens": i, "total_tokens": i + 1}
            base.write_event(writer, "data: " + json.dumps({**fields, "choices": [], "usage": usage}))
        base.write_event(writer, "data: [DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
