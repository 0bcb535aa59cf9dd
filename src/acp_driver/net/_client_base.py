"""What both client transports share: the ordered writer with backpressure, the end, the close.

A client transport implements ``aio.Transport`` over a network medium (WebSocket frames,
HTTP POSTs and server-sent events). Outgoing messages are queued by ``send`` (which never
blocks) and written in order by one writer task; past ``HIGH_WATER`` queued bytes the
connection is paused until the queue drains below ``LOW_WATER``. The end of the peer's output
-- the server closed, the network dropped, the host closed or aborted -- is fed to the
connection once, with ``end_reason`` saying what happened (the owner names it in every error).

Closing has two strengths, the cancel ladder's last two rungs for a remote agent:
``aclose(grace)`` ends the connection the polite way (WebSocket close handshake, HTTP
``DELETE``) and aborts it if that does not finish within ``grace``; ``abort()`` drops it now.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

from ..aio import Connection, timeout_on
from ..core import CLOSE_GRACE

logger = logging.getLogger("acp_driver.remote")

HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024


class ClientTransport:
    """The shared half of a client transport (see the module docstring)."""

    kind = "network"

    def __init__(self, url: str, receiver: Connection) -> None:
        self.url = url
        self.receiver = receiver
        self.end_reason: str | None = None
        """What ended the connection (None while it is up)."""
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._paused = False
        self._wakeup = asyncio.Event()
        self._closing = False
        self._eof_fed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._close_task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ aio.Transport

    def send(self, messages: list[bytes]) -> None:
        if self._closing:
            return  # the connection learns the end from feed_eof; nothing more can be written
        for message in messages:
            self._queue.append(message)
            self._queued += len(message)
        if self._queued > HIGH_WATER and not self._paused:
            self._paused = True
            self.receiver.pause_writing()
        self._wakeup.set()

    def close_write(self) -> None:
        """A network connection has no half-close here: the same as ``close``."""
        self.close()

    def close(self) -> None:
        """Begin a graceful close (see ``aclose``); returns at once."""
        self._start_close(grace=CLOSE_GRACE)

    def is_closing(self) -> bool:
        return self._closing

    # ------------------------------------------------------------------ owners

    async def aclose(self, grace: float = CLOSE_GRACE) -> None:
        """End the connection gracefully, aborting it after ``grace`` seconds (on the
        connection's clock); idempotent."""
        await asyncio.shield(self._start_close(grace))

    def abort(self, reason: str = "the host aborted the connection") -> None:
        """Drop the connection now (no close handshake)."""
        self._closing = True
        self._ended(reason)
        self._abort_medium()
        for task in list(self._tasks):
            task.cancel()
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._finish_abort())

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # ------------------------------------------------------------------ for subclasses

    def start(self) -> None:
        self._writer = self.spawn(self._write_loop(), "writer")

    def spawn(self, coro: Any, what: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.url} {what}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _ended(self, reason: str) -> None:
        """The peer's output ended (once): remember why and tell the connection."""
        if self.end_reason is None:
            self.end_reason = reason
        if not self._eof_fed:
            self._eof_fed = True
            self.receiver.feed_eof()

    async def _write(self, message: bytes) -> None:
        raise NotImplementedError

    async def _close_gracefully(self) -> None:
        """The medium's polite end (WebSocket close, HTTP DELETE)."""
        raise NotImplementedError

    def _abort_medium(self) -> None:
        """Drop the medium's sockets now (synchronous part of ``abort``)."""
        raise NotImplementedError

    async def _release(self) -> None:
        """Release what is left once the connection is over (HTTP client, ...)."""

    # ------------------------------------------------------------------ internals

    async def _write_loop(self) -> None:
        queue = self._queue
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while queue:
                message = queue.popleft()
                self._queued -= len(message)
                if self._paused and self._queued < LOW_WATER:
                    self._paused = False
                    self.receiver.resume_writing()
                await self._write(message)
            if self._closing:
                return

    def _start_close(self, grace: float) -> asyncio.Task[None]:
        if self._close_task is None:
            self._closing = True
            self._close_task = asyncio.get_running_loop().create_task(self._do_close(grace))
        return self._close_task

    async def _do_close(self, grace: float) -> None:
        try:
            writer = self._writer
            if writer is not None and not writer.done():
                self._wakeup.set()  # write what is queued first (bounded by the grace)
            try:
                async with timeout_on(self.receiver.clock, grace):
                    if writer is not None and not writer.done():
                        await asyncio.wait({writer})
                    await self._close_gracefully()
            except TimeoutError:
                logger.info("%s: the graceful close did not finish in %g s; aborting", self.url, grace)
            except Exception as exc:
                logger.debug("%s: graceful close failed: %r", self.url, exc)
            self._ended("the host closed the connection")
            self._abort_medium()
            await self._cancel_tasks()
            await self._release()
        finally:
            self._closed.set()

    async def _finish_abort(self) -> None:
        try:
            await self._cancel_tasks()
            await self._release()
        finally:
            self._closed.set()

    async def _cancel_tasks(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait(tasks, timeout=1.0)
