"""The CLI's stdin, read line by line without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys


class StdinLines:
    """Lines from stdin, read without blocking the loop (and so cancellable).

    A pipe or a terminal is watched by the loop; a regular file or ``/dev/null`` cannot be (epoll
    refuses them) but never blocks either, so it is read when a line is asked for. Bytes that are
    not UTF-8 become U+FFFD."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._buf = b""
        self._fd = sys.stdin.fileno() if sys.stdin is not None else -1
        self._eof = False
        self._watched = False
        if self._fd < 0:
            self._end()
            return
        try:
            self._loop.add_reader(self._fd, self._readable)
        except (OSError, ValueError):  # a regular file, /dev/null, a closed fd: read on demand
            pass
        else:
            self._watched = True

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end()
            return
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self._lines.put_nowait(line.decode("utf-8", "replace"))

    def _end(self) -> None:
        if self._watched:
            self._loop.remove_reader(self._fd)
            self._watched = False
        self._eof = True
        if self._buf:
            self._lines.put_nowait(self._buf.decode("utf-8", "replace"))
            self._buf = b""
        self._lines.put_nowait(None)

    async def readline(self) -> str | None:
        """The next line, or None at end of input."""
        while not self._watched and not self._eof and self._lines.empty():
            self._readable()  # a file: this read does not block
        if self._eof and self._lines.empty():
            return None
        return await self._lines.get()

    def close(self) -> None:
        if self._watched:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)
            self._watched = False


def interactive() -> bool:
    # A closed stdin (``<&-``) leaves sys.stdin None: not interactive, and read as empty.
    return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
