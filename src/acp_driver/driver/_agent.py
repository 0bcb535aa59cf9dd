"""The host driver: launch an ACP agent, open sessions, run prompt turns, cancel with a scope.

Cancel scopes and what they put on the wire:

- ``request``: ``$/cancel_request`` for one of our requests in flight.
- ``current_turn``: ``session/cancel``; every pending ``session/request_permission`` of the turn
  answered ``{"outcome": "cancelled"}`` at once (spec MUST), the turn's other agent requests
  (files, terminals) cancelled with ``-32800`` and its terminals killed; non-finished tool calls
  marked cancelled locally (spec SHOULD). Then the ladder (``core.CancelLadder``) escalates
  until the turn resolves: ``$/cancel_request`` on the prompt, SIGTERM, SIGKILL of the agent's
  process group.
- ``session``: ``current_turn``, then ``session/close`` when the agent supports it.
- ``agent``: every session's turn, then the agent is shut down (stdin closed, TERM, KILL).

Every cancel is idempotent and returns a ``CancelOutcome`` (resolution, the step that resolved
it, elapsed time).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import __version__
from .. import protocol as p
from ..aio import Connection, current_request, open_pipes
from ..aio._process import ProcessGroup, StderrTail, drain_pipe, exit_description
from ..core import AcpError, ConnectionClosedError, ErrorCode, RequestCancelledError, RpcError, Tracer
from ..core._ladder import CancelLadder, LadderPolicy, Resolution, Rung
from ._permissions import CANCELLED_OUTCOME, PermissionRequest, validate_outcome
from ._services import ClientServices
from ._updates import ToolCall as ToolCallView
from ._updates import ToolCallUpdate as ToolCallUpdateView
from ._updates import Update, make_update

logger = logging.getLogger("acp_driver.driver")

Scope = Literal["request", "current_turn", "session", "agent"]

_UNKNOWN_SESSION_BUFFER = 256


class AgentStartError(AcpError):
    """The agent could not be started or did not complete ``initialize``."""


class AgentExitedError(ConnectionClosedError):
    """The agent process ended (or closed its output) while we still needed it."""


@dataclass(frozen=True)
class CancelOutcome:
    """What a cancel achieved."""

    scope: str
    resolution: Resolution | None
    """How the target ended (None: nothing was running)."""
    resolved_by: str
    """``finished`` (it had already ended), ``idle`` (nothing to cancel), a ladder step
    (``session_cancel``, ``cancel_request``, ``terminate``, ``kill``), or ``closed``."""
    elapsed: float
    """Seconds from the cancel to the resolution."""
    stop_reason: str | None = None
    steps: tuple[str, ...] = ()
    """Ladder steps taken, in order."""


@dataclass(frozen=True)
class TurnResult:
    """How a prompt turn ended."""

    stop_reason: str | None
    """The agent's stop reason (``cancelled`` also when it answered ``-32800``); None on error."""
    resolution: Resolution
    elapsed: float
    """Seconds from sending the prompt to the resolution."""
    error: RpcError | None = None
    """The error, when the agent answered one or the connection ended."""
    cancel: CancelOutcome | None = None


@dataclass
class ToolCallState:
    """What the host knows of one tool call of a turn."""

    id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    cancelled: bool = False
    """Marked cancelled locally when the turn was cancelled before it finished (spec SHOULD)."""
    updates: int = 0

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


# ---------------------------------------------------------------------- prompt turns


