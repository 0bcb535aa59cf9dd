"""One remote connection on the server: a client on one side, its own agent on the other.

Messages are forwarded untouched (each parsed once, with ``core.parse_json``, to keep ``_relay_ledger`` up to
date and to route it). The connection ends when the client goes (WebSocket close, HTTP DELETE,
a dropped network, the idle timeout) or the server shuts down; then the server does what the
client no longer can, through the cancel ladder (``core.ConnectionEndMachine``, budget ``B``,
run by the one ``aio.LadderRunner`` on the server's clock, with this connection as the
``PeerControl``):

    t = 0       the client's side is closed; the agent's pending ``session/request_permission``
                requests are answered ``cancelled``, its other pending requests an error (and
                so is every request it sends from now on); then every session with a
                ``session/prompt`` in flight gets ``session/cancel`` (answers first: the
                agent's code sees the outcome instead of a cancelled wait)
    t = B/2     ``$/cancel_request`` for each prompt still unanswered
    t = 3B/4    the agent's input closed and SIGTERM to its process group
    t = B       SIGKILL to its process group

Once no prompt is in flight the agent's input is closed at once (a stdio agent exits on EOF);
the later rungs still bound how long it may take. The agent is reaped before ``end``'s task ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from .. import protocol as p
from ..aio import Clock, LadderRunner, LoopClock, timeout_on
from ..core import (
    EXIT_WAIT,
    TERM_GRACE,
    CancelLadder,
    ConnectionEndMachine,
    LadderPolicy,
    Observation,
    OversizedLine,
    RequestId,
    Resolution,
    Rung,
    Seen,
    encode_relayed,
    parse_json,
    worth_logging,
)
from ._backend import Backend
from ._relay_ledger import RelayLedger, answer_for_gone_client

if TYPE_CHECKING:
    from ..trace import TraceSink

logger = logging.getLogger("acp_driver.remote.server")

OnMessage = Callable[[bytes, str], None]
"""A front-end's sink: (a message's JSON text, its route -- see ``_relay_ledger``)."""
OnRelayed = Callable[[bytes, Any, str], None]
"""A front-end's sink that also takes the parsed message: (JSON text, parsed value, route)."""
OnEnd = Callable[[str, int], object]
"""A front-end's hook when the connection ends: (reason, WebSocket close code)."""


