"""What a host put on the wire and read from it, for tests: a tracer that keeps every message,
and the first update of a turn."""

from __future__ import annotations

import json
from typing import Any

import orjson

from acp_driver.driver import PromptTurn, Update


class Wire:
    """Pass ``wire.trace`` as a connection's tracer (``launch(tracer=...)``): ``messages`` holds
    every message both ways, decoded, in order; ``out`` the ones the host sent."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.out: list[dict[str, Any]] = []

    def trace(self, direction: str, data: bytes) -> None:
        decoded = orjson.loads(data)
        self.messages.append((direction, decoded))
        if direction == "out":
            self.out.append(decoded)

    def methods(self) -> list[str]:
        """The methods of the requests and notifications sent, in order."""
        return [m["method"] for m in self.out if "method" in m]

    def mark(self) -> int:
        """A position: what comes after it is ``since(mark)``."""
        return len(self.messages)

    def since(self, start: int = 0) -> list[tuple[str, dict[str, Any]]]:
        return self.messages[start:]

    def sent(self, method: str, start: int = 0) -> list[dict[str, Any]]:
        return [m for d, m in self.since(start) if d == "out" and m.get("method") == method]

    def received(self, method: str, start: int = 0) -> list[dict[str, Any]]:
        return [m for d, m in self.since(start) if d == "in" and m.get("method") == method]

    def answers(self, direction: str, request_id: Any, start: int = 0) -> list[dict[str, Any]]:
        """The responses to ``request_id`` that went ``direction`` (``out``: ours to the agent)."""
        return [
            m
            for d, m in self.since(start)
            if d == direction and "method" not in m and m.get("id") == request_id
        ]

    def index(self, predicate: Any, start: int = 0) -> int:
        """Position of the first message past ``start`` with ``predicate(direction, message)``."""
        for i in range(start, len(self.messages)):
            if predicate(*self.messages[i]):
                return i
        raise AssertionError(f"no such message on the wire\n{self.dump()}")

    def states(self, start: int = 0, stop: int | None = None) -> list[tuple[Any, Any]]:
        """The ``state_update`` sequence received: ``(state, stopReason)``."""
        return [
            (u.get("state"), u.get("stopReason"))
            for d, m in self.messages[start:stop]
            if d == "in"
            and m.get("method") == "session/update"
            and (u := m["params"].get("update", {})).get("sessionUpdate") == "state_update"
        ]

    def dump(self, width: int = 300) -> str:
        """The whole wire, one message a line (for an assertion's message)."""
        return "\n".join(
            f"{'->' if d == 'out' else '<-'} {json.dumps(m, ensure_ascii=False)[:width]}"
            for d, m in self.messages
        )


async def first_update(turn: PromptTurn, report: Any = None) -> Update:
    """The turn's first update (the agent is working on it); fails the test if the turn ends
    first, with ``report()`` (e.g. both sides' traces) when given."""
    async for update in turn:
        return update
    details = f"\n{report()}" if report is not None else ""
    raise AssertionError(f"turn ended before any update: {turn.result}{details}")
