"""Byte-stream adapters that feed a ``Connection``: OS pipes, stdio, asyncio streams.

The connection only needs a write transport with flow control and someone calling
``feed_data``/``feed_eof``. Pipes use asyncio's pipe transports directly (no extra task per
message); regular files, which asyncio cannot watch, fall back to a reader thread and blocking
writes; any asyncio ``StreamReader``/``StreamWriter`` pair works through a pump task.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._connection import Connection

READ_CHUNK = 256 * 1024


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def data_received(self, data: bytes) -> None:
        self._conn.feed_data(data)

    def eof_received(self) -> bool | None:
        self._conn.feed_eof()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn.feed_eof()


class _WriteProtocol(asyncio.BaseProtocol):
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def pause_writing(self) -> None:
        self._conn.pause_writing()

    def resume_writing(self) -> None:
        self._conn.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn.write_lost(exc)


class _BlockingWriteTransport(asyncio.WriteTransport):
    """Blocking writes to a file asyncio cannot watch (a regular file as stdout)."""

    def __init__(self, conn: Connection, fd: int) -> None:
        super().__init__()
        self._conn = conn
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            self._closing = True
            self._conn.write_lost(exc)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def get_write_buffer_size(self) -> int:
        return 0


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _thread_reader(conn: Connection, fd: int) -> asyncio.Future[None]:
    """Read ``fd`` in a thread (for regular files) and feed the connection."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def run() -> None:
        try:
            while True:
                data = os.read(fd, READ_CHUNK)
                if not data:
                    break
                loop.call_soon_threadsafe(conn.feed_data, data)
        except (OSError, RuntimeError):
            pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(conn.feed_eof)
            loop.call_soon_threadsafe(_resolve, done)

    threading.Thread(target=run, name=f"{conn.name}-reader", daemon=True).start()
    return done


async def open_pipes(conn: Connection, read_pipe: Any, write_pipe: Any) -> None:
    """Attach ``conn`` to two file objects (pipes, sockets, ttys; regular files via fallbacks)."""
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.connect_write_pipe(lambda: _WriteProtocol(conn), write_pipe)
        wt: asyncio.WriteTransport = transport
    except ValueError:  # not a pipe: a regular file
        wt = _BlockingWriteTransport(conn, os.dup(write_pipe.fileno()))
    try:
        rt, _ = await loop.connect_read_pipe(lambda: _ReadProtocol(conn), read_pipe)
        conn.attach(wt, closers=[rt.close])
    except ValueError:
        conn.attach(wt)
        _thread_reader(conn, read_pipe.fileno())


async def open_stdio(conn: Connection, *, protect_stdout: bool = True) -> None:
    """Attach ``conn`` to this process's stdin/stdout.

    With ``protect_stdout`` the protocol gets a private copy of fd 1, and fd 1 (with
    ``sys.stdout``) is pointed at stderr: a stray ``print`` or a library writing to stdout can
    no longer corrupt the message stream (the spec: nothing but ACP messages on stdout).
    """
    in_fd = os.dup(sys.stdin.fileno())
    out_fd = os.dup(sys.stdout.fileno())
    if protect_stdout:
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    reader = os.fdopen(in_fd, "rb", buffering=0)
    writer = os.fdopen(out_fd, "wb", buffering=0)
    await open_pipes(conn, reader, writer)


class _StreamWriteTransport(asyncio.WriteTransport):
    """Presents an ``asyncio.StreamWriter`` as a transport with flow control callbacks."""

    def __init__(self, conn: Connection, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._conn = conn
        self._writer = writer

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._writer.write(data)
        inner = self._writer.transport
        if inner.get_write_buffer_size() > inner.get_write_buffer_limits()[1]:
            self._conn.pause_writing()
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._conn.write_lost(exc)
            return
        self._conn.resume_writing()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()


async def open_streams(conn: Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Attach ``conn`` to an asyncio stream pair; a pump task feeds it."""

    async def pump() -> None:
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                conn.feed_data(data)
        except (ConnectionError, OSError):
            pass
        conn.feed_eof()

    task = asyncio.get_running_loop().create_task(pump(), name=f"{conn.name}-pump")
    conn.attach(_StreamWriteTransport(conn, writer), closers=[task.cancel])
