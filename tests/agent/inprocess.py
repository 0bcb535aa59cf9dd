"""The agent runtime in this process, on a connection whose transport keeps what the agent sent:
for stories that need one exact loop iteration (a message read between two steps of the
runtime), and timeouts on a fake clock. Everything else talks to a real agent over real pipes.

``InProcessAgent.feed`` hands messages to the connection as if just read; ``sent`` is what the
agent wrote, decoded, in order.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson

from acp_driver.agent import Agent, AgentRuntime
from acp_driver.aio import Connection

from ..fakeclock import FakeClock
from ..waiting import eventually

Message = dict[str, Any]

V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "in-process", "version": "0"}, "capabilities": {}}


class KeptTransport:
    """A message transport that keeps what is sent (decoded); nothing answers."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._closing = False

    def send(self, messages: list[bytes]) -> None:
        self.sent.extend(orjson.loads(m) for m in messages)

    def close_write(self) -> None:
        self._closing = True

    def close(self) -> None:
        self._closing = True

    def is_closing(self) -> bool:
        return self._closing


class InProcessAgent:
    """``agent`` served by an ``AgentRuntime`` on a kept transport, its timeouts on ``clock``."""

    def __init__(self, agent: Agent, **runtime_options: Any) -> None:
        self.transport = KeptTransport()
        self.connection = Connection(name="agent")
        self.connection.attach(self.transport)
        self.clock = FakeClock()
        self.runtime = AgentRuntime(agent, self.connection, clock=self.clock, **runtime_options)
        self._ids = itertools.count(1)
        self.session_id = ""

    @property
    def sent(self) -> list[Message]:
        return self.transport.sent

    def message(self, method: str, params: Any, request_id: Any = None) -> Message:
        """A request (``request_id``) or notification, as the client would write it."""
        message: Message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request_id is not None:
            message["id"] = request_id
        return message

    def feed(self, *messages: Message) -> None:
        """``messages`` read from the client, in one read."""
        self.connection.feed_messages([json.dumps(m).encode() for m in messages])  # any int

    def next_id(self) -> int:
        """A request id not used yet."""
        return next(self._ids)

    def request(self, method: str, params: Any) -> int:
        """Send a request; its id."""
        request_id = self.next_id()
        self.feed(self.message(method, params, request_id))
        return request_id

    def prompt(self, text: str) -> int:
        """Send a text prompt; its id."""
        request_id = self.next_id()
        self.feed(self.prompt_message(text, request_id))
        return request_id

    def prompt_message(self, text: str, request_id: int) -> Message:
        return self.message(
            "session/prompt",
            {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]},
            request_id,
        )

    def withdrawal(self, request_id: Any) -> Message:
        """``$/cancel_request`` for the client's request ``request_id``."""
        return self.message("$/cancel_request", {"requestId": request_id})

    def answer(self, request_id: Any) -> Message | None:
        for m in self.sent:
            if "method" not in m and m.get("id") == request_id:
                return m
        return None

    async def answered(self, request_id: Any, what: str = "") -> Message:
        await eventually(lambda: self.answer(request_id) is not None, what or f"the answer to {request_id}")
        answer = self.answer(request_id)
        assert answer is not None
        return answer

    async def start_v2(self, cwd: str = "/") -> None:
        """Initialize in v2 and open a session (``session_id``)."""
        assert "result" in await self.answered(self.request("initialize", V2_INITIALIZE))
        opened = await self.answered(self.request("session/new", {"cwd": cwd}))
        self.session_id = opened["result"]["sessionId"]

    def updates(self, kind: str | None = None) -> list[Message]:
        """The ``update`` of every ``session/update`` sent (of ``kind``), in order."""
        return [
            m["params"]["update"]
            for m in self.sent
            if m.get("method") == "session/update"
            and (kind is None or m["params"]["update"].get("sessionUpdate") == kind)
        ]

    def states(self) -> list[tuple[Any, Any]]:
        return [(u.get("state"), u.get("stopReason")) for u in self.updates("state_update")]

    async def close(self) -> None:
        """Close the connection, first letting every wait on the fake clock expire (so that no
        task of the runtime is left waiting on time that will never come)."""
        for deadline in self.clock.deadlines:
            self.clock.advance_to(deadline)
        await self.connection.aclose()
