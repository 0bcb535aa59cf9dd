"""What the v2 interop tests of OUR host share: the wire both ways, a permission dialog that waits
for the test, the agent processes left."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import orjson

from acp_driver.driver import AgentMessageChunk, PermissionRequest, PromptTurn

from ..remote.serving import descendants


class Wire:
    """Pass ``wire.trace`` as ``launch(tracer=...)``: every message both ways, decoded, in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def trace(self, direction: str, data: bytes) -> None:
        self.messages.append((direction, orjson.loads(data)))

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
        return "\n".join(
            f"{'->' if d == 'out' else '<-'} {json.dumps(m, ensure_ascii=False)[:width]}"
            for d, m in self.messages
        )


class Dialog:
    """A permission policy standing for a user who does not answer: each request waits until the
    test answers it or the driver cancels it; what happened to each is kept."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[PermissionRequest] = asyncio.Queue()
        self.cancelled: list[str] = []
        """Why each cancelled dialog was cancelled (the ``CancelledError``'s message)."""

    async def __call__(self, request: PermissionRequest) -> dict[str, Any]:
        await self.asked.put(request)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            self.cancelled.append(str(exc.args[0]) if exc.args else "")
            raise
        raise AssertionError("unreachable")

    async def next(self, timeout: float = 30.0) -> PermissionRequest:
        async with asyncio.timeout(timeout):
            return await self.asked.get()


async def first_chunk(turn: PromptTurn, count: int = 1) -> list[str]:
    """Iterate ``turn`` until it streamed ``count`` message chunks; their texts."""
    texts: list[str] = []
    async for update in turn:
        if isinstance(update, AgentMessageChunk):
            texts.append(update.text)
            if len(texts) == count:
                return texts
    raise AssertionError(f"the turn ended after {len(texts)} chunk(s): {turn.result}")


async def texts_of(turn: PromptTurn) -> list[str]:
    """The rest of the turn's message chunks, to its end."""
    return [u.text async for u in turn if isinstance(u, AgentMessageChunk)]


def processes_running(marker: bytes) -> list[int]:
    """Live processes below this one whose command line contains ``marker``."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            found.append(pid)
    return found
