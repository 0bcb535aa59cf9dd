"""The host's handle on one agent: ``initialize``, sessions, cancel scopes, shutdown.

The handle composes a ``Peer`` -- the local process ``launch`` started (``ProcessPeer``) or the
network connection ``connect`` opened (``NetworkPeer``) -- and asks it what only it knows: how
the agent ends and what that end means.

Cancel scopes and what they put on the wire:

- ``request``: ``$/cancel_request`` for one of our requests in flight.
- ``current_turn`` (``PromptTurn.cancel``, ``SessionHandle.cancel``): ``session/cancel`` with the
  host side of the turn cancelled (pending permission requests answered ``cancelled``), then
  the ladder until the turn resolves: ``$/cancel_request`` on the prompt, SIGTERM, SIGKILL of
  the agent's process group.
- ``session``: ``current_turn``, then ``session/close`` when the agent supports it.
- ``agent``: every session's turn, then the agent is shut down (stdin closed, TERM, KILL).

Every cancel is idempotent and returns a ``CancelOutcome`` (resolution, the step that resolved
it, elapsed time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from .. import __version__
from .. import protocol as p
from ..aio import AgentProcess, Clock, Connection, LoopClock, ProcessGroup, StderrTail
from ..core import (
    CLOSE_GRACE,
    EXIT_WAIT,
    SHUTDOWN_GRACE,
    TERM_GRACE,
    V1,
    V2,
    AcpError,
    ErrorCode,
    LadderPolicy,
    NegotiationError,
    ProtocolProfile,
    ProtocolViolation,
    RpcError,
    Tracer,
    Violation,
    first_version,
    initialize_params,
    read_answer,
    retry_version,
)
from ..trace import TraceSink, TraceTarget, follow_connection, open_trace, wire_tracer
from ._errors import AgentExitedError, AgentStartError
from ._peer import HostControl, Peer
from ._process_peer import ProcessPeer
from ._results import CancelOutcome, worst
from ._routing import AgentRequests
from ._services import ClientServices
from ._session import Scope, SessionHandle

logger = logging.getLogger("acp_driver.driver")

Protocol = Literal["auto", 1, 2]
"""Which ACP version to speak: ``auto`` (the newest the agent speaks), or insist on 1 or 2."""


class AgentHandle:
    """The host's handle on one agent. Create with ``await launch([...])`` or ``await connect(url)``."""

    def __init__(
        self,
        connection: Connection,
        peer: Peer,
        *,
        services: ClientServices,
        ladder_policy: LadderPolicy,
        request_timeout: float,
        name: str,
        clock: Clock | None = None,
    ) -> None:
        self.connection: Connection = connection
        self.peer = peer
        """What carries the connection: a ``ProcessPeer`` or a ``NetworkPeer``."""
        self.services = services
        self.ladder_policy = ladder_policy
        self.request_timeout = request_timeout
        self.reap_timeout = EXIT_WAIT
        """After SIGKILL, how long a turn waits for the exit before it is resolved anyway."""
        self.name = name
        self.clock: Clock = clock if clock is not None else LoopClock()
        """The clock the cancel ladder runs on (inject a fake one to test it without waiting)."""
        self.protocol: Protocol = "auto"
        """The version asked for at ``initialize`` (``launch(protocol=...)``)."""
        self.profile: ProtocolProfile = V1
        """The protocol version spoken, fixed by ``initialize``."""
        self.sessions: dict[str, SessionHandle] = {}
        self.info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []
        self.protocol_version: int | None = None
        self.negotiation_note: str | None = None
        """Why the version spoken is not the one the agent claimed (``core.ECHO_NOTE``), if so."""
        self.signalled = False
        """The host signalled the agent (ladder, ``kill``, shutdown escalation)."""
        self.on_ladder_step: Any = None
        """``f(turn, rung)`` called as each ladder step is taken (progress display)."""
        self.control = HostControl(self)
        """What the cancel ladder does to this agent (``aio.PeerControl``)."""
        self.trace: TraceSink | None = None
        """Where the lifecycle of turns is recorded (``launch(trace=...)``), if anywhere."""
        self._background: set[asyncio.Task[Any]] = set()
        self._finalizing: asyncio.Task[None] | None = None
        self._exit_reason: str | None = None
        self._requests = AgentRequests(self)
        connection.closed_error = self._exited_error
        peer.attach(self)

    @property
    def remote(self) -> bool:
        """Whether the agent is reached over a network (``connect``) rather than a local process."""
        return self.peer.remote

    @property
    def process(self) -> ProcessGroup:
        """The agent's process group (``launch``; a network agent has none: ``AttributeError``)."""
        if not isinstance(self.peer, ProcessPeer):
            raise AttributeError("an agent reached over a network has no process here")
        return self.peer.process

    @property
    def stderr(self) -> StderrTail:
        """The last lines the agent wrote on stderr (``launch`` only)."""
        if not isinstance(self.peer, ProcessPeer):
            raise AttributeError("an agent reached over a network has no stderr here")
        return self.peer.stderr

    # ------------------------------------------------------------------ launch

    @classmethod
    async def launch(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        services: ClientServices | None = None,
        ladder: LadderPolicy | None = None,
        request_timeout: float = 30.0,
        init_timeout: float = 30.0,
        name: str | None = None,
        tracer: Tracer | None = None,
        trace: TraceTarget = None,
        clock: Clock | None = None,
        supervise: bool | None = None,
        protocol: Protocol = "auto",
        on_spawn: Callable[[AgentHandle], object] | None = None,
    ) -> AgentHandle:
        """Spawn ``argv`` in its own process group and complete ``initialize``.

        ``tracer(direction, message)`` sees every message on the wire (``"in"``/``"out"``);
        ``trace`` records the wire and the turn's lifecycle (cancel, ladder rungs, signals,
        exit): a file path (NDJSON, docs/trace.md) or a ``trace.TraceSink``;
        ``clock`` is what the cancel ladder's deadlines run on (the event loop's by default);
        ``supervise=False`` opts out of the supervisor that owns the agent's whole process tree;
        ``on_spawn(agent)`` is called once the process exists, before ``initialize`` (so that a
        host can kill it while it starts, e.g. on a signal); ``protocol``: ``auto`` (the newest
        version the agent speaks; ``agent.protocol_version`` says which), ``1`` or ``2``.
        """
        if not argv:
            raise AgentStartError("empty agent command")
        label = name or os.path.basename(argv[0])
        sink, owned = open_trace(trace, role="host", agent=list(argv))
        connection = Connection(name=label, tracer=wire_tracer(tracer, sink), clock=clock)
        if sink is not None:
            follow_connection(connection, sink, owned)
        try:
            child = await AgentProcess.spawn(
                argv, connection, cwd=cwd, env=env, stderr=StderrTail(label), supervise=supervise, trace=sink
            )
        except OSError as exc:
            if sink is not None and owned:
                sink.close()
            search = (env if env is not None else os.environ).get("PATH", os.defpath)
            why = AgentStartError.spawn_reason(argv[0], exc, search)
            raise AgentStartError(f"cannot start agent {argv[0]!r}: {why}") from exc
        agent = cls(
            connection,
            ProcessPeer(child),
            services=services or ClientServices(),
            ladder_policy=ladder or LadderPolicy(),
            request_timeout=request_timeout,
            name=label,
            clock=clock,
        )
        agent.trace = sink
        agent.protocol = _check_protocol(protocol)
        await agent.start(init_timeout, on_spawn, f"agent {label!r}", agent.aclose)
        return agent

    async def start(
        self,
        timeout: float,
        hook: Callable[[AgentHandle], object] | None,
        what: str,
        close: Callable[[], Awaitable[object]],
    ) -> None:
        """``hook(self)``, then ``initialize``; on any failure ``close()`` and raise, an
        ``AgentStartError`` naming ``what`` for a protocol, OS or timeout error."""
        try:
            if hook is not None:
                hook(self)
            await self._initialize(timeout)
        except BaseException as exc:
            await close()
            if isinstance(exc, AgentStartError):
                raise
            if isinstance(exc, (AcpError, OSError, TimeoutError)):
                # An agent that exited at once: close() has reaped it, and its exit status says
                # more than the write or read that failed first ("the write side is closed").
                why = self._exit_reason if isinstance(exc, AgentExitedError) and self._exit_reason else exc
                raise AgentStartError(f"{what} failed to initialize: {why}") from exc
            raise

    async def _initialize(self, timeout: float) -> None:
        """``initialize``, negotiating the version (``protocol``) by ``core``'s one rule
        (``core/_negotiation.py``): ``auto`` asks for the newest version with every version's
        field names, so that a v1 agent can answer it, and speaks what the agent answers --
        by its shape, not only the number it echoes (falling back to v1 on the same
        connection, also after a v2 agent's ``-32022`` naming 1 among its versions);
        ``1``/``2`` insist on that version."""
        wanted = self.protocol
        first = first_version(wanted)
        try:
            response = await self._ask_initialize(
                self._initialize_params(first, both=wanted == "auto"), timeout
            )
        except RpcError as exc:
            try:
                again = retry_version(wanted, exc.code, exc.data, p.UNSUPPORTED_PROTOCOL_VERSION)
            except NegotiationError as why:
                raise AgentStartError(str(why)) from exc
            if again is None:
                raise
            response = await self._ask_initialize(self._initialize_params(again, both=False), timeout)
        try:
            negotiated = read_answer(wanted, response)
        except NegotiationError as why:
            raise AgentStartError(str(why)) from None
        if negotiated.note is not None:
            logger.warning("%s: %s", self.name, negotiated.note)
        self.negotiation_note = negotiated.note
        self.profile = negotiated.profile
        self.protocol_version = negotiated.profile.version
        self.capabilities = negotiated.capabilities
        self.info = negotiated.info
        self.auth_methods = negotiated.auth_methods

    def _initialize_params(self, version: int, *, both: bool) -> dict[str, Any]:
        info = {"name": "acp-driver", "title": "acp-driver", "version": __version__}
        services = self.services
        caps = {V1.version: services.capabilities(), V2.version: services.capabilities_v2()}
        return initialize_params(version, both=both, info=info, capabilities=caps)

    async def _ask_initialize(self, params: dict[str, Any], timeout: float) -> Any:
        conn = self.connection
        previous = conn.on_violation
        garbage = _GarbageWatch(conn, previous)
        conn.on_violation = garbage.saw
        try:
            answer = conn.request_nowait(p.INITIALIZE, params, timeout=timeout)
            try:
                done, _ = await asyncio.wait({answer, garbage.given_up}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                _abandon(answer)  # the start was aborted (a signal): nobody reads this answer
                raise
            if answer not in done:
                _abandon(answer)
                raise AgentStartError(garbage.report(self.name))
            try:
                return answer.result()
            except AcpError as exc:
                if garbage.lines:
                    then = getattr(exc, "message", None) or str(exc)
                    raise AgentStartError(f"{garbage.report(self.name)}; then: {then}") from exc
                raise
        finally:
            conn.on_violation = previous
            garbage.given_up.cancel()

    def speaks_v1(self, turn: Any) -> None:
        """v2 was agreed, but the agent answered ``turn``'s prompt the v1 way (a stop reason, no
        ``messageId``): it speaks v1 (``core``'s negotiation rule). Every session goes on under
        v1's lifecycle; what the agent sent for the turn, filed as v2 background work, is the
        turn's."""
        if self.profile is V1:
            return
        note = "agent answered a v2 prompt the v1 way: speaking v1"
        logger.warning("%s: %s", self.name, note)
        self.negotiation_note = note
        self.profile = V1
        self.protocol_version = V1.version
        for session in self.sessions.values():
            session.speak(V1)
        for update in turn.session.take_background():
            turn.accept(update)

    def supports(self, feature: str) -> bool:
        """``load``, ``list``, ``resume``, ``close``: advertised by the agent? (v2: the baseline
        list/resume/close come with ``capabilities.session``; there is no load.)"""
        return self.profile.supports(self.capabilities, feature)

    # ------------------------------------------------------------------ requests to the agent

    def request(self, method: str, params: Any, *, timeout: float | None = None) -> Awaitable[Any]:
        """A request to the agent: ``await agent.request(method, params)``.

        Raises ``AgentExitedError`` (naming the exit status and last stderr lines) if the agent
        is gone, ``RequestTimeoutError`` after ``timeout`` (default ``request_timeout``).
        """
        # A future, not a coroutine: no frame and no task per request in flight.
        # Positional arguments: a call with keywords costs more (this runs once per request).
        return self.connection.request_nowait(
            method, params, self.request_timeout if timeout is None else timeout
        )

    def cancel_request(self, request_id: Any) -> bool:
        """Scope ``request``: send ``$/cancel_request`` for one of our requests in flight."""
        return self.connection.cancel_request(request_id)

    async def authenticate(self, method_id: str) -> dict[str, Any]:
        """``authenticate`` (v2: ``auth/login``) with one of the agent's ``authMethods``."""
        result = await self.request(self.profile.auth_login, {"methodId": method_id})
        return result if isinstance(result, dict) else {}

    async def new_session(
        self,
        cwd: str | os.PathLike[str],
        *,
        mcp_servers: Sequence[dict[str, Any]] = (),
        additional_directories: Sequence[str] = (),
    ) -> SessionHandle:
        cwd = os.path.abspath(cwd)
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": list(mcp_servers)}
        if additional_directories:
            params["additionalDirectories"] = [os.path.abspath(d) for d in additional_directories]
        response = await self.request(p.SESSION_NEW, params)
        sid = response.get("sessionId") if isinstance(response, dict) else None
        if not isinstance(sid, str):
            raise RpcError(ErrorCode.INVALID_REQUEST, f"invalid session/new response: {response!r}")
        return self._add_session(sid, cwd, response, params.get("additionalDirectories", []))

    async def load_session(
        self, session_id: str, cwd: str | os.PathLike[str], *, mcp_servers: Sequence[dict[str, Any]] = ()
    ) -> SessionHandle:
        """Load a session (history is replayed as updates, kept in ``session_updates``/listeners)."""
        if not self.supports("load"):
            raise AcpError("the agent does not advertise loadSession")
        cwd = os.path.abspath(cwd)
        session = self._add_session(session_id, cwd, {}, [])
        session.loading = True
        try:
            response = await self.request(
                p.SESSION_LOAD, {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
            )
        except BaseException:
            self.sessions.pop(session_id, None)
            raise
        finally:
            session.loading = False
        session.response = response if isinstance(response, dict) else {}
        return session

    async def resume_session(
        self, session_id: str, cwd: str | os.PathLike[str], *, replay_from: Literal["start"] | None = None
    ) -> SessionHandle:
        """Resume a session (``session/resume``). v2: ``replay_from="start"`` asks the agent to
        replay its history first; what arrives before the answer (the replay, the state snapshot)
        is kept in ``session_updates`` and never ends or confirms anything. A session this handle
        already holds (its turns still running) keeps its handle."""
        if not self.supports("resume"):
            raise AcpError("the agent does not advertise session resume")
        cwd = os.path.abspath(cwd)
        params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        if replay_from is not None:
            params["replayFrom"] = {"type": replay_from}
        existing = self.sessions.get(session_id)
        session = existing if existing is not None else self._add_session(session_id, cwd, {}, [])
        session.loading = True
        try:
            response = await self.request(p.SESSION_RESUME, params)
        except BaseException:
            if existing is None:
                self.sessions.pop(session_id, None)
            raise
        finally:
            session.loading = False
        if isinstance(response, dict):
            session.response = response
            if isinstance(response.get("configOptions"), list):
                session.config_options = response["configOptions"]
        return session

    async def list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        if not self.supports("list"):
            raise AcpError("the agent does not advertise session listing")
        result = await self.request(p.SESSION_LIST, {"cwd": cwd} if cwd else {})
        sessions = result.get("sessions") if isinstance(result, dict) else None
        return sessions if isinstance(sessions, list) else []

    def _add_session(
        self, sid: str, cwd: str, response: dict[str, Any], extra_roots: Sequence[str]
    ) -> SessionHandle:
        session = SessionHandle(self, sid, cwd, response)
        session.roots.extend(extra_roots)
        self.sessions[sid] = session
        self._requests.replay_unknown(session)
        return session

    # ------------------------------------------------------------------ cancel and shutdown

    async def cancel(self, scope: Scope = "agent", *, request_id: Any = None) -> CancelOutcome:
        """Cancel with a scope: ``request`` (needs ``request_id``) or ``agent`` (everything, then shut down)."""
        started = self.clock.now()
        if self.trace is not None:
            self.trace.event("cancel", scope=scope, by="host", request=request_id)
        if scope == "request":
            sent = self.cancel_request(request_id)
            return CancelOutcome("request", None, "cancel_request" if sent else "finished", 0.0)
        if scope != "agent":
            raise ValueError("use session.cancel() for scopes 'current_turn' and 'session'")
        turns = [s.current_turn for s in self.sessions.values() if s.current_turn is not None]
        outcomes = await asyncio.gather(*(t.cancel() for t in turns))
        # The shutdown keeps to the ladder's schedule, from the same start: input closed now,
        # SIGTERM at 3/4 of the budget, SIGKILL at the budget (at once for time already spent).
        policy = self.ladder_policy
        spent = self.clock.now() - started
        terminate_at = policy.budget * policy.terminate_at
        await self.shutdown(
            max(0.0, terminate_at - spent), term_grace=max(0.0, policy.budget - max(spent, terminate_at))
        )
        steps = tuple(step for o in outcomes for step in o.steps)
        by = outcomes[-1].resolved_by if outcomes else "idle"
        resolution = worst([o.resolution for o in outcomes])
        return CancelOutcome("agent", resolution, by, self.clock.now() - started, None, (*steps, "shutdown"))

    async def shutdown(self, grace: float = SHUTDOWN_GRACE, *, term_grace: float = TERM_GRACE) -> int:
        """Close the connection (stdin), give the agent up to ``grace`` to end, then end it for
        good (a process: TERM, KILL ``TERM_GRACE`` later, of its group; a network connection:
        abort). Every wait is on the agent's clock. Returns the exit status (0 over a network).
        Every request still pending fails; nothing of it is left."""
        conn = self.connection
        if not conn.closed:
            await conn.aclose("host shut the agent down" if not self.remote else "host closed the connection")
        code, reason = await self.peer.shutdown(grace, term_grace)
        await self.finalize(reason)
        return code

    async def aclose(self) -> None:
        await self.shutdown(grace=CLOSE_GRACE)

    async def kill(self) -> int:
        """End the agent now (SIGKILL of its whole group; a network connection: abort); returns
        the exit status (0 over a network)."""
        self.signalled = True
        code, reason = await self.peer.kill_now()
        await self.finalize(reason)
        return code

    async def __aenter__(self) -> AgentHandle:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def returncode(self) -> int | None:
        return self.peer.returncode

    @property
    def where(self) -> str:
        """Where the agent runs, for people: ``pid 1234``, or the URL of a remote agent."""
        return self.peer.where

    @property
    def url(self) -> str | None:
        """The URL of an agent reached over a network (None for a local process)."""
        return self.peer.where if self.peer.remote else None

    def terminate_peer(self) -> None:
        """The ladder's TERMINATE rung: SIGTERM to the agent's group (remote: close gracefully)."""
        self.control.terminate()

    def kill_peer(self) -> None:
        """The ladder's KILL rung: SIGKILL to the agent's group (remote: abort the connection)."""
        self.control.kill()

    # ------------------------------------------------------------------ the end

    async def finalize(self, reason: str) -> None:
        """The agent is gone (or being ended): close the connection with ``reason`` (every
        pending request fails naming it), release the peer and the agent's terminals. Once;
        later calls wait for the first."""
        if self._finalizing is None:
            self._exit_reason = self.peer.final_reason(reason)
            self._finalizing = asyncio.get_running_loop().create_task(self._do_finalize(self._exit_reason))
        await asyncio.shield(self._finalizing)

    async def _do_finalize(self, reason: str) -> None:
        await self.connection.aclose(reason)
        # v2: a turn's prompt was answered at its insertion; the agent's end is what ends it.
        for session in list(self.sessions.values()):
            for turn in list(session.turns):
                turn.gone(self.peer.error(reason))
        await self.peer.release()
        terminals = self.services.terminals
        if terminals is not None:
            # Only this agent's terminals: one ClientServices may serve several agents.
            for session in list(self.sessions.values()):
                with contextlib.suppress(Exception):
                    await terminals.release_owner(session)
        for task in list(self._background):
            if task is not asyncio.current_task() and task is not self._finalizing:
                task.cancel()

    def _exited_error(self, message: str) -> AgentExitedError:
        return self.peer.error(self._exit_reason or message)

    def closed_error(self) -> AgentExitedError:
        """The error for a call made after the agent is gone (names its exit, stderr or URL)."""
        return self.peer.error(self._exit_reason or self.connection.close_reason or "connection closed")

    def spawn(self, coro: Any, what: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a background task of this agent (cancelled when it is finalized)."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}: {what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task


def _abandon(answer: asyncio.Future[Any]) -> None:
    """Give up on a request whose answer nobody will read: cancelled (``$/cancel_request``), and
    an answer already come marked retrieved (no "exception was never retrieved" report)."""
    answer.cancel()
    answer.add_done_callback(lambda f: f.cancelled() or f.exception())


class _GarbageWatch:
    """Before ``initialize`` is answered: a peer whose first output is not JSON-RPC at all (a
    banner, logs, a different protocol) fails the start after ``LIMIT`` such lines, quoting the
    first ones -- not after the initialize timeout."""

    LIMIT = 16
    QUOTED = 3

    def __init__(
        self, connection: Connection, then: Callable[[ProtocolViolation], None] | None = None
    ) -> None:
        self.connection = connection
        self.then = then
        """The hook that was installed before (still called for every violation)."""
        self.count = 0
        self.lines: list[bytes] = []
        self.given_up: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def saw(self, violation: ProtocolViolation) -> None:
        if self.then is not None:
            self.then(violation)
        if violation.kind not in (Violation.PARSE_ERROR, Violation.INVALID_MESSAGE, Violation.OVERSIZED_LINE):
            return
        if self.connection.core.heard_valid:
            return  # it speaks JSON-RPC, if badly: the initialize timeout or answer decides
        self.count += 1
        if violation.line is not None and len(self.lines) < self.QUOTED:
            self.lines.append(violation.line)
        if self.count >= self.LIMIT and not self.given_up.done():
            self.given_up.set_result(None)

    def report(self, name: str) -> str:
        quoted = "; ".join(repr(line.decode("utf-8", "replace")) for line in self.lines)
        return (
            f"agent {name!r} does not speak ACP on its stdout: {self.count} lines that are not "
            f"JSON-RPC before any valid message" + (f", starting with: {quoted}" if quoted else "")
        )


def _check_protocol(protocol: Any) -> Protocol:
    if protocol not in ("auto", 1, 2):
        raise ValueError(f"protocol must be 'auto', 1 or 2, not {protocol!r}")
    return protocol  # type: ignore[no-any-return]


async def launch(argv: Sequence[str], **options: Any) -> AgentHandle:
    """Spawn an ACP agent and initialize it: ``agent = await launch(["my-agent", "--acp"])``."""
    return await AgentHandle.launch(argv, **options)
