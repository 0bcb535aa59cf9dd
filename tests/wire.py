"""What a host put on the wire, for tests: a tracer that keeps the outgoing messages, and the
first update of a turn."""

from __future__ import annotations

from typing import Any

import orjson

from acp_driver.driver import PromptTurn, Update


class Wire:
    """Pass ``wire.trace`` as a connection's tracer (``launch(tracer=...)``): ``out`` holds
    every message the host sent, decoded, in order; ``both`` every message either way."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.both: list[tuple[str, dict[str, Any]]] = []

    def trace(self, direction: str, message: bytes) -> None:
        decoded = orjson.loads(message)
        self.both.append((direction, decoded))
        if direction == "out":
            self.out.append(decoded)

    def dump(self) -> str:
        """The whole wire, one message a line (for an assertion's message)."""
        return "\n".join(f"{d:>3} {orjson.dumps(m).decode()[:300]}" for d, m in self.both)

    def methods(self) -> list[str]:
        """The methods of the requests and notifications sent, in order."""
        return [m["method"] for m in self.out if "method" in m]


async def first_update(turn: PromptTurn, report: Any = None) -> Update:
    """The turn's first update (the agent is working on it); fails the test if the turn ends
    first, with ``report()`` (e.g. both sides' traces) when given."""
    async for update in turn:
        return update
    details = f"\n{report()}" if report is not None else ""
    raise AssertionError(f"turn ended before any update: {turn.result}{details}")
