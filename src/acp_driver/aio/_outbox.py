"""The outbox: one ordered writer from the core's queued messages to the transport.

- Order: messages reach the transport in the order the core queued them; nothing else writes.
- Latency and throughput: the first message of a loop iteration is written at once (a lone
  request or answer does not wait); the ones that follow in the same iteration are written
  together when it ends (one write for a burst).
- Backpressure: the transport reports a full buffer (``pause``/``resume``); senders that want
  to wait for room await ``wait_writable``.
- A write that fails (the transport closed underneath, or raised anything at all) is reported
  once through ``on_lost``: the connection then closes and every waiter fails at once, instead
  of waiting for an answer to a message that was never written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..core import Endpoint
from ._transport import Transport


class Outbox:
    """Moves what the core queues to the transport, in order (see the module docstring)."""

    __slots__ = (
        "_core",
        "_loop",
        "_on_lost",
        "_tick_open",
        "_waiters",
        "closed",
        "paused",
        "scheduled",
        "transport",
    )

    def __init__(self, core: Endpoint, on_lost: Callable[[BaseException | None], None]) -> None:
        self._core = core
        self._on_lost = on_lost
        self._loop: asyncio.AbstractEventLoop | None = None
        self.transport: Transport | None = None
        self.closed = False
        """Our write side is gone (closed by us, or lost)."""
        self.paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self.scheduled = False
        """A write is due (at the end of this loop iteration); ``schedule`` has nothing to do."""
        self._tick_open = False

    def attach(self, transport: Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop

    @property
    def writable(self) -> bool:
        transport = self.transport
        return not self.closed and transport is not None and not transport.is_closing()

    # ------------------------------------------------------------------ writing

    def schedule(self) -> None:
        """Something was queued in the core: write it (now, or at the end of this iteration)."""
        if self.scheduled or self._loop is None:
            return
        self.scheduled = True
        if not self._tick_open:
            self._tick_open = True
            self.flush()
            self._loop.call_soon(self._end_tick)
        # else: _end_tick, already scheduled for this iteration, writes what accumulates

    def _end_tick(self) -> None:
        self._tick_open = False
        if self.scheduled:
            self.flush()

    def flush(self) -> None:
        """Write everything queued, now."""
        self.scheduled = False
        messages = self._core.messages_to_send()
        if not messages or self.closed or self.transport is None:
            return
        try:
            self.transport.send(messages)
        except Exception as exc:  # closed underneath us, or broken: these messages are lost
            self._on_lost(exc)

    def send_raw(self, message: bytes) -> None:
        """Send one message's text as it is, bypassing the core (after what is queued)."""
        self.flush()
        if self.writable:
            assert self.transport is not None
            self.transport.send([message + b"\n"])

    def close_write(self) -> None:
        """End our output after what is queued; the peer sees end of input."""
        self.flush()
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close_write()

    # ------------------------------------------------------------------ flow control

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def lost(self) -> bool:
        """The write side is gone; False if it already was. Wakes every writer."""
        if self.closed:
            return False
        self.closed = True
        self.resume()
        return True

    async def wait_writable(self) -> None:
        """Return once the transport has room (at once when not paused, or when closed)."""
        if not self.paused or self.closed:
            return
        assert self._loop is not None
        fut = self._loop.create_future()
        self._waiters.append(fut)
        await fut
