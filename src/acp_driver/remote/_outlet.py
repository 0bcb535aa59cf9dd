"""A bounded queue of messages waiting for a network writer (a WebSocket, an SSE stream).

Messages for a Streamable HTTP stream wait here until its GET attaches; messages for any
stream wait while the client reads slower than the agent writes. The bound is in bytes: a
client that does not read loses its connection (``put`` returns False and the caller ends it)
instead of the server's memory growing without limit.
"""

from __future__ import annotations

import asyncio
import collections


class Outlet:
    """FIFO of message texts with a byte bound; one reader at a time."""

    __slots__ = ("_closed", "_items", "_ready", "max_bytes", "size")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._items: collections.deque[bytes] = collections.deque()
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, item: bytes) -> bool:
        """Queue ``item``; False (and nothing queued) if that would pass the bound or it is closed."""
        if self._closed or self.size + len(item) > self.max_bytes:
            return False
        self._items.append(item)
        self.size += len(item)
        self._ready.set()
        return True

    def take_all(self) -> list[bytes]:
        """Everything queued, in order (empty if nothing)."""
        items = list(self._items)
        self._items.clear()
        self.size = 0
        if not self._closed:
            self._ready.clear()
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
