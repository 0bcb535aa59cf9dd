"""A loopback stand-in for the Anthropic Messages API, for running a Claude Code based agent
(claude-agent-acp) offline. The agent finds it through ``ANTHROPIC_BASE_URL`` and sends a fake
``ANTHROPIC_API_KEY``; no request leaves the machine.

``POST /v1/messages`` is answered with server-sent events in the Messages API's streaming format
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``), or with one JSON
message when the request does not ask to stream. Claude Code also sends requests of its own
beside the conversation (a title for the session, a quota probe...): only a request that offers
the model tools is a turn of the conversation and takes the next step of the script; any other
gets a short canned answer (``side_requests`` counts them).

A step of the script, one per conversation request, in order (or the one ``decide(request)``
picks, from what the request asks):

- ``Words(prefix, n, interval=0)``: the words ``prefix0 .. prefix{n-1}`` as text deltas,
  ``interval`` seconds apart, then ``end_turn``;
- ``Endless(prefix)``: a word every 20 ms until the agent hangs up;
- ``ToolUse(name, input)``: one ``tool_use`` block (``stop_reason: tool_use``), which makes the
  agent run the tool -- after asking the client's permission when its mode says so;
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
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Silent:
    pass


Step = Words | Endless | ToolUse | Silent


@dataclass
class Request:
    """One request the agent made: its request line and its JSON body."""

    line: str
    body: dict[str, Any]
    conversation: bool
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the agent closed the connection before the answer ended (a cancelled stream)."""

    def last_user_text(self) -> str:
        """The text of the user's last message: what this model call was asked (``""`` for one
        that only carries tool results). Claude Code puts a ``system`` message last: skipped."""
        messages = [m for m in self.body.get("messages", []) if m.get("role") != "system"]
        if not messages or messages[-1].get("role") != "user":
            return ""
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(texts)

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last user message."""
        messages = [m for m in self.body.get("messages", []) if m.get("role") != "system"]
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


_ids = itertools.count(1)
SUGGESTION_MARK = "[SUGGESTION MODE"
"""How Claude Code's request for a predicted next prompt begins: it offers tools too."""


class FakeAnthropic:
    """The server: ``await start()``, point the agent at ``base_url``, append steps to ``script``."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.decide: Callable[[Request], Step] | None = None
        """When set, picks each conversation request's answer instead of ``script``."""
        self.requests: list[Request] = []
        self.side_requests = 0
        self.fixed_message_id: str | None = None
        """Every reply's message id (a model server with fixed ids), instead of a fresh one each."""
        self._arrived = asyncio.Condition()
        self._held: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conversation(self) -> list[Request]:
        return [r for r in self.requests if r.conversation]

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

    async def next_turn(self, after: int | None = None) -> Request:
        """Wait for conversation request number ``after`` (default: the next one to arrive)."""
        index = len(self.conversation) if after is None else after
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.conversation) > index)
        return self.conversation[index]

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
                if not first.startswith("POST /v1/messages") or "count_tokens" in first:
                    await self._answer_other(writer, first)
                    continue
                request = Request(first, body, conversation=False)
                request.conversation = bool(body.get("tools")) and not request.last_user_text().startswith(
                    SUGGESTION_MARK
                )
                async with self._arrived:
                    self.requests.append(request)
                    self._arrived.notify_all()
                if not request.conversation:
                    self.side_requests += 1
                    await self._answer(writer, body, Words("", 0))
                    continue
                if self.decide is not None:
                    step = self.decide(request)
                else:
                    step = self.script.pop(0) if self.script else Silent()
                if isinstance(step, Silent):
                    await reader.read()  # until the agent hangs up
                    request.hung_up.set()
                    return
                # Endless ends when the agent hangs up: writing then fails with ConnectionError.
                await self._answer(writer, body, step)
        except (ConnectionError, asyncio.IncompleteReadError):
            if request is not None:
                request.hung_up.set()
        except asyncio.CancelledError:
            pass  # close(): the test is over
        finally:
            self._tasks.discard(task)

    async def _answer_other(self, writer: asyncio.StreamWriter, first: str) -> None:
        if "count_tokens" in first:
            payload = json.dumps({"input_tokens": 1}).encode()
            writer.write(_head(200, "application/json", len(payload)) + payload)
        else:
            payload = json.dumps(
                {"type": "error", "error": {"type": "not_found_error", "message": first}}
            ).encode()
            writer.write(_head(404, "application/json", len(payload)) + payload)
        await writer.drain()

    async def _answer(self, writer: asyncio.StreamWriter, body: dict[str, Any], step: Step) -> None:
        model = str(body.get("model", "claude-fake"))
        message_id = self.fixed_message_id or f"msg_fake_{next(_ids)}"
        if not body.get("stream"):
            text = " ".join(f"{step.prefix}{i}" for i in range(step.n)) if isinstance(step, Words) else "ok"
            payload = json.dumps(
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            ).encode()
            writer.write(_head(200, "application/json", len(payload)) + payload)
            await writer.drain()
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        start: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        _chunk(writer, "message_start", {"type": "message_start", "message": start})
        stop_reason = "end_turn"
        outputs = 0
        if isinstance(step, ToolUse):
            block = {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": step.name, "input": {}}
            _chunk(
                writer,
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input)}
            _chunk(writer, "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            _chunk(writer, "content_block_stop", {"type": "content_block_stop", "index": 0})
            stop_reason = "tool_use"
            outputs = 1
        else:
            assert isinstance(step, (Words, Endless))
            empty = {"type": "text", "text": ""}
            _chunk(
                writer,
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": empty},
            )
            await writer.drain()
            i = 0
            while isinstance(step, Endless) or i < step.n:
                delta = {"type": "text_delta", "text": f"{step.prefix}{i} "}
                _chunk(
                    writer, "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
                )
                await writer.drain()
                if step.interval:
                    await asyncio.sleep(step.interval)
                i += 1
            outputs = i
            _chunk(writer, "content_block_stop", {"type": "content_block_stop", "index": 0})
        usage = {"output_tokens": outputs}
        _chunk(
            writer,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": usage,
            },
        )
        _chunk(writer, "message_stop", {"type": "message_stop"})
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _head(status: int, content_type: str, length: int) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    return f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n".encode()


def _chunk(writer: asyncio.StreamWriter, event: str, data: dict[str, Any]) -> None:
    """One server-sent event, framed as one HTTP chunk."""
    payload = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
    writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
