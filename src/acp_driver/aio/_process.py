"""Child processes in their own process group: spawned, drained, watched, killed, reaped.

- Spawned with ``start_new_session=True``: the child leads a new session and process group, so
  signals reach it and everything it started (``npx`` -> node -> native binary).
- Exit is detected by waiting on the process (a pidfd on Linux, else a waiter thread), never by
  the end of its output: a grandchild may hold stdout open after the child died.
- ``terminate``/``kill`` signal the whole group; ``reap`` makes sure the child is waited for
  and no member of its group is left (SIGKILL for stragglers). No zombie, no orphan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

logger = logging.getLogger("acp_driver.process")


class ProcessGroup:
    """A child process leading its own process group."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the child leads its group
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._exit_callbacks: list[Callable[[int], object]] = []
        self._watch()

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.PIPE,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        pass_fds: Sequence[int] = (),
    ) -> ProcessGroup:
        """Start ``argv`` in a new session (raises ``OSError`` if it cannot start)."""
        popen = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
        return cls(popen)

    # ------------------------------------------------------------------ exit

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._watch_with_thread(loop)
            return

        def on_readable() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._set_exited(self.popen.wait())

        loop.add_reader(pidfd, on_readable)

    def _watch_with_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        def wait() -> None:
            code = self.popen.wait()
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(self._set_exited, code)

        threading.Thread(target=wait, name=f"wait-{self.pid}", daemon=True).start()

    def _set_exited(self, code: int) -> None:
        if self._exited.done():
            return
        self._exited.set_result(code)
        for callback in self._exit_callbacks:
            try:
                callback(code)
            except Exception:
                logger.exception("exit callback failed")

    def on_exit(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(returncode)`` when the process exits (at once if it already has)."""
        if self._exited.done():
            callback(self._exited.result())
        else:
            self._exit_callbacks.append(callback)

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while running."""
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    # ------------------------------------------------------------------ signals

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to every process of the group; False if none is left."""
        try:
            os.killpg(self.pgid, sig)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - the group leader changed hands
            return False

    def terminate(self) -> bool:
        return self.signal_group(signal.SIGTERM)

    def kill(self) -> bool:
        return self.signal_group(signal.SIGKILL)

    def group_alive(self) -> bool:
        """Whether any process of the group still exists."""
        return self.signal_group(0)

    async def reap(self, *, term_timeout: float = 1.0) -> int:
        """End the process and its whole group: SIGTERM, then SIGKILL after ``term_timeout``.

        Returns the exit status. Safe to call at any time, any number of times.
        """
        if self.returncode is None:
            self.terminate()
            try:
                async with asyncio.timeout(term_timeout):
                    await self.wait()
            except TimeoutError:
                self.kill()
        code = await self.wait()
        self._kill_stragglers()
        return code

    def kill_stragglers(self) -> None:
        """The leader is gone: SIGKILL whatever of its group outlived it (grandchildren)."""
        self._kill_stragglers()

    def _kill_stragglers(self) -> None:
        # The leader is gone; members that outlived it (grandchildren) are killed outright.
        if self.group_alive():
            self.kill()

    def __repr__(self) -> str:
        return f"ProcessGroup(pid={self.pid}, returncode={self.returncode})"


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
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(lambda: _DrainProtocol(on_data, on_eof), pipe)
    return transport


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
