"""The proxy's stdio front: the editor on our stdin/stdout, the agent behind serve's relay.

The agent is started as ``serve`` starts one (``remote.SubprocessBackend``: its own process
group under the supervisor, so neither a kill nor our own death leaves a descendant), and the
relay (``remote.ServedConnection``) carries every message both ways; ``_guard.ProxyGuard`` adds
the editor's guarantees in between. The editor's lines are framed by the core's ``LineFramer``;
a full stdout (an editor that reads slowly) pauses the agent's output, the way a full outlet
does for ``serve``.

The end: the editor closes our stdin (or dies, or signals us: ``stop``) -> the relay's
connection-end ladder (session/cancel for live turns, then the agent's input closed, SIGTERM,
SIGKILL within the budget) and the agent reaped; the agent ends first -> every request the
editor still waits for is answered, and a new agent is started (at most ``max_respawns`` times):
the editor's ``initialize`` replayed, its sessions re-opened (``_book``), its messages held
meanwhile and then relayed to the new agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from .._install import install_extra
from ..aio import Clock, connect_read_pipe, connect_write_pipe
from ..core import LadderPolicy, LineFramer, OversizedLine, encode_relayed, parse_json
from ..net import is_url
from ..remote import ServedConnection, SubprocessBackend
from ._book import SessionBook
from ._conductor import INITIALIZE_METHODS, ConductorBackend
from ._guard import GuardSettings, ProxyGuard, Stats
from ._network import NetworkBackend

if TYPE_CHECKING:
    from ..remote import Backend
    from ..trace import TraceSink

logger = logging.getLogger("acp_driver.proxy")

EXIT_OK = 0
"""The editor ended the connection and the agent was reaped."""
EXIT_AGENT_ENDED = 1
"""The agent ended (exited, crashed, or was killed by the ladder) while the editor was connected."""
EXIT_NO_AGENT = 127
"""The agent could not be started."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_FLUSH_TIMEOUT = 5.0


@dataclass(frozen=True)
class ProxySettings:
    """How the proxy runs its agent (the CLI's options)."""

    guard: GuardSettings = field(default_factory=GuardSettings)
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_respawns: int = 3
    """How many times an agent that ended while the editor was connected is restarted."""
    reattach_timeout: float = 30.0
    """Seconds a restarted agent has to answer each replayed ``initialize`` / session re-open."""
    clock: Clock | None = None
    """What the ladder, the graces and the silence timeout run on (the loop's; a fake one in tests)."""


class _EditorOut(asyncio.Protocol):
    """Our stdout: a full pipe pauses the agent's output (``output_pressure``); its loss (the
    editor closed its reading end: Node's socket pairs say so before any end of our input) ends
    the connection as the end of our input does."""

    def __init__(self) -> None:
        self.served: ServedConnection | None = None
        self.proxy: Proxy | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        if self.served is not None:
            self.served.output_pressure(self, True)

    def resume_writing(self) -> None:
        if self.served is not None:
            self.served.output_pressure(self, False)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        if self.proxy is not None:
            self.proxy.stop("the editor stopped reading")


class _EditorIn(asyncio.Protocol):
    """Our stdin, line by line, to the guard; its end ends the connection."""

    def __init__(self, proxy: Proxy, max_message_bytes: int) -> None:
        self._proxy = proxy
        self._framer = LineFramer(max_message_bytes)

    def data_received(self, data: bytes) -> None:
        for item in self._framer.feed(data):
            self._proxy.from_editor(item)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        for item in self._framer.feed(b""):
            self._proxy.from_editor(item)
        self._proxy.stop("the editor closed the connection")


