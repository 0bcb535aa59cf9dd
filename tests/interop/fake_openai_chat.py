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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Words:
    prefix: str
    n: int
    interval: float = 0.0
    """Seconds between two words (a slow stream that still ends)."""


@dataclass(frozen=True)
class Endless:
    prefix: str
    interval: float = 0.02


@dataclass(frozen=True)
class Until:
    prefix: str
    release: asyncio.Event
    interval: float = 0.02


@dataclass(frozen=True)
class Silent:
    pass


Step = Words | Endless | Until | Silent


@dataclass
class Request:
    """One request the agent made: its request line and its JSON body."""

    line: str
    body: dict[str, Any]
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the agent closed the connection before the answer ended (a cancelled stream)."""
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


class FakeChatCompletions:
    """The server: ``await start()``, point the agent at ``base_url``, append steps to ``script``."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.decide: Callable[[Request], Step] | None = None
        """When set, picks each request's answer instead of ``script``."""
        self.requests: list[Request] = []
        self.words_sent = asyncio.Condition()
        """Notified after each word streamed (``Request.words_sent`` counts them)."""
        self._arrived = asyncio.Condition()
        self._held: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._held:
            writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def next_request(self, after: int | None = None) -> Request:
        """Wait for request number ``after`` (default: the next one to arrive)."""
        index = len(self.requests) if after is None else after
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) > index)
        return self.requests[index]

    async def streamed(self, request: Request, words: int) -> None:
        """Wait until ``words`` words of ``request``'s answer were written to the agent."""
        async with self.words_sent:
            await self.words_sent.wait_for(lambda: request.words_sent >= words)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._held.append(writer)
        request: Request | None = None
        try:
            while True:  # keep-alive: one connection may carry several requests
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                raw = await reader.readexactly(length) if length else b""
                first = head.split(b"\r\n", 1)[0].decode(errors="replace")
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                if not isinstance(body, dict):
                    body = {}
                if not first.startswith("POST /v1/chat/completions"):
                    await self._answer_other(writer, first)
                    continue
                request = Request(first, body)
                async with self._arrived:
                    self.requests.append(request)
                    self._arrived.notify_all()
                if self.decide is not None:
                    step = self.decide(request)
                else:
                    step = self.script.pop(0) if self.script else Silent()
                if isinstance(step, Silent):
                    await reader.read()  # until the agent hangs up
                    request.hung_up.set()
                    return
                # Endless ends when the agent hangs up: writing then fails with ConnectionError.
                await self._answer(writer, request, step)
        except (ConnectionError, asyncio.IncompleteReadError):
            if request is not None:
                request.hung_up.set()
        except asyncio.CancelledError:
            pass  # close(): the test is over
        finally:
            self._tasks.discard(task)

    async def _answer_other(self, writer: asyncio.StreamWriter, first: str) -> None:
        if first.startswith("GET /v1/models"):
            names = sorted({str(r.body.get("model")) for r in self.requests if r.body.get("model")})
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
            payload = json.dumps({"object": "list", "data": data}).encode()
            writer.write(_head(200, "application/json", len(payload)) + payload)
        else:
            payload = json.dumps({"error": {"type": "not_found_error", "message": first}}).encode()
            writer.write(_head(404, "application/json", len(payload)) + payload)
        await writer.drain()

    async def _answer(
        self, writer: asyncio.StreamWriter, request: Request, step: Words | Endless | Until
    ) -> None:
        if request.body.get("stream") is True:
            await self._stream(writer, request, step)
            return
        text = "".join(f"{step.prefix}{i}\n" for i in range(step.n)) if isinstance(step, Words) else "ok"
        payload = json.dumps(
            {
                "id": f"chatcmpl-fake-{next(_ids)}",
                "object": "chat.completion",
                "created": 0,
                "model": str(request.body.get("model", "fake")),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        writer.write(_head(200, "application/json", len(payload)) + payload)
        await writer.drain()

    async def _stream(
        self, writer: asyncio.StreamWriter, request: Request, step: Words | Endless | Until
    ) -> None:
        base = {
            "id": f"chatcmpl-fake-{next(_ids)}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": str(request.body.get("model", "fake")),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            _chunk(writer, json.dumps({**base, "choices": [choice], **extra}))

        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
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
            _chunk(writer, json.dumps({**base, "choices": [], "usage": usage}))
        _chunk(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _head(status: int, content_type: str, length: int) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    return f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n".encode()


def _chunk(writer: asyncio.StreamWriter, data: str) -> None:
    """One server-sent event (``data: ...``), framed as one HTTP chunk."""
    payload = f"data: {data}\n\n".encode()
    writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
