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
from dataclasses import dataclass
from typing import Any

from . import fake_model_server as base
from .fake_model_server import Endless, Silent, Words

__all__ = ["Endless", "FakeAnthropic", "Request", "Silent", "Step", "ToolUse", "Words"]


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


Step = Words | Endless | ToolUse | Silent


@dataclass
class Request(base.Request):
    """One request the agent made: its request line and its JSON body."""

    conversation: bool = False
    """A turn of the conversation (it offers the model tools): it takes a step of the script."""

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


class FakeAnthropic(base.FakeModelServer[Request, Words | Endless | ToolUse]):
    """The server: ``await start()``, point the agent at ``base_url``, append steps to ``script``."""

    def __init__(self) -> None:
        super().__init__()
        self.side_requests = 0
        self.fixed_message_id: str | None = None
        """Every reply's message id (a model server with fixed ids), instead of a fresh one each."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conversation(self) -> list[Request]:
        return [r for r in self.requests if r.conversation]

    async def next_turn(self, after: int | None = None) -> Request:
        """Wait for conversation request number ``after`` (default: the next one to arrive)."""
        index = len(self.conversation) if after is None else after
        return await self.wait_for_request(index, lambda: self.conversation)

    def recognise(self, line: str, body: dict[str, Any]) -> Request | None:
        if not line.startswith("POST /v1/messages") or "count_tokens" in line:
            return None
        request = Request(line, body)
        request.conversation = bool(body.get("tools")) and not request.last_user_text().startswith(
            SUGGESTION_MARK
        )
        return request

    def step_for(self, request: Request) -> Words | Endless | ToolUse | Silent:
        if not request.conversation:  # a request of Claude Code's own: a short canned answer
            self.side_requests += 1
            return Words("", 0)
        return super().step_for(request)

    async def answer_other(self, writer: asyncio.StreamWriter, line: str) -> None:
        if "count_tokens" in line:
            base.write_json(writer, 200, {"input_tokens": 1})
        else:
            base.write_json(
                writer, 404, {"type": "error", "error": {"type": "not_found_error", "message": line}}
            )
        await writer.drain()

    async def answer(
        self, writer: asyncio.StreamWriter, request: Request, step: Words | Endless | ToolUse
    ) -> None:
        body = request.body
        model = str(body.get("model", "claude-fake"))
        message_id = self.fixed_message_id or f"msg_fake_{next(_ids)}"
        if not body.get("stream"):
            text = " ".join(f"{step.prefix}{i}" for i in range(step.n)) if isinstance(step, Words) else "ok"
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
            base.write_json(writer, 200, message)
            await writer.drain()
            return
        writer.write(base.STREAM_HEAD)
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
        _event(writer, "message_start", {"type": "message_start", "message": start})
        stop_reason = "end_turn"
        outputs = 0
        if isinstance(step, ToolUse):
            block = {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": step.name, "input": {}}
            _event(
                writer,
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input)}
            _event(writer, "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            _event(writer, "content_block_stop", {"type": "content_block_stop", "index": 0})
            stop_reason = "tool_use"
            outputs = 1
        else:
            empty = {"type": "text", "text": ""}
            _event(
                writer,
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": empty},
            )
            await writer.drain()
            i = 0
            while isinstance(step, Endless) or i < step.n:
                delta = {"type": "text_delta", "text": f"{step.prefix}{i} "}
                _event(
                    writer, "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
                )
                await writer.drain()
                if step.interval:
                    await asyncio.sleep(step.interval)
                i += 1
            outputs = i
            _event(writer, "content_block_stop", {"type": "content_block_stop", "index": 0})
        _event(
            writer,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": outputs},
            },
        )
        _event(writer, "message_stop", {"type": "message_stop"})
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _event(writer: asyncio.StreamWriter, event: str, data: dict[str, Any]) -> None:
    """One server-sent event of the Messages API's stream (its name and its data)."""
    base.write_event(writer, f"event: {event}\ndata: {json.dumps(data)}")