class Proxy:
    """One editor, its agent, and the agents that replace it (see the module docstring)."""

    def __init__(
        self,
        command: list[str],
        out: asyncio.WriteTransport,
        settings: ProxySettings,
        trace: TraceSink | None = None,
    ) -> None:
        self.command = command
        self.out = out
        self.settings = settings
        self.trace = trace
        self.book = SessionBook()
        self.stats = Stats()
        self.served: ServedConnection | None = None
        self.guard: ProxyGuard | None = None
        self.editor_gone = False
        self.agent_ended_first = False
        self.respawns = 0
        self._queue: list[tuple[bytes, Any]] | None = None
        """The editor's messages while a respawned agent is brought back (None: none waits)."""
        self._loop = asyncio.get_running_loop()
        self._batch: list[bytes] = []
        self._out_protocol: _EditorOut | None = None
        self.successor: ConductorBackend | None = None
        """In a conductor's chain: the successor's side of our one channel."""

    @property
    def in_chain(self) -> bool:
        """No agent command: the proxy sits in a conductor's chain (``_conductor``)."""
        return not self.command

    async def spawn(self) -> bool:
        """Start an agent and its relay (a first one, or one in place of an agent that ended)."""
        backend: Backend
        if self.in_chain:
            backend = self.successor = ConductorBackend(self._write)
        elif len(self.command) == 1 and is_url(self.command[0]):
            try:
                backend = await NetworkBackend.connect(
                    self.command[0], max_message_bytes=self.settings.max_message_bytes
                )
            except ImportError as exc:
                logger.error("a remote agent needs the remote extra (%s): %s", install_extra("remote"), exc)
                return False
            except (OSError, ValueError) as exc:  # TimeoutError is an OSError
                logger.error("cannot connect to the agent at %s: %s", self.command[0], exc)
                return False
        else:
            try:
                backend = await SubprocessBackend.spawn(
                    self.command, "agent", max_message_bytes=self.settings.max_message_bytes
                )
            except OSError as exc:
                logger.error("cannot start the agent %r: %s", self.command[0], exc.strerror or exc)
                return False
        served = ServedConnection(
            "proxy",
            backend,
            LadderPolicy(self.settings.guard.cancel_budget),
            "stdio",
            max_backlog=self.settings.max_message_bytes * 4,
            trace=self.trace,
            clock=self.settings.clock,
        )
        self.guard = ProxyGuard(
            served, self._write, self.settings.guard, book=self.book, stats=self.stats, before=self.guard
        )
        self.served = served
        if self._out_protocol is not None:
            self._out_protocol.served = served
        served.on_end.append(self._on_end)
        served.start()
        if self.editor_gone:
            self.guard.editor_gone = True
            served.end("the editor closed the connection")  # while this agent was starting
        return True

    async def run(self) -> int:
        """Until the editor ends, or the agent does and may not be restarted; the exit code."""
        while True:
            assert self.served is not None
            await self.served.wait_ended()
            if self.editor_gone:
                return EXIT_OK
            if self.in_chain or self.respawns >= self.settings.max_respawns:
                self.agent_ended_first = True
                return EXIT_AGENT_ENDED
            self.respawns += 1
            self.stats.respawns += 1
            logger.warning(
                "restarting the agent (%d of at most %d)", self.respawns, self.settings.max_respawns
            )
            self._queue = []
            if not await self.spawn():
                self.agent_ended_first = True
                return EXIT_AGENT_ENDED
            await self._reattach()
            queued, self._queue = self._queue or [], None
            for text, message in queued:
                self._to_guard(text, message)

    async def _reattach(self) -> None:
        """The new agent gets the editor's ``initialize`` again, and each open session is
        re-opened under its id (``_book``); a session that cannot be is lost, with the reason."""
        guard, served, book = self.guard, self.served, self.book
        assert guard is not None
        assert served is not None
        if book.initialize is None or self.editor_gone:
            return
        ended = self._loop.create_task(served.wait_ended())
        try:
            answer = await self._own(guard.request_own(p.INITIALIZE, book.initialize), ended)
            result = answer.get("result") if answer is not None else None
            if not isinstance(result, dict):
                why = (answer or {}).get("error", {}).get("message", "no answer")
                served.end(f"the restarted agent did not accept initialize ({why})")  # another try
                return
            caps = result.get("agentCapabilities")
            book.capabilities = caps if isinstance(caps, dict) else {}
            method = book.reopen_method(guard.profile)
            for sid, params in list(book.sessions.items()):
                if method is None:
                    book.lose(sid, "the agent was restarted and cannot resume sessions; open a new one")
                    logger.warning("session %s lost: the agent cannot resume sessions", sid)
                    continue
                guard.reopening.add(sid)
                answer = await self._own(guard.request_own(method, {"sessionId": sid, **params}), ended)
                guard.reopening.discard(sid)
                if answer is not None and "result" in answer:
                    self.stats.resumed += 1
                    logger.warning("session %s resumed (%s)", sid, method)
                else:
                    why = (answer or {}).get("error", {}).get("message", "no answer")
                    book.lose(
                        sid, f"the restarted agent did not re-open it ({method}: {why}); open a new one"
                    )
                    logger.warning("session %s lost: %s failed: %s", sid, method, why)
        finally:
            ended.cancel()

    async def _own(
        self, request: asyncio.Future[dict[str, Any] | None], ended: asyncio.Future[None]
    ) -> dict[str, Any] | None:
        """The answer to one of the proxy's own requests (None: the agent ended, or took too long)."""
        waited: set[asyncio.Future[Any]] = {request, ended}
        done, _ = await asyncio.wait(
            waited, timeout=self.settings.reattach_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if request in done:
            return request.result()
        request.cancel()
        return None

    def _write(self, text: bytes) -> None:
        # The messages of one read of the agent's output go out in one write (one system call,
        # not one per line): the loop runs ``flush`` once the read was delivered.
        if not self._batch:
            self._loop.call_soon(self.flush)
        self._batch.append(text)

    def flush(self) -> None:
        """Write what waits for the editor."""
        batch, self._batch = self._batch, []
        if batch and not self.out.is_closing():
            batch.append(b"")
            self.out.write(b"\n".join(batch))

    def from_editor(self, item: bytes | OversizedLine) -> None:
        if isinstance(item, OversizedLine):
            logger.warning("the editor sent a message of %d bytes (limit %d): dropped", item.size, item.limit)
            return
        try:
            message: Any = parse_json(item)
        except ValueError:
            # Not JSON: the agent answers it as it would have (a parse error); forwarded as is.
            if self.served is not None:
                self.served.backend.send(item)
            return
        successor = self.successor
        if successor is not None:
            if successor.owns(message):
                successor.from_conductor(message)
                return
            if isinstance(message, dict) and message.get("method") in INITIALIZE_METHODS:
                message["method"] = p.INITIALIZE  # the chain's initialize: ours to relay on
                item = encode_relayed(message)
        if self._queue is not None:
            self._queue.append((item, message))  # a new agent is being brought back
            return
        self._to_guard(item, message)

    def _to_guard(self, item: bytes, message: Any) -> None:
        guard = self.guard
        assert guard is not None
        try:
            guard.from_editor(item, message)
        except Exception:
            logger.exception("the guard failed on a message from the editor; forwarded unchanged")
            guard.served.from_client(item, message)

    def stop(self, reason: str) -> None:
        """The editor is gone (or asked us to stop): end the relay, which reaps the agent."""
        if self.editor_gone:
            return
        self.editor_gone = True
        logger.info("%s: ending the agent", reason)
        if self.guard is not None:
            self.guard.editor_gone = True
        if self.served is not None:
            self.served.end(reason)
        if self.successor is not None:
            self.successor.ended()  # the conductor's channel is the successor's too

    def _on_end(self, reason: str, code: int) -> None:
        if not self.editor_gone:
            logger.warning("%s", reason)
        if self.guard is not None:
            self.guard.close()


async def run_proxy(
    command: list[str],
    settings: ProxySettings | None = None,
    *,
    trace: TraceSink | None = None,
    stdin: Any = None,
    stdout: Any = None,
    started: asyncio.Future[Proxy] | None = None,
) -> int:
    """Run ``command`` as the agent behind our stdin/stdout (or the given pipes) until the editor
    ends, or the agent does and may not be restarted; returns the exit code (``EXIT_*``)."""
    settings = settings or ProxySettings()
    out_protocol = _EditorOut()
    out = await connect_write_pipe(lambda: out_protocol, stdout if stdout is not None else sys.stdout.buffer)
    proxy = Proxy(command, out, settings, trace)
    proxy._out_protocol = out_protocol
    out_protocol.proxy = proxy
    if not await proxy.spawn():
        out.close()
        return EXIT_NO_AGENT
    in_transport = await connect_read_pipe(
        lambda: _EditorIn(proxy, settings.max_message_bytes), stdin if stdin is not None else sys.stdin.buffer
    )
    if started is not None and not started.done():
        started.set_result(proxy)
    try:
        code = await proxy.run()
    finally:
        in_transport.close()
        if proxy.guard is not None:
            proxy.guard.close()
        if proxy.served is not None and not proxy.served.ending:
            proxy.served.end("the proxy is stopping")
        if proxy.served is not None:
            await proxy.served.wait_ended()
        proxy.flush()
        await _flush(out, out_protocol)
    _summary(proxy)
    return code


async def _flush(out: asyncio.WriteTransport, protocol: _EditorOut) -> None:
    """What the editor is still owed is written before we exit (bounded: it may not read)."""
    if not out.is_closing():
        out.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_FLUSH_TIMEOUT):
            await protocol.lost


def _summary(proxy: Proxy) -> None:
    stats = proxy.stats
    escalated = ", ".join(f"{rung} {n}" for rung, n in sorted(stats.escalated.items())) or "none"
    logger.warning(
        "exit: %d messages to the agent, %d to the editor; %d cancels (escalated: %s; %d by silence); "
        "%d answers given here, %d late answers dropped, %d ends rewritten cancelled, %d late updates "
        "fenced; %d restarts, %d sessions resumed; agent: %s",
        stats.to_agent,
        stats.to_editor,
        stats.cancels,
        escalated,
        stats.silenced,
        stats.answered_here,
        stats.late_dropped,
        stats.rewritten,
        stats.fenced,
        stats.respawns,
        stats.resumed,
        proxy.served.backend.describe() if proxy.served is not None else "never started",
    )