class PromptTurn:
    """One running prompt turn. Iterate it for updates; await it for the ``TurnResult``."""

    def __init__(self, session: RemoteSession, prompt: list[dict[str, Any]]) -> None:
        self.session = session
        self.agent = session.agent
        self.prompt = prompt
        self.started_at = time.monotonic()
        self.request_id: Any = None
        self.tool_calls: dict[str, ToolCallState] = {}
        self.plan: list[dict[str, Any]] = []
        self.late_updates: list[Update] = []
        """Updates that arrived after this turn's response (a peer violation; reported here)."""
        self.result: TurnResult | None = None
        self.cancel_requested = False
        self._buffer: collections.deque[Update] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = asyncio.Event()
        self._message_ids: set[str] = set()
        self._incoming: dict[Any, tuple[str, asyncio.Task[Any]]] = {}
        self._ladder: CancelLadder | None = None
        self._cancel_task: asyncio.Task[CancelOutcome] | None = None
        self._kill_now = asyncio.Event()
        self._release_task: asyncio.Task[Any] | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"prompt {session.id}")

    # ------------------------------------------------------------------ consuming

    @property
    def done(self) -> bool:
        return self.result is not None

    def _ended(self) -> bool:
        return self.result is not None

    @property
    def stop_reason(self) -> str | None:
        return self.result.stop_reason if self.result else None

    def __aiter__(self) -> AsyncIterator[Update]:
        return self

    async def __anext__(self) -> Update:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self.result is not None:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self.wait().__await__()

    async def wait(self) -> TurnResult:
        """Wait for the turn to end (updates stay available to iterate)."""
        await self._done.wait()
        assert self.result is not None
        return self.result

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------------ updates in

    def _accept(self, update: Update) -> None:
        if isinstance(update, (ToolCallView, ToolCallUpdateView)):
            self._track_tool_call(update)
        elif update.kind == "plan":
            entries = update.raw.get("entries")
            self.plan = entries if isinstance(entries, list) else []
        elif update.kind == "agent_message_chunk":
            mid = update.raw.get("messageId")
            if isinstance(mid, str):
                self._message_ids.add(mid)
        self._buffer.append(update)
        if self._waiter is not None:
            self._wake()

    def _track_tool_call(self, update: ToolCallView | ToolCallUpdateView) -> None:
        tid = update.tool_call_id
        state = self.tool_calls.get(tid)
        if state is None:
            state = self.tool_calls[tid] = ToolCallState(tid)
        raw = update.raw
        if "title" in raw:
            state.title = update.title
        if "kind" in raw:
            state.kind = update.tool_kind
        if "status" in raw:
            state.status = update.status
        state.updates += 1

    def owns(self, update: Update) -> bool:
        """Whether ``update`` names a tool call or message of this turn."""
        raw = update.raw
        tid = raw.get("toolCallId")
        if isinstance(tid, str) and tid in self.tool_calls:
            return True
        mid = raw.get("messageId")
        return isinstance(mid, str) and mid in self._message_ids

    # ------------------------------------------------------------------ lifecycle

    async def _run(self) -> None:
        conn = self.agent.connection
        params = {"sessionId": self.session.id, "prompt": self.prompt}
        stop_reason: str | None = None
        error: RpcError | None = None
        try:
            response = await conn.request(p.SESSION_PROMPT, params, on_sent=self._sent)
            stop_reason = response.get("stopReason") if isinstance(response, dict) else None
            if stop_reason not in p.STOP_REASONS:
                error = RpcError(ErrorCode.INVALID_REQUEST, f"invalid session/prompt response: {response!r}")
                stop_reason = None
        except RequestCancelledError as exc:
            stop_reason = "cancelled"  # -32800 on the prompt: the agent stopped the turn
            error = exc
        except RpcError as exc:
            error = exc
        except asyncio.CancelledError:
            error = RequestCancelledError("turn abandoned by the host")
            self._finish(None, Resolution.CANCELLED, error)
            raise
        self._finish(stop_reason, self._resolution(stop_reason, error), error)

    def _sent(self, rid: Any) -> None:
        self.request_id = rid

    def _resolution(self, stop_reason: str | None, error: RpcError | None) -> Resolution:
        ladder = self._ladder
        killed = self.agent.signalled or (
            ladder is not None and any(r in (Rung.TERMINATE, Rung.KILL) for _, r in ladder.taken)
        )
        if isinstance(error, ConnectionClosedError):
            return Resolution.KILLED if killed else Resolution.AGENT_EXITED
        if stop_reason == "cancelled":
            return Resolution.CANCELLED
        if error is not None:
            return Resolution.ERROR
        return Resolution.COMPLETED

    def _finish(self, stop_reason: str | None, resolution: Resolution, error: RpcError | None) -> None:
        if self.result is not None:
            return
        now = time.monotonic()
        ladder = self._ladder
        if ladder is not None:
            ladder.resolve(now, resolution)
        self.result = TurnResult(
            stop_reason=stop_reason,
            resolution=resolution,
            elapsed=now - self.started_at,
            error=error,
            cancel=_outcome_from_ladder("current_turn", ladder, stop_reason) if ladder else None,
        )
        if self.session.current_turn is self:
            self.session.current_turn = None
        self.session.last_turn = self
        self._done.set()
        self._wake()
        # Agent requests still open for this turn end with it.
        for _method, task in list(self._incoming.values()):
            task.cancel("turn ended")
        # A cancelled or killed turn's terminals die with it; after a normal end they stay the
        # agent's to release (it may use them in a later turn).
        terminals = self.agent.services.terminals
        if terminals is not None and (self.cancel_requested or resolution is not Resolution.COMPLETED):
            self._release_terminals(terminals)

    # ------------------------------------------------------------------ cancel

    async def cancel(self) -> CancelOutcome:
        """Cancel this turn (scope ``current_turn``): idempotent; returns when it resolved."""
        if self._cancel_task is None:
            if self.result is not None:
                return CancelOutcome(
                    "current_turn", self.result.resolution, "finished", 0.0, self.result.stop_reason
                )
            self._cancel_task = asyncio.get_running_loop().create_task(self._climb())
        return await asyncio.shield(self._cancel_task)

    def kill(self) -> None:
        """Skip the rest of the ladder: SIGKILL the agent's group now (e.g. a second Ctrl-C)."""
        self._kill_now.set()
        if self._cancel_task is None and self.result is None:
            self._cancel_task = asyncio.get_running_loop().create_task(self._climb())

    @property
    def ladder(self) -> CancelLadder | None:
        return self._ladder

    async def _climb(self) -> CancelOutcome:
        policy = self.agent.ladder_policy
        clock = time.monotonic
        ladder = self._ladder = CancelLadder(policy, clock())
        self.cancel_requested = True
        on_step = self.agent.on_ladder_step
        kill_wait: asyncio.Task[Any] | None = None
        try:
            while not self._ended():
                now = clock()
                steps = ladder.skip_to_kill(now) if self._kill_now.is_set() else ladder.poll(now)
                for rung in steps:
                    if on_step is not None:
                        try:
                            on_step(self, rung)
                        except Exception:
                            logger.exception("on_ladder_step callback failed")
                    await self._step(rung)
                if self._ended():
                    break
                deadline = ladder.next_deadline()
                if deadline is None and ladder.taken and ladder.taken[-1][1] is Rung.KILL:
                    # SIGKILL sent: the exit is certain; wait for it (bounded) and settle.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.agent.reap_timeout):
                            await self._done.wait()
                    if not self._ended():
                        self._finish(None, Resolution.KILLED, AgentExitedError("agent killed; no exit seen"))
                    break
                timeout = None if deadline is None else max(0.0, deadline - clock())
                if kill_wait is None or kill_wait.done():
                    kill_wait = asyncio.get_running_loop().create_task(self._kill_now.wait())
                done_wait = asyncio.get_running_loop().create_task(self._done.wait())
                await asyncio.wait(
                    {done_wait, kill_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                done_wait.cancel()
        finally:
            if kill_wait is not None:
                kill_wait.cancel()
        if self._release_task is not None:
            # The turn's terminals are dead when cancel() returns (bounded: never hang here).
            with contextlib.suppress(Exception):
                await asyncio.wait({self._release_task}, timeout=self.agent.reap_timeout)
        result = self.result
        assert result is not None
        return _outcome_from_ladder("current_turn", ladder, result.stop_reason)

    async def _step(self, rung: Rung) -> None:
        agent = self.agent
        conn = agent.connection
        if rung is Rung.SESSION_CANCEL:
            self._cancel_host_side()
            if conn.is_open:
                # Never wait for the pipe here: an agent that stopped reading must not stall the ladder.
                with contextlib.suppress(AcpError):
                    conn.notify_nowait(p.SESSION_CANCEL, {"sessionId": self.session.id})
        elif rung is Rung.CANCEL_REQUEST:
            if self.request_id is not None:
                conn.cancel_request(self.request_id)
        elif rung is Rung.TERMINATE:
            logger.warning("turn of %s ignored the cancel; SIGTERM to the agent's group", self.session.id)
            agent.signalled = True
            agent.process.terminate()
        elif rung is Rung.KILL:
            logger.warning("turn of %s still unresolved; SIGKILL to the agent's group", self.session.id)
            agent.signalled = True
            agent.process.kill()

    def _cancel_host_side(self) -> None:
        """Spec: answer pending permission requests ``cancelled``; stop what the turn started here."""
        for tool in self.tool_calls.values():
            if not tool.finished:
                tool.cancelled = True
        for _method, task in list(self._incoming.values()):
            task.cancel("turn cancelled")
        terminals = self.agent.services.terminals
        if terminals is not None:
            self._release_terminals(terminals)

    def _release_terminals(self, terminals: Any) -> None:
        if self._release_task is None:
            self._release_task = self.agent._spawn(
                terminals.release_owner(self), "release terminals of the turn"
            )

    def __repr__(self) -> str:
        return f"PromptTurn(session={self.session.id!r}, request={self.request_id!r}, done={self.done})"


def _outcome_from_ladder(scope: str, ladder: CancelLadder, stop_reason: str | None) -> CancelOutcome:
    resolved_by = ladder.resolved_by
    return CancelOutcome(
        scope=scope,
        resolution=ladder.resolution,
        resolved_by=resolved_by.value if resolved_by is not None else "finished",
        elapsed=ladder.elapsed or 0.0,
        stop_reason=stop_reason,
        steps=tuple(r.value for _, r in ladder.taken),
    )


# ---------------------------------------------------------------------- sessions


class RemoteSession:
    """A session on the agent."""

    def __init__(self, agent: RemoteAgent, session_id: str, cwd: str, response: dict[str, Any]) -> None:
        self.agent = agent
        self.id = session_id
        self.cwd = cwd
        self.roots: list[str] = [cwd]
        """Directories the agent may touch through the host's fs and terminal services."""
        self.response = response
        self.modes: dict[str, Any] | None = (
            response.get("modes") if isinstance(response.get("modes"), dict) else None
        )
        self.config_options: list[Any] | None = (
            response.get("configOptions") if isinstance(response.get("configOptions"), list) else None
        )
        self.current_turn: PromptTurn | None = None
        self.last_turn: PromptTurn | None = None
        self.closed = False
        self.title: str | None = None
        self.session_updates: collections.deque[Update] = collections.deque(maxlen=256)
        """Recent session-wide updates (commands, mode, config, title, usage)."""
        self.late_updates = 0
        """Turn updates that arrived when no turn was running (peer violations)."""
        self.listeners: list[Any] = []
        """Callables ``f(update)`` called for every update of this session (turn or not)."""

    def prompt(self, prompt: str | Sequence[dict[str, Any]]) -> PromptTurn:
        """Start a prompt turn. Iterate the result for updates; await it for the ``TurnResult``."""
        if self.closed:
            raise AcpError(f"session {self.id} is closed")
        if self.current_turn is not None:
            raise AcpError(f"session {self.id} already has a turn running")
        if not self.agent.connection.is_open:
            raise self.agent._closed_error()
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        turn = PromptTurn(self, blocks)
        self.current_turn = turn
        return turn

    async def cancel(self, scope: Scope = "current_turn") -> CancelOutcome:
        """Cancel the running turn (``current_turn``), or the turn then the session (``session``)."""
        started = time.monotonic()
        if scope not in ("current_turn", "session"):
            raise ValueError("a session cancels with scope 'current_turn' or 'session'")
        turn = self.current_turn
        if turn is not None:
            outcome = await turn.cancel()
        else:
            outcome = CancelOutcome(scope, None, "idle", 0.0)
        if scope == "session":
            await self.close()
            outcome = CancelOutcome(
                "session",
                outcome.resolution,
                outcome.resolved_by,
                time.monotonic() - started,
                outcome.stop_reason,
                (*outcome.steps, "close"),
            )
        return outcome

    async def close(self) -> None:
        """Close the session (``session/close`` when the agent supports it)."""
        if self.closed:
            return
        self.closed = True
        agent = self.agent
        if agent.supports("close") and agent.connection.is_open:
            with contextlib.suppress(AcpError, asyncio.TimeoutError):
                await agent.connection.request(
                    p.SESSION_CLOSE, {"sessionId": self.id}, timeout=agent.request_timeout
                )
        if agent.services.terminals is not None:
            await agent.services.terminals.release_owner(self)
        agent.sessions.pop(self.id, None)

    async def set_mode(self, mode_id: str) -> dict[str, Any]:
        result = await self.agent.request(p.SESSION_SET_MODE, {"sessionId": self.id, "modeId": mode_id})
        if self.modes is not None:
            self.modes["currentModeId"] = mode_id
        return result if isinstance(result, dict) else {}

    async def set_config_option(self, config_id: str, value: Any) -> dict[str, Any]:
        result = await self.agent.request(
            p.SESSION_SET_CONFIG_OPTION, {"sessionId": self.id, "configId": config_id, "value": value}
        )
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            self.config_options = result["configOptions"]
        return result if isinstance(result, dict) else {}

    def _deliver(self, update: Update) -> None:
        for listener in self.listeners:
            try:
                listener(update)
            except Exception:
                logger.exception("session listener failed")
        turn = self.current_turn
        if not update.turn_scoped:
            self.session_updates.append(update)
            if update.kind == "session_info_update":
                title = update.raw.get("title")
                if isinstance(title, str):
                    self.title = title
            elif update.kind == "current_mode_update" and self.modes is not None:
                self.modes["currentModeId"] = update.raw.get("currentModeId")
            if turn is not None:
                turn._accept(update)
            return
        last = self.last_turn
        late_of: PromptTurn | None = None
        if turn is None or turn.request_id is None:
            late_of = last  # no turn running, or its prompt is not even sent yet
        elif not self.agent.connection.awaiting(turn.request_id):
            late_of = turn  # its prompt was answered (in this same read): the turn is over
        elif last is not None and last.owns(update) and not turn.owns(update):
            late_of = last  # names a tool call or message of the finished turn
        else:
            turn._accept(update)
            return
        self.late_updates += 1
        if late_of is not None:
            late_of.late_updates.append(update)
        logger.warning(
            "session %s: %s arrived after its turn's response (peer violation); not attributed",
            self.id,
            update.kind,
        )

    def __repr__(self) -> str:
        return f"RemoteSession({self.id!r})"


# ---------------------------------------------------------------------- the agent


class RemoteAgent:
    """One agent process driven over stdio. Create with ``await RemoteAgent.launch([...])``."""

    def __init__(
        self,
        process: ProcessGroup,
        connection: Connection,
        stderr: StderrTail,
        *,
        services: ClientServices,
        ladder_policy: LadderPolicy,
        request_timeout: float,
        name: str,
    ) -> None:
        self.process = process
        self.connection = connection
        self.stderr = stderr
        self.services = services
        self.ladder_policy = ladder_policy
        self.request_timeout = request_timeout
        self.reap_timeout = 5.0
        self.name = name
        self.sessions: dict[str, RemoteSession] = {}
        self.info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []
        self.protocol_version: int | None = None
        self.signalled = False
        """The host signalled the agent's group (ladder, ``kill``, shutdown escalation)."""
        self.on_ladder_step: Any = None
        """``f(turn, rung)`` called as each ladder step is taken (progress display)."""
        self._background: set[asyncio.Task[Any]] = set()
        self._stdout_eof = asyncio.Event()
        self._finalizing: asyncio.Task[None] | None = None
        self._exit_reason: str | None = None
        self._unknown_updates: dict[str, list[dict[str, Any]]] = {}
        self._register()

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
    ) -> RemoteAgent:
        """Spawn ``argv`` in its own process group and complete ``initialize``.

        ``tracer(direction, line)`` sees every line on the wire (``"in"``/``"out"``).
        """
        if not argv:
            raise AgentStartError("empty agent command")
        label = name or os.path.basename(argv[0])
        try:
            process = ProcessGroup.spawn(argv, cwd=cwd, env=env)
        except OSError as exc:
            what = exc.strerror or str(exc)
            if exc.filename is not None and str(exc.filename) != argv[0]:
                what += f": {exc.filename}"  # e.g. the cwd does not exist
            raise AgentStartError(f"cannot start agent {argv[0]!r}: {what}") from exc
        stderr = StderrTail(label)
        connection = Connection(name=label, tracer=tracer)
        agent = cls(
            process,
            connection,
            stderr,
            services=services or ClientServices(),
            ladder_policy=ladder or LadderPolicy(),
            request_timeout=request_timeout,
            name=label,
        )
        try:
            await agent._attach()
            await agent._initialize(init_timeout)
        except BaseException as exc:
            await agent.aclose()
            if isinstance(exc, AgentStartError):
                raise
            if isinstance(exc, (AcpError, OSError, TimeoutError)):
                raise AgentStartError(f"agent {label!r} failed to initialize: {exc}") from exc
            raise
        return agent

    async def _attach(self) -> None:
        popen = self.process.popen
        conn = self.connection
        assert popen.stdin is not None
        assert popen.stdout is not None
        assert popen.stderr is not None
        await open_pipes(conn, popen.stdout, popen.stdin)
        conn.on_peer_gone = self._on_peer_gone
        conn.closed_error = self._exited_error
        self._stderr_transport = await drain_pipe(popen.stderr, self.stderr.feed, self._on_stderr_eof)
        self.process.on_exit(self._on_exit)

    async def _initialize(self, timeout: float) -> None:
        params = {
            "protocolVersion": p.PROTOCOL_VERSION,
            "clientCapabilities": self.services.capabilities(),
            "clientInfo": {"name": "acp-driver", "title": "acp-driver", "version": __version__},
        }
        response = await self.connection.request(p.INITIALIZE, params, timeout=timeout)
        if not isinstance(response, dict):
            raise AgentStartError(f"invalid initialize response: {response!r}")
        version = response.get("protocolVersion")
        if version != p.PROTOCOL_VERSION:
            raise AgentStartError(
                f"agent speaks ACP protocol version {version!r}; acp-driver supports {p.PROTOCOL_VERSION}"
            )
        self.protocol_version = version
        caps = response.get("agentCapabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        info = response.get("agentInfo")
        self.info = info if isinstance(info, dict) else {}
        methods = response.get("authMethods")
        self.auth_methods = [m for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []

    def supports(self, feature: str) -> bool:
        """``load``, ``list``, ``resume``, ``close``: advertised by the agent?"""
        caps = self.capabilities
        if feature == "load":
            return bool(caps.get("loadSession"))
        session_caps = caps.get("sessionCapabilities")
        return isinstance(session_caps, dict) and session_caps.get(feature) is not None

    # ------------------------------------------------------------------ requests to the agent

    def request(self, method: str, params: Any, *, timeout: float | None = None) -> Awaitable[Any]:
        """A request to the agent: ``await agent.request(method, params)``.

        Raises ``AgentExitedError`` (naming the exit status and last stderr lines) if the agent
        is gone, ``RequestTimeoutError`` after ``timeout`` (default ``request_timeout``).
        """
        # A future, not a coroutine: no frame and no task per request in flight.
        return self.connection.request_nowait(
            method, params, timeout=self.request_timeout if timeout is None else timeout
        )

    def cancel_request(self, request_id: Any) -> bool:
        """Scope ``request``: send ``$/cancel_request`` for one of our requests in flight."""
        return self.connection.cancel_request(request_id)

    async def authenticate(self, method_id: str) -> dict[str, Any]:
        result = await self.request(p.AUTHENTICATE, {"methodId": method_id})
        return result if isinstance(result, dict) else {}

    async def new_session(
        self,
        cwd: str | os.PathLike[str],
        *,
        mcp_servers: Sequence[dict[str, Any]] = (),
        additional_directories: Sequence[str] = (),
    ) -> RemoteSession:
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
    ) -> RemoteSession:
        """Load a session (history is replayed as updates, kept in ``session_updates``/listeners)."""
        if not self.supports("load"):
            raise AcpError("the agent does not advertise loadSession")
        cwd = os.path.abspath(cwd)
        session = self._add_session(session_id, cwd, {}, [])
        try:
            response = await self.request(
                p.SESSION_LOAD, {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
            )
        except BaseException:
            self.sessions.pop(session_id, None)
            raise
        session.response = response if isinstance(response, dict) else {}
        return session

    async def resume_session(self, session_id: str, cwd: str | os.PathLike[str]) -> RemoteSession:
        if not self.supports("resume"):
            raise AcpError("the agent does not advertise session resume")
        cwd = os.path.abspath(cwd)
        response = await self.request(
            p.SESSION_RESUME, {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        )
        return self._add_session(session_id, cwd, response if isinstance(response, dict) else {}, [])

    async def list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        if not self.supports("list"):
            raise AcpError("the agent does not advertise session listing")
        result = await self.request(p.SESSION_LIST, {"cwd": cwd} if cwd else {})
        sessions = result.get("sessions") if isinstance(result, dict) else None
        return sessions if isinstance(sessions, list) else []

    def _add_session(
        self, sid: str, cwd: str, response: dict[str, Any], extra_roots: Sequence[str]
    ) -> RemoteSession:
        session = RemoteSession(self, sid, cwd, response)
        session.roots.extend(extra_roots)
        self.sessions[sid] = session
        for raw in self._unknown_updates.pop(sid, []):
            session._deliver(make_update(sid, raw))
        return session

    # ------------------------------------------------------------------ cancel and shutdown

    async def cancel(self, scope: Scope = "agent", *, request_id: Any = None) -> CancelOutcome:
        """Cancel with a scope: ``request`` (needs ``request_id``) or ``agent`` (everything, then shut down)."""
        started = time.monotonic()
        if scope == "request":
            sent = self.cancel_request(request_id)
            return CancelOutcome("request", None, "cancel_request" if sent else "finished", 0.0)
        if scope != "agent":
            raise ValueError("use session.cancel() for scopes 'current_turn' and 'session'")
        turns = [s.current_turn for s in self.sessions.values() if s.current_turn is not None]
        outcomes = await asyncio.gather(*(t.cancel() for t in turns))
        await self.shutdown()
        steps = tuple(step for o in outcomes for step in o.steps)
        worst = _worst([o.resolution for o in outcomes])
        by = outcomes[-1].resolved_by if outcomes else "idle"
        return CancelOutcome("agent", worst, by, time.monotonic() - started, None, (*steps, "shutdown"))

    async def shutdown(self, grace: float = 2.0) -> int:
        """Close stdin, wait up to ``grace`` for the agent to exit, then TERM/KILL its group.

        Returns the exit status. Every request still pending fails; no process of the group is left.
        """
        conn = self.connection
        if not conn.closed:
            await conn.aclose("host shut the agent down")
        if self.process.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.process.wait()
        code = await self.process.reap()
        await self._finalize(f"agent {exit_description(code)}")
        return code

    async def aclose(self) -> None:
        await self.shutdown(grace=1.0)

    async def kill(self) -> int:
        """SIGKILL the agent's whole group now; returns the exit status."""
        self.signalled = True
        self.process.kill()
        code = await self.process.reap(term_timeout=0)
        await self._finalize(f"agent {exit_description(code)}")
        return code

    async def __aenter__(self) -> RemoteAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    # ------------------------------------------------------------------ process events

    def _on_peer_gone(self, how: str) -> None:
        if how == "eof":
            self._stdout_eof.set()
        self._spawn(self._after_peer_gone(how), f"agent {how}")

    async def _after_peer_gone(self, how: str) -> None:
        # Usually the agent is exiting; if it keeps running without stdin/stdout, it is useless.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await self.process.wait()
        if self.process.returncode is None:
            what = "closed its stdout" if how == "eof" else "stopped reading its stdin"
            logger.warning("%s %s but keeps running; terminating its group", self.name, what)
            code = await self.process.reap(term_timeout=1.0)
            await self._finalize(f"agent {what} ({exit_description(code)} after SIGTERM)")
        else:
            await self._finalize(f"agent {exit_description(self.process.returncode)}")

    def _on_exit(self, code: int) -> None:
        self._spawn(self._after_exit(code), "agent exit")

    async def _after_exit(self, code: int) -> None:
        # Read what the agent wrote before it died; a grandchild holding stdout must not stall us.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                await self._stdout_eof.wait()
        if not self._stdout_eof.is_set() and self.process.group_alive():
            logger.info("%s exited but its group holds stdout; killing the group", self.name)
            self.process.kill()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._stdout_eof.wait()
        self.process._kill_stragglers()
        await self._finalize(f"agent {exit_description(code)}")

    def _on_stderr_eof(self) -> None:
        self.stderr.closed = True

    async def _finalize(self, reason: str) -> None:
        if self._finalizing is None:
            self._exit_reason = f"{reason}; {self.stderr.describe()}"
            self._finalizing = asyncio.get_running_loop().create_task(self._do_finalize(self._exit_reason))
        await asyncio.shield(self._finalizing)

    async def _do_finalize(self, reason: str) -> None:
        await self.connection.aclose(reason)
        if self.process.returncode is None:
            await self.process.reap()
        else:
            self.process._kill_stragglers()
        terminals = self.services.terminals
        if terminals is not None:
            # Only this agent's terminals: one ClientServices may serve several agents.
            for session in list(self.sessions.values()):
                with contextlib.suppress(Exception):
                    await terminals.release_owner(session)
        stderr_transport = getattr(self, "_stderr_transport", None)
        if stderr_transport is not None:
            stderr_transport.close()
        for task in list(self._background):
            if task is not asyncio.current_task() and task is not self._finalizing:
                task.cancel()

    def _exited_error(self, message: str) -> AgentExitedError:
        return AgentExitedError(self._exit_reason or message)

    def _closed_error(self) -> AgentExitedError:
        reason = self._exit_reason or self.connection.close_reason or "connection closed"
        return AgentExitedError(reason)

    def _spawn(self, coro: Any, what: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}: {what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------------ agent -> client

    def _register(self) -> None:
        conn = self.connection
        conn.on_notification(p.SESSION_UPDATE, self._on_update)
        conn.on_request(p.SESSION_REQUEST_PERMISSION, self._on_permission)
        services = self.services
        if services.fs is not None:
            if services.fs.can_read:
                conn.on_request(p.FS_READ_TEXT_FILE, self._on_read)
            if services.fs.can_write:
                conn.on_request(p.FS_WRITE_TEXT_FILE, self._on_write)
        if services.terminals is not None:
            conn.on_request(p.TERMINAL_CREATE, self._on_terminal_create)
            conn.on_request(p.TERMINAL_OUTPUT, self._terminal_call("output"))
            conn.on_request(p.TERMINAL_WAIT_FOR_EXIT, self._terminal_call("wait_for_exit"))
            conn.on_request(p.TERMINAL_KILL, self._terminal_call("kill"))
            conn.on_request(p.TERMINAL_RELEASE, self._terminal_call("release"))

    def _on_update(self, params: Any) -> None:
        if not isinstance(params, dict):
            logger.warning("%s: session/update without params object", self.name)
            return
        sid = params.get("sessionId")
        raw = params.get("update")
        if not isinstance(sid, str) or not isinstance(raw, dict):
            logger.warning("%s: malformed session/update: %r", self.name, params)
            return
        session = self.sessions.get(sid)
        if session is None:
            # Possibly sent before the session/new response that tells us the id: keep a few.
            pending = self._unknown_updates.setdefault(sid, [])
            if len(pending) < _UNKNOWN_SESSION_BUFFER and len(self._unknown_updates) < 64:
                pending.append(raw)
            return
        session._deliver(make_update(sid, raw))

    def _session_and_turn(self, params: Any) -> tuple[RemoteSession, PromptTurn | None, dict[str, Any]]:
        if not isinstance(params, dict):
            raise RpcError.invalid_params("params must be an object")
        sid = params.get("sessionId")
        session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise RpcError.invalid_params(f"unknown session {sid!r}", {"sessionId": sid})
        return session, session.current_turn, params

    @contextlib.contextmanager
    def _turn_work(self, turn: PromptTurn | None, method: str) -> Iterator[None]:
        """Serve an agent request as work of ``turn``: refused if the turn is being cancelled,
        cancelled with it (the turn cancels the task serving it), forgotten when done."""
        if turn is not None and turn.cancel_requested:
            raise RequestCancelledError(f"{method}: the turn is being cancelled")
        ctx = current_request()
        task = asyncio.current_task()
        if turn is None or ctx is None or task is None:
            yield
            return
        turn._incoming[ctx.id] = (method, task)
        try:
            yield
        finally:
            turn._incoming.pop(ctx.id, None)

    async def _on_permission(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        tool_call = params.get("toolCall")
        options = params.get("options")
        if not isinstance(tool_call, dict) or not isinstance(options, list):
            raise RpcError.invalid_params('"toolCall" must be an object and "options" an array')
        if turn is not None and turn.cancel_requested:
            return {"outcome": dict(CANCELLED_OUTCOME)}
        request = PermissionRequest(
            session.id, tool_call, [o for o in options if isinstance(o, dict)], params
        )
        ctx = current_request()
        try:
            with self._turn_work(turn, p.SESSION_REQUEST_PERMISSION):
                outcome = await self.services.permission(request)
        except asyncio.CancelledError:
            # Our turn cancel (not the agent's $/cancel_request): answer "cancelled" at once.
            if turn is not None and turn.cancel_requested and ctx is not None and not ctx.cancel_requested:
                return {"outcome": dict(CANCELLED_OUTCOME)}
            raise
        if turn is not None and turn.cancel_requested:
            return {"outcome": dict(CANCELLED_OUTCOME)}
        return {"outcome": validate_outcome(outcome, request)}

    async def _on_read(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        path = params.get("path")
        line = params.get("line")
        limit = params.get("limit")
        if not isinstance(path, str):
            raise RpcError.invalid_params('"path" must be a string')
        if (line is not None and type(line) is not int) or (limit is not None and type(limit) is not int):
            raise RpcError.invalid_params('"line" and "limit" must be integers')
        fs = self.services.fs
        assert fs is not None
        with self._turn_work(turn, p.FS_READ_TEXT_FILE):
            return {"content": await fs.read_text_file(session, path, line, limit)}

    async def _on_write(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        path = params.get("path")
        content = params.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            raise RpcError.invalid_params('"path" and "content" must be strings')
        fs = self.services.fs
        assert fs is not None
        with self._turn_work(turn, p.FS_WRITE_TEXT_FILE):
            await fs.write_text_file(session, path, content)
            return {}

    async def _on_terminal_create(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        terminals = self.services.terminals
        assert terminals is not None
        with self._turn_work(turn, p.TERMINAL_CREATE):
            terminal_id = await terminals.create(session, turn if turn is not None else session, params)
            return {"terminalId": terminal_id}

    def _terminal_call(self, name: str) -> Any:
        async def handler(params: Any) -> dict[str, Any]:
            session, turn, params = self._session_and_turn(params)
            terminal_id = params.get("terminalId")
            if not isinstance(terminal_id, str):
                raise RpcError.invalid_params('"terminalId" must be a string')
            terminals = self.services.terminals
            assert terminals is not None
            with self._turn_work(turn, f"terminal/{name}"):
                result = await getattr(terminals, name)(session, terminal_id)
                return result if isinstance(result, dict) else {}

        return handler


def _worst(resolutions: list[Resolution | None]) -> Resolution | None:
    order = [
        Resolution.KILLED,
        Resolution.AGENT_EXITED,
        Resolution.ERROR,
        Resolution.COMPLETED,
        Resolution.CANCELLED,
    ]
    present = [r for r in resolutions if r is not None]
    for r in order:
        if r in present:
            return r
    return None


async def launch(argv: Sequence[str], **options: Any) -> RemoteAgent:
    """Spawn an ACP agent and initialize it: ``agent = await launch(["my-agent", "--acp"])``."""
    return await RemoteAgent.launch(argv, **options)


__all__ = [
    "AgentExitedError",
    "AgentStartError",
    "CancelOutcome",
    "PromptTurn",
    "RemoteAgent",
    "RemoteSession",
    "ToolCallState",
    "TurnResult",
    "launch",
]
