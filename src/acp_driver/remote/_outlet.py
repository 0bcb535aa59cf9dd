"""A bounded queue of messages waiting for a network writer (a WebSocket, an SSE stream).

Messages for a Streamable HTTP stream wait here until its GET attaches; messages for any
stream wait while the client reads slower than the agent writes. Past ``high_water`` bytes the
outlet reports pressure (``on_pressure(True)``; ``on_pressure(False)`` once the writer took
everything): the served connection then stops reading the agent's output, so a slow client
slows the agent down instead of growing the server's memory. The hard bound is ``max_bytes``:
past it ``put`` returns False and the caller ends the connection (what an agent that cannot be
paused, one served in-process, still meets).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

HIGH_WATER = 1024 * 1024
"""Bytes waiting in one outlet before it asks for the agent's output to be paused."""


class Outlet:
    """FIFO of message texts with a byte bound; one reader at a time."""

    __slots__ = (
        "_closed",
        "_items",
        "_on_pressure",
        "_pressing",
        "_ready",
        "high_water",
        "max_bytes",
        "size",
    )

    def __init__(self, max_bytes: int, on_pressure: Callable[[bool], None] | None = None) -> None:
        self.max_bytes = max_bytes
        self.high_water = min(HIGH_WATER, max_bytes // 2)
        self.size = 0
        self._items: collections.deque[bytes] = collections.deque()
        self._ready = asyncio.Event()
        self._closed = False
        self._on_pressure = on_pressure
        self._pressing = False

    def put(self, item: bytes) -> bool:
        """Queue ``item``; False (and nothing queued) if that would pass the bound or it is closed."""
        if self._closed or self.size + len(item) > self.max_bytes:
            return False
        self._items.append(item)
        self.size += len(item)
        self._ready.set()
        if self.size > self.high_water and not self._pressing and self._on_pressure is not None:
            self._pressing = True
            self._on_pressure(True)
        return True

    def take_all(self) -> list[bytes]:
        """Everything queued, in order (empty if nothing)."""
        items = list(self._items)
        self._items.clear()
        self.size = 0
        if not self._closed:
            self._ready.clear()
        if self._pressing:
            self._pressing = False
            assert self._on_pressure is not None
            self._on_pressure(False)
        return items

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until something is queued or the outlet closed; False on timeout."""
        if self._items or self._closed:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """No more items; a waiting reader wakes (what is queued can still be taken)."""
        self._closed = True
        self._ready.set()

    @property
    def closed(self) -> bool:
        return self._closed