class ServedConnection:
    """A client's connection and its agent (see the module docstring)."""

    def __init__(
        self,
        connection_id: str,
        backend: Backend,
        policy: LadderPolicy,
        kind: str,
        max_backlog: int,
        clock: Clock | None = None,
        *,
        trace: TraceSink | None = None,
    ) -> None:
        self.id = connection_id
        self.trace = trace
        """Records the messages both ways (``out``: to the agent), the ladder and the agent's
        process (``trace.bind(sink, conn=id)``), if anywhere."""
        self.max_backlog = max_backlog
        """Bytes written to the agent and not yet read by it before the connection is ended."""
        self.kind = kind
        """``websocket`` or ``http``."""
        self.streams_open = 0
        """Streamable HTTP: SSE streams attached now (an idle connection has none)."""
        self.backend = backend
        self.policy = policy
        self.inflight = RelayLedger()
        self.loop = asyncio.get_running_loop()
        self.clock: Clock = clock if clock is not None else LoopClock()
        """What the ladder and the idle rule measure time on (the server's)."""
        self.last_activity = self.clock.now()
        self.on_message: OnMessage | None = None
        self.on_relayed: OnRelayed | None = None
        """Set instead of ``on_message`` by a front-end that reads the message too (the proxy)."""
        self.on_end: list[OnEnd] = []
        self.on_reaped: list[Callable[[], object]] = []
        """Called once the agent is reaped (the server forgets the connection then)."""
        self.end_reason: str | None = None
        self.protocol_cap: int | None = None
        """``serve --protocol``: the highest version this connection may speak (None: any)."""
        self._machine = ConnectionEndMachine(policy, exit_wait=EXIT_WAIT)
        self._runner: LadderRunner | None = None
        self._end_task: asyncio.Task[None] | None = None
        self._reaped = asyncio.Event()
        self._malformed = 0
        self._pressing: set[object] = set()
        self.paused_since: float | None = None
        """When the agent's output was paused for a client that does not read (None: flowing)."""

    def start(self) -> None:
        if self.trace is not None:
            self.trace.event("connection_start", profile=self.kind, pid=self.backend.pid)
            self.backend.observe(self.trace)
        self.backend.start(self._from_agent, self._agent_gone)

    @property
    def ending(self) -> bool:
        return self._end_task is not None

    @property
    def ladder(self) -> CancelLadder | None:
        """The ladder run since the connection ended (None before)."""
        return self._machine.ladder

    # ------------------------------------------------------------------ client -> agent

    def from_client(self, text: bytes, message: Any) -> None:
        """A message from the client: ``text`` is its JSON, ``message`` the parsed value."""
        if self.ending:
            return
        self.last_activity = self.clock.now()
        self.inflight.from_client(message)
        try:
            if self.protocol_cap is not None and _asks_above(message, self.protocol_cap):
                # ``serve --protocol N``: the connection speaks at most N (the agent answers N or below).
                message["params"]["protocolVersion"] = self.protocol_cap
                text = encode_relayed(message)
            elif b"\n" in text or b"\r" in text:
                # Whitespace between tokens (a raw newline cannot sit inside a JSON string):
                # re-encode compactly so that the NDJSON agent sees one line.
                text = encode_relayed(message)
        except TypeError:  # nested too deep to encode again
            self.end("the client sent a message nested too deep to relay", 1007)
            return
        self.backend.send(text)
        if self.trace is not None:
            self.trace.wire("out", text)
        if self.backend.send_backlog > self.max_backlog:
            self.end(f"the agent does not read its input (over {self.max_backlog} bytes waiting)", 1008)

    # ------------------------------------------------------------------ agent -> client

    def _from_agent(self, item: bytes | OversizedLine) -> None:
        if self.kind == "websocket":
            # Over HTTP the idle rule is about the client: output of a connection with no stream
            # open reaches nobody, so an agent that keeps streaming must not keep it alive.
            self.last_activity = self.clock.now()
        if self.trace is not None:
            if isinstance(item, OversizedLine):
                self.trace.event("oversized", size=item.size, limit=item.limit)
            else:
                self.trace.wire("in", item)
        if isinstance(item, OversizedLine):
            logger.warning(
                "%s: the agent sent a message of %d bytes (limit %d); dropped", self.id, item.size, item.limit
            )
            return
        try:
            message = parse_json(item)
        except ValueError:
            # Not a message: a remote client could not use it (one message per frame or event);
            # the operator sees it in the log, and the relay goes on.
            self._malformed += 1
            if worth_logging(self._malformed):
                logger.warning(
                    "%s: the agent wrote a line that is not JSON (%d so far; dropped): %.200r",
                    self.id,
                    self._malformed,
                    item,
                )
            return
        route = self.inflight.from_agent(message)
        if self.ending:
            self._while_ending(message)
            return
        if self.on_relayed is not None:
            self.on_relayed(item, message, route)
        elif self.on_message is not None:
            self.on_message(item, route)

    def _while_ending(self, message: Any) -> None:
        """A message from the agent after the client went: nobody reads it; requests in it are
        answered for the client, and the ladder hears when no prompt is left in flight."""
        if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message:
            self._answer_for_client()
        runner = self._runner
        if runner is not None and not self.inflight.in_flight:
            runner.observe(_NOTHING_IN_FLIGHT)

    def _answer_for_client(self) -> None:
        reason = self.end_reason or "the client is gone"
        for key, request in list(self.inflight.to_client.items()):
            del self.inflight.to_client[key]
            self._send_to_agent(answer_for_gone_client(request, reason))

    def answer_agent(self, request_key: str, message: dict[str, Any]) -> bool:
        """Answer, in the client's place, the agent's request ``request_key`` (an ``id_key``):
        False (nothing sent) if it is not pending any more -- one answer per request."""
        if self.inflight.to_client.pop(request_key, None) is None:
            return False
        self._send_to_agent(message)
        return True

    def _send_to_agent(self, message: dict[str, Any]) -> None:
        text = orjson.dumps(message)
        self.backend.send(text)
        if self.trace is not None:
            self.trace.wire("out", text, by="server")

    def _agent_gone(self) -> None:
        if not self.ending:
            task = self.loop.create_task(self._end_for_agent())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _end_for_agent(self) -> None:
        """The agent's output ended: wait (briefly) for its exit, so the reason can name it."""
        with contextlib.suppress(TimeoutError):
            async with timeout_on(self.clock, TERM_GRACE):  # its exit is near: name it
                await self.backend.wait_exited()
        reason = f"the agent ended ({self.backend.describe()})"
        logger.warning("%s: %s", self.id, reason)  # with its last stderr lines: for the operator
        self.end(reason, 1011)

    def output_pressure(self, outlet: object, full: bool) -> None:
        """An outlet passed its high-water mark (``full``) or was emptied: the agent's output is
        paused while any outlet is full, so a slow client slows the agent down. A client that
        reads nothing for the idle timeout meanwhile is ended by the server's sweep."""
        if full:
            if outlet in self._pressing:
                return
            self._pressing.add(outlet)
            if self.paused_since is None and not self.ending:
                self.paused_since = self.clock.now()
                self.backend.pause_output()
                logger.debug(
                    "%s: the client reads slower than the agent writes: agent output paused", self.id
                )
        elif outlet in self._pressing:
            self._pressing.discard(outlet)
            if not self._pressing:
                self._resume_output()

    def _resume_output(self) -> None:
        if self.paused_since is not None:
            self.paused_since = None
            self.backend.resume_output()

    # ------------------------------------------------------------------ ending

    def end(self, reason: str, close_code: int = 1000) -> asyncio.Task[None]:
        """End the connection (idempotent): the front-end is told at once, then the ladder runs.
        Returns the task that finishes when the agent is reaped."""
        if self._end_task is None:
            self.end_reason = reason
            if self.trace is not None:
                self.trace.event(
                    "cancel",
                    scope="connection",
                    by="server",
                    reason=reason,
                    schedule={r.value: at for at, r in self.policy.schedule()},
                )
            logger.info("%s: connection ends: %s", self.id, reason)
            for hook in self.on_end:
                try:
                    hook(reason, close_code)
                except Exception:
                    logger.exception("%s: front-end end hook failed", self.id)
            self.on_message = self.on_relayed = None
            self._pressing.clear()
            self._resume_output()  # the ladder reads the agent's answers to its cancels
            self._end_task = self.loop.create_task(self._run_ladder(), name=f"ladder-{self.id}")
        return self._end_task

    async def wait_ended(self) -> None:
        """Wait until the connection ended and its agent was reaped."""
        await self._reaped.wait()

    async def _run_ladder(self) -> None:
        backend = self.backend
        resolved: asyncio.Future[Resolution] = self.loop.create_future()

        def on_resolved(resolution: Resolution, now: float) -> None:
            ladder = self._machine.ladder
            if self.trace is not None and ladder is not None:
                self.trace.event(
                    "resolved",
                    scope="connection",
                    resolution=resolution.value,
                    by=ladder.resolved_by.value if ladder.resolved_by else None,
                    elapsed=ladder.elapsed,
                )
            if not resolved.done():
                resolved.set_result(resolution)

        runner = self._runner = LadderRunner(
            self._machine,
            self,
            self.clock,
            sessions=self.inflight.live_sessions,
            requests=lambda: [r.id for r in self.inflight.prompts()],
            on_rung=self._on_rung,
            on_resolved=on_resolved,
            name=f"serve {self.id}",
        )
        exited = self.loop.create_task(backend.wait_exited())

        def on_exit(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is None:
                runner.observe(_GONE)

        exited.add_done_callback(on_exit)
        started = self.clock.now()
        try:
            runner.observe(Observation(Seen.CANCEL, in_flight=self.inflight.in_flight))
            await resolved  # the agent exited, or SIGKILL was sent EXIT_WAIT ago (release reaps)
        finally:
            runner.stop()
            exited.cancel()
            try:
                await backend.release()
            except Exception:
                logger.exception("%s: releasing the agent failed", self.id)
            self._reaped.set()
            for callback in self.on_reaped:
                try:
                    callback()
                except Exception:
                    logger.exception("%s: on_reaped callback failed", self.id)
            ladder = self._machine.ladder
            last = ladder.resolved_by if ladder is not None else None
            logger.info(
                "%s: agent reaped %.2f s after the end (%s; last rung: %s)",
                self.id,
                self.clock.now() - started,
                backend.describe(),
                last.value if last else "none",
            )

    def _on_rung(self, rung: Rung) -> None:
        """This connection's own part of a rung: before ``session/cancel``, the agent's pending
        requests are answered for the client that is gone."""
        ladder = self.ladder
        if self.trace is not None and ladder is not None:
            self.trace.event(
                "rung",
                rung=rung.value,
                scope="connection",
                due=round(ladder.taken[-1][0] - ladder.started_at, 6),
                next=_after(ladder),
            )
        if rung is Rung.SESSION_CANCEL:
            self._answer_for_client()
        logger.debug("%s: ladder step %s", self.id, rung.value)

    # ------------------------------------------------------------------ PeerControl (the ladder's)

    def cancel_session(self, session_id: str) -> None:
        self._send_to_agent(
            {"jsonrpc": "2.0", "method": p.SESSION_CANCEL, "params": {"sessionId": session_id}}
        )

    def cancel_request(self, request_id: RequestId) -> None:
        self._send_to_agent(
            {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": request_id}}
        )

    def close_input(self) -> None:
        self.backend.close_input()

    def terminate(self) -> None:
        self.backend.terminate()

    def kill(self) -> None:
        self.backend.kill()


def _asks_above(message: Any, cap: int) -> bool:
    """Whether ``message`` is an ``initialize`` asking for a version above ``cap``."""
    if not isinstance(message, dict) or message.get("method") != p.INITIALIZE:
        return False
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return type(version) is int and version > cap


_GONE = Observation(Seen.GONE)
_NOTHING_IN_FLIGHT = Observation(Seen.NOTHING_IN_FLIGHT)


def _after(ladder: CancelLadder) -> float | None:
    """When the ladder's next rung is due, in seconds after its start (for a trace)."""
    following = ladder.next_deadline()
    return None if following is None else round(following - ladder.started_at, 6)
