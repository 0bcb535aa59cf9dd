"""A stdio agent subprocess behind a served connection: its stdin/stdout relayed byte for byte.

The process is owned the way ``launch`` owns it (``aio.ProcessGroup``: its own process group,
under the supervisor on Linux, so a kill leaves no descendant), its stderr is drained into a
bounded ``StderrTail`` (logged under ``acp_driver.stderr.<connection>`` at debug level, its last
lines logged when the agent ends badly), and its stdout is split into lines by the core's
``LineFramer`` (a line over the size limit is dropped and reported, never buffered without end).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..aio import (
    Clock,
    LoopClock,
    ProcessGroup,
    StderrTail,
    connect_read_pipe,
    connect_write_pipe,
    drain_pipe,
    exit_description,
)
from ..core import OUTPUT_GRACE, LineFramer, OversizedLine
from ._backend import Backend, Deliver

if TYPE_CHECKING:
    from ..trace import TraceSink

logger = logging.getLogger("acp_driver.remote.relay")


class _StdoutProtocol(asyncio.Protocol):
    """The agent's stdout, line by line. Paused, it holds the lines of a read already made and
    delivers them, in order, when resumed: a loop may have read more than the client's room
    (uvloop reads a pipe in bigger pieces than asyncio's 64 KiB), and the outlet's limit is for
    a client that does not read, not for the size of one read. Its end waits for them too."""

    def __init__(self, framer: LineFramer) -> None:
        self._framer = framer
        self._deliver: Deliver = _not_started
        self._eof: Callable[[], None] | None = None
        self._ended = False
        self._held: collections.deque[bytes | OversizedLine] = collections.deque()
        self.paused = False
        """The backend's one pause flag: set by ``pause_output`` (also before the pipe is read)."""

    def bind(self, deliver: Deliver, eof: Callable[[], None]) -> None:
        """Where lines go, and what to call once the output ended and all of it was delivered."""
        self._deliver = deliver
        self._eof = eof

    def data_received(self, data: bytes) -> None:
        self._pass(self._framer.feed(data))

    def connection_lost(self, exc: Exception | None) -> None:
        self._pass(self._framer.feed(b""))
        self._ended = True
        self._end_once_delivered()

    def resume(self) -> None:
        self.paused = False
        held = self._held
        while held and not self.paused:  # a delivery may pause it again
            self._deliver(held.popleft())
        self._end_once_delivered()

    def _pass(self, items: list[bytes | OversizedLine]) -> None:
        held = self._held
        for item in items:
            if self.paused or held:
                held.append(item)
            else:
                self._deliver(item)

    def _end_once_delivered(self) -> None:
        eof = self._eof
        if self._ended and not self._held and eof is not None:
            self._eof = None
            eof()


def _not_started(item: bytes | OversizedLine) -> None:
    raise RuntimeError("the relay delivered a line before it was started")


class _StdinProtocol(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self.lost = False
        self._then: list[Callable[[], object]] = []

    def connection_lost(self, exc: Exception | None) -> None:
        # The pipe is closed (by us, or the agent exited): what we write from now on is dropped.
        # asyncio closes the descriptor right after this returns: the callbacks run after that.
        self.lost = True
        then, self._then = self._then, []
        loop = asyncio.get_running_loop()
        for callback in then:
            loop.call_soon(callback)

    def when_lost(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the pipe's descriptor is closed (at once if it is)."""
        if self.lost:
            callback()
        else:
            self._then.append(callback)


class SubprocessBackend:
    """One agent process for one connection (see the module docstring)."""

    def __init__(self, process: ProcessGroup, name: str, max_message_bytes: int) -> None:
        self.process = process
        self.name = name
        self.argv: list[str] = []
        self.stderr = StderrTail(name)
        self._framer = LineFramer(max_message_bytes)
        self._stdin: asyncio.WriteTransport | None = None
        self._stdin_protocol = _StdinProtocol()
        self._stdout: asyncio.BaseTransport | None = None
        self._stdout_protocol = _StdoutProtocol(self._framer)
        self._stderr: asyncio.BaseTransport | None = None
        self._gone_called = False
        self._gone: Callable[[], None] | None = None
        self._output_ended = False

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], name: str, *, max_message_bytes: int, clock: Clock | None = None
    ) -> SubprocessBackend:
        """Start ``argv``; its exit's grace for the output, and its reaping, run on ``clock``
        (the server's; the loop's by default)."""
        process = await ProcessGroup.aspawn(argv)
        process.clock = clock
        backend = cls(process, name, max_message_bytes)
        backend.argv = list(argv)
        popen = process.popen
        assert popen.stdin is not None
        assert popen.stderr is not None
        try:
            backend._stdin = await connect_write_pipe(lambda: backend._stdin_protocol, popen.stdin)
            backend._stderr = await drain_pipe(popen.stderr, backend.stderr.feed, backend.stderr.mark_closed)
        except BaseException:
            if backend._stdin is not None:
                backend._stdin.close()
            process.kill()
            await process.reap(term_timeout=0)
            raise
        return backend

    # -- Backend

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    def start(self, deliver: Deliver, gone: Callable[[], None]) -> None:
        self._gone = gone
        popen = self.process.popen
        assert popen.stdout is not None
        loop = asyncio.get_running_loop()

        def output_ended() -> None:
            self._output_ended = True
            self._call_gone()

        protocol = self._stdout_protocol
        protocol.bind(deliver, output_ended)

        async def connect() -> None:
            self._stdout = await connect_read_pipe(lambda: protocol, popen.stdout)
            if protocol.paused:
                self.pause_output()

        task = loop.create_task(connect())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        # Gone when its output ends; a descendant holding stdout open must not keep it alive
        # (supervised, descendants die with it, so this is a backstop): after its exit, what it
        # wrote is read for ``OUTPUT_GRACE`` more.
        clock = self.process.clock or LoopClock()
        self.process.on_exit(lambda _code: clock.call_at(clock.now() + OUTPUT_GRACE, self._call_gone))

    def _call_gone(self) -> None:
        if not self._gone_called and self._gone is not None:
            self._gone_called = True
            self._gone()

    def send(self, text: bytes) -> None:
        stdin = self._stdin
        if stdin is None or stdin.is_closing():
            return
        stdin.write(text + b"\n")

    def pause_output(self) -> None:
        self._stdout_protocol.paused = True  # the rest of a read already made is held, too
        stdout = self._stdout
        if isinstance(stdout, asyncio.ReadTransport) and not stdout.is_closing():
            stdout.pause_reading()

    def resume_output(self) -> None:
        protocol = self._stdout_protocol
        protocol.resume()  # what was held first: it was read first
        if protocol.paused:
            return  # it filled the client's room again
        stdout = self._stdout
        if isinstance(stdout, asyncio.ReadTransport) and not stdout.is_closing():
            stdout.resume_reading()

    @property
    def send_backlog(self) -> int:
        stdin = self._stdin
        return 0 if stdin is None or stdin.is_closing() else stdin.get_write_buffer_size()

    def close_input(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()

    def terminate(self) -> None:
        # SIGTERM finds the agent's input ended: closed by the rung's CLOSE_INPUT just before
        # (serve's connection end), else here (the proxy's turn ladder). A transport closes its
        # descriptor only on the loop's next turn, or once its buffer is written: the signal
        # waits for that close. What the agent did not read by now is dropped (a full pipe
        # would hold the close, and the signal, for ever).
        stdin = self._stdin
        if stdin is None:
            self.process.terminate()
            return
        if stdin.get_write_buffer_size():
            stdin.abort()
        elif not stdin.is_closing():
            stdin.close()
        self._stdin_protocol.when_lost(self.process.terminate)

    def kill(self) -> None:
        self.process.kill()

    async def wait_exited(self) -> None:
        await self.process.wait()

    async def release(self) -> None:
        code = await self.process.reap(term_timeout=0)
        for transport in (self._stdout, self._stderr):
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
        self.close_input()
        level = logging.DEBUG if code == 0 else logging.INFO
        logger.log(level, "%s: agent pid %d ended (%s)", self.name, self.process.pid, self.describe())

    def describe(self) -> str:
        return f"{exit_description(self.process.returncode)}; {self.stderr.describe()}"

    def observe(self, trace: TraceSink) -> None:
        self.process.observe(trace, self.argv)


def _check(backend: SubprocessBackend) -> Backend:
    return backend  # mypy: SubprocessBackend implements Backend
