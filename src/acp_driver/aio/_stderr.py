"""A child's stderr, drained for ever into a bounded tail; how an exit status reads to people;
and ``connect_read_pipe`` / ``connect_write_pipe``, the one way any pipe of a child (stdin,
stdout, stderr) is handed to the loop."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

_T = TypeVar("_T", bound=asyncio.BaseTransport)


class StderrTail:
    """Drains a child's stderr forever: keeps a bounded tail, forwards lines to logging."""

    def __init__(self, name: str, *, max_bytes: int = 64 * 1024) -> None:
        self._log = logging.getLogger(f"acp_driver.stderr.{name}")
        self._max = max_bytes
        self._buf = bytearray()
        self._partial = b""
        self.total_bytes = 0
        self.closed = False

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        buf = self._buf
        buf += data
        if len(buf) > 2 * self._max:
            del buf[: len(buf) - self._max]
        if self._log.isEnabledFor(logging.DEBUG):
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()[-self._max :]
            for line in lines:
                self._log.debug("%s", line.decode("utf-8", "replace"))

    def lines(self, count: int = 20) -> list[str]:
        """The last ``count`` lines seen."""
        text = bytes(self._buf[-self._max :]).decode("utf-8", "replace")
        return text.splitlines()[-count:]

    def mark_closed(self) -> None:
        """The stream ended."""
        self.closed = True

    def describe(self, count: int = 5) -> str:
        """The last lines, ready to append to an error message."""
        lines = self.lines(count)
        if not lines:
            return "no stderr output"
        return "last stderr lines:\n  " + "\n  ".join(lines)


class _DrainProtocol(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


async def drain_pipe(
    pipe: Any, on_data: Callable[[bytes], None], on_eof: Callable[[], None]
) -> asyncio.BaseTransport:
    """Read ``pipe`` until EOF, passing every chunk to ``on_data``."""
    return await connect_read_pipe(lambda: _DrainProtocol(on_data, on_eof), pipe)


async def connect_read_pipe(factory: Callable[[], asyncio.BaseProtocol], pipe: Any) -> asyncio.ReadTransport:
    """``loop.connect_read_pipe``, never abandoned half-way: the pipe is the loop's from here on.

    Cancelled while the loop sets the pipe up, the caller gives up at once, and the transport is
    closed once it is made -- which closes the pipe on every loop. A cancelled
    ``connect_read_pipe`` itself closes it inconsistently: asyncio's loop closes the file
    object; uvloop closes its descriptor behind the file object's back, which then closes that
    number again when it is collected, whatever the number has become meanwhile. The caller
    must not close ``pipe`` itself.
    """
    return await _whole(asyncio.get_running_loop().connect_read_pipe(factory, pipe))


async def connect_write_pipe(
    factory: Callable[[], asyncio.BaseProtocol], pipe: Any
) -> asyncio.WriteTransport:
    """``loop.connect_write_pipe``, never abandoned half-way (uvloop's cancelled
    ``connect_write_pipe`` closes the descriptor behind the file object's back, as its
    ``connect_read_pipe`` does; see there). The caller must not close ``pipe`` itself."""
    return await _whole(asyncio.get_running_loop().connect_write_pipe(factory, pipe))


async def _whole(setup: Awaitable[tuple[_T, Any]]) -> _T:
    connecting = asyncio.ensure_future(setup)
    try:
        transport, _ = await asyncio.shield(connecting)
    except asyncio.CancelledError:
        connecting.add_done_callback(_close_made)
        raise
    return transport


def _close_made(connecting: asyncio.Future[tuple[Any, Any]]) -> None:
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result()[0].close()


def exit_description(code: int | None) -> str:
    """``exit status 3`` / ``killed by SIGKILL`` / ``still running``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
