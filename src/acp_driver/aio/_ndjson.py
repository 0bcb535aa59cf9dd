"""NDJSON transports: newline-delimited messages over OS pipes, stdio and asyncio streams.

``NdjsonTransport`` implements the message-level ``Transport`` over any asyncio byte write
transport: it frames what it sends (one line per message) and splits what it reads into lines
with the core's ``LineFramer``. Pipes use asyncio's pipe transports directly (no task per
message); regular files and devices such as ``/dev/null``, which epoll cannot watch, fall back
to a reader thread and blocking writes; any ``StreamReader``/``StreamWriter`` pair works through
a pump task.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import LineFramer
from ._stderr import connect_read_pipe, connect_write_pipe
from ._transport import TransportReceiver

if TYPE_CHECKING:
    from ._connection import Connection

READ_CHUNK = 256 * 1024
"""How much a reader thread or a stream pump asks for per read."""
PIPE_READ_BYTES = 32 * 1024
"""How much one read of a pipe asks for. A pipe holds 64 KiB (Linux's default), so a bigger read
brings nothing more, and asyncio's default of 256 KiB costs every read a buffer too big for the
heap: ``mmap``, page faults, ``mremap``, ``munmap`` -- about ten times what the write and the read
themselves cost (``benchmarks/pipe_read.py``). A buffer of this size comes from the heap: no
syscall besides the ``read``. Half a pipe, not all of it: every message of a read is parsed
before the first is used, so a smaller read keeps what it parsed in the processor's cache (the
host's update stream runs ~8 % faster than with 64 KiB reads; docs/benchmarks.md)."""


class NdjsonTransport:
    """Newline-delimited JSON over a byte transport (see the module docstring)."""

    __slots__ = ("_closed", "_closers", "_framer", "_receiver", "_write")

    def __init__(
        self,
        receiver: TransportReceiver,
        write: asyncio.WriteTransport,
        closers: list[Callable[[], object]] | None = None,
    ) -> None:
        self._receiver = receiver
        self._write = write
        self._framer = LineFramer(receiver.max_message_bytes)
        self._closers = closers or []
        self._closed = False

    # -- Transport

    def send(self, messages: list[bytes]) -> None:
        # Each message already ends with its newline (see ``core.Endpoint.messages_to_send``).
        self._write.write(messages[0] if len(messages) == 1 else b"".join(messages))

    def close_write(self) -> None:
        self._write.close()

    def close(self) -> None:
        if not self._write.is_closing():
            self._write.close()
        if not self._closed:
            self._closed = True
            for closer in self._closers:
                closer()

    def is_closing(self) -> bool:
        return self._write.is_closing()

    # -- bytes in

    def data_received(self, data: bytes) -> None:
        items = self._framer.feed(data)
        if items:
            self._receiver.feed_messages(items)

    def eof_received(self) -> None:
        items = self._framer.feed(b"")  # a last line without its newline is still a message
        if items:
            self._receiver.feed_messages(items)
        self._receiver.feed_eof()

    def add_closer(self, closer: Callable[[], object]) -> None:
        self._closers.append(closer)


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, transport: NdjsonTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._transport.data_received(data)

    def eof_received(self) -> bool | None:
        self._transport.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport.eof_received()


class _WriteProtocol(asyncio.BaseProtocol):
    def __init__(self, receiver: TransportReceiver) -> None:
        self._receiver = receiver

    def pause_writing(self) -> None:
        self._receiver.pause_writing()

    def resume_writing(self) -> None:
        self._receiver.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._receiver.write_lost(exc)


class _BlockingWriteTransport(asyncio.WriteTransport):
    """Blocking writes to a file asyncio cannot watch (a regular file as stdout)."""

    def __init__(self, receiver: TransportReceiver, fd: int) -> None:
        super().__init__()
        self._receiver = receiver
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
            self._receiver.write_lost(exc)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def get_write_buffer_size(self) -> int:
        return 0


def _thread_reader(transport: NdjsonTransport, file: Any, name: str) -> None:
    """Read ``file`` in a thread (for regular files and devices) and feed the transport.

    The thread holds ``file`` until it is done: were it collected (the caller's reference gone),
    its descriptor would close under the thread, which then read nothing at all.
    """
    loop = asyncio.get_running_loop()

    def run() -> None:
        fd = file.fileno()
        try:
            while True:
                data = os.read(fd, READ_CHUNK)
                if not data:
                    break
                loop.call_soon_threadsafe(transport.data_received, data)
        except (OSError, RuntimeError):
            pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(transport.eof_received)

    threading.Thread(target=run, name=f"{name}-reader", daemon=True).start()


def _pollable(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket or a terminal.

    asyncio's pipe transports also accept other character devices, but epoll refuses them
    (``/dev/null`` gives EPERM, in a callback): the transport would never read, and an agent
    started with ``< /dev/null`` would wait forever instead of seeing end of input.
    """
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def open_pipes(conn: Connection, read_pipe: Any, write_pipe: Any) -> NdjsonTransport:
    """Attach ``conn`` to two file objects: pipes, sockets and terminals through the event loop;
    anything else (regular files, ``/dev/null``) through a reader thread and blocking writes."""
    wt: asyncio.WriteTransport
    if _pollable(write_pipe.fileno()):
        wt = await connect_write_pipe(lambda: _WriteProtocol(conn), write_pipe)
    else:
        wt = _BlockingWriteTransport(conn, os.dup(write_pipe.fileno()))
    transport = NdjsonTransport(conn, wt)
    # Attached before anything is read: a loop may deliver data while ``connect_read_pipe`` is
    # still being awaited (uvloop does), and what it answers must find the outbox ready.
    conn.attach(transport)
    try:
        if _pollable(read_pipe.fileno()):
            rt = await connect_read_pipe(lambda: _ReadProtocol(transport), read_pipe)
            transport.add_closer(rt.close)
            if hasattr(rt, "max_size"):
                # asyncio's pipe transport reads ``max_size`` bytes at a time (CPython 3.11-3.13;
                # other loops, such as uvloop, size their reads themselves).
                rt.max_size = PIPE_READ_BYTES
        else:
            _thread_reader(transport, read_pipe, conn.name)
    except BaseException:
        # Nothing of the peer will ever be read: the connection ends as if its output had, and
        # the write side is let go (no connection left open on a half-made transport).
        transport.close()
        conn.feed_eof()
        raise
    return transport


async def open_stdio(conn: Connection, *, protect_stdout: bool = True) -> NdjsonTransport:
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
    return await open_pipes(conn, reader, writer)


class _StreamWriteTransport(asyncio.WriteTransport):
    """Presents an ``asyncio.StreamWriter`` as a transport with flow control callbacks."""

    def __init__(self, receiver: TransportReceiver, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._receiver = receiver
        self._writer = writer

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._writer.write(data)
        inner = self._writer.transport
        if inner.get_write_buffer_size() > inner.get_write_buffer_limits()[1]:
            self._receiver.pause_writing()
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._receiver.write_lost(exc)
            return
        self._receiver.resume_writing()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()


async def open_streams(
    conn: Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> NdjsonTransport:
    """Attach ``conn`` to an asyncio stream pair; a pump task feeds it."""
    transport = NdjsonTransport(conn, _StreamWriteTransport(conn, writer))

    async def pump() -> None:
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                transport.data_received(data)
        except (ConnectionError, OSError):
            pass
        transport.eof_received()

    task = asyncio.get_running_loop().create_task(pump(), name=f"{conn.name}-pump")
    transport.add_closer(task.cancel)
    conn.attach(transport)
    return transport
