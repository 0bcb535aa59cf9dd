"""What the v2 interop tests of OUR host share: the wire both ways, a permission dialog that waits
for the test, the agent processes left."""

from __future__ import annotations

import asyncio
from typing import Any

from acp_driver.driver import AgentMessageChunk, PermissionRequest, PromptTurn


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
