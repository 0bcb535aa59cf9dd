"""One owner of a child process that speaks a protocol on its stdin/stdout.

``AgentProcess.spawn`` is the single place where a peer process is started and tied to a
``Connection``: the child leads its own process group (``ProcessGroup``; on Linux under a
supervisor that owns every descendant, ``setsid`` ones included), its stdout/stdin
become the connection's NDJSON transport, its stderr is drained for ever into a bounded
``StderrTail`` (a child whose stderr pipe fills up blocks), its exit is watched, and ``reap``
ends the whole group. The host driver, ``acp-driver check`` and the tests all use it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..core import TERM_GRACE
from ._connection import Connection
from ._ndjson import open_pipes
from ._process import ProcessGroup
from ._stderr import StderrTail, drain_pipe

if TYPE_CHECKING:
    from ..trace import TraceSink


class AgentProcess:
    """A child in its own process group, attached to a connection (see the module docstring)."""

    def __init__(self, process: ProcessGroup, connection: Connection, stderr: StderrTail) -> None:
        self.process = process
        self.connection = connection
        self.stderr = stderr
        self._stderr_transport: asyncio.BaseTransport | None = None

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        connection: Connection,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: StderrTail | None = None,
        on_stderr_eof: Callable[[], None] | None = None,
        supervise: bool | None = None,
        trace: TraceSink | None = None,
    ) -> AgentProcess:
        """Start ``argv`` and attach ``connection`` to it (raises ``OSError`` if it cannot start).

        ``supervise``: under the supervisor that owns its whole process tree (the default where
        available, see ``ProcessGroup``); False starts it directly (its process group only).
        ``trace`` records the spawn, every signal sent to the group and the exit.
        """
        process = await ProcessGroup.aspawn(argv, cwd=cwd, env=env, supervise=supervise)
        if trace is not None:
            process.observe(trace, argv)
        tail = stderr if stderr is not None else StderrTail(connection.name)
        child = cls(process, connection, tail)
        popen = process.popen
        assert popen.stdin is not None
        assert popen.stdout is not None
        assert popen.stderr is not None
        try:
            await open_pipes(connection, popen.stdout, popen.stdin)
            child._stderr_transport = await drain_pipe(
                popen.stderr, tail.feed, on_stderr_eof if on_stderr_eof is not None else tail.mark_closed
            )
        except BaseException:
            process.kill()
            await process.reap(term_timeout=0)
            raise
        return child

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        return await self.process.wait()

    def on_exit(self, callback: Callable[[int], object]) -> None:
        self.process.on_exit(callback)

    def terminate(self) -> bool:
        """SIGTERM to the whole group."""
        return self.process.terminate()

    def kill(self) -> bool:
        """SIGKILL to the whole group."""
        return self.process.kill()

    async def reap(self, *, term_timeout: float = TERM_GRACE) -> int:
        """End the child and its whole group (TERM, then KILL after ``term_timeout``); no zombie."""
        return await self.process.reap(term_timeout=term_timeout)

    def close_stderr(self) -> None:
        """Stop reading stderr (once the child is gone: its last lines are in the tail)."""
        if self._stderr_transport is not None:
            self._stderr_transport.close()
            self._stderr_transport = None
