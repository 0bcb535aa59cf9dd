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
editor still waits for is answered, and the proxy exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..aio import connect_read_pipe, connect_write_pipe
from ..core import LadderPolicy, LineFramer, OversizedLine, parse_json
from ..remote import ServedConnection, SubprocessBackend
from ._guard import GuardSettings, ProxyGuard

if TYPE_CHECKING:
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
    """One editor, one agent (see the module docstring)."""

    def __init__(
        self, served: ServedConnection, out: asyncio.WriteTransport, settings: ProxySettings
    ) -> None:
        self.served = served
        self.out = out
        self.guard = ProxyGuard(served, self._write, settings.guard)
        self.agent_ended_first = False
        self._loop = asyncio.get_running_loop()
        self._batch: list[bytes] = []
        served.on_end.append(self._on_end)

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
            self.served.backend.send(item)
            return
        try:
            self.guard.from_editor(item, message)
        except Exception:
            logger.exception("the guard failed on a message from the editor; forwarded unchanged")
            self.served.from_client(item, message)

    def stop(self, reason: str) -> None:
        """The editor is gone (or asked us to stop): end the relay, which reaps the agent."""
        if not self.served.ending:
            self.guard.editor_gone = True
            logger.info("%s: ending the agent", reason)
            self.served.end(reason)

    def _on_end(self, reason: str, code: int) -> None:
        if not self.guard.editor_gone:
            self.agent_ended_first = True
            logger.warning("%s", reason)
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
    or the agent ends; returns the exit code (``EXIT_*``)."""
    settings = settings or ProxySettings()
    try:
        backend = await SubprocessBackend.spawn(
            command, "agent", max_message_bytes=settings.max_message_bytes
        )
    except OSError as exc:
        logger.error("cannot start the agent %r: %s", command[0] if command else "", exc.strerror or exc)
        return EXIT_NO_AGENT
    served = ServedConnection(
        "proxy",
        backend,
        LadderPolicy(settings.guard.cancel_budget),
        "stdio",
        max_backlog=settings.max_message_bytes * 4,
        trace=trace,
    )
    out_protocol = _EditorOut()
    out = await connect_write_pipe(lambda: out_protocol, stdout if stdout is not None else sys.stdout.buffer)
    proxy = Proxy(served, out, settings)
    out_protocol.served = served
    out_protocol.proxy = proxy
    served.start()
    in_transport = await connect_read_pipe(
        lambda: _EditorIn(proxy, settings.max_message_bytes), stdin if stdin is not None else sys.stdin.buffer
    )
    if started is not None and not started.done():
        started.set_result(proxy)
    try:
        await served.wait_ended()
    finally:
        in_transport.close()
        proxy.guard.close()
        proxy.flush()
        await _flush(out, out_protocol)
    _summary(proxy)
    return EXIT_AGENT_ENDED if proxy.agent_ended_first else EXIT_OK


async def _flush(out: asyncio.WriteTransport, protocol: _EditorOut) -> None:
    """What the editor is still owed is written before we exit (bounded: it may not read)."""
    if not out.is_closing():
        out.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_FLUSH_TIMEOUT):
            await protocol.lost


def _summary(proxy: Proxy) -> None:
    stats = proxy.guard.stats
    escalated = ", ".join(f"{rung} {n}" for rung, n in sorted(stats.escalated.items())) or "none"
    logger.warning(
        "exit: %d messages to the agent, %d to the editor; %d cancels (escalated: %s; %d by silence); "
        "%d answers given here, %d late answers dropped, %d ends rewritten cancelled, %d late updates "
        "fenced; agent: %s",
        stats.to_agent,
        stats.to_editor,
        stats.cancels,
        escalated,
        stats.silenced,
        stats.answered_here,
        stats.late_dropped,
        stats.rewritten,
        stats.fenced,
        proxy.served.backend.describe(),
    )
