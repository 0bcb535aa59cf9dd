"""The agent runtime: serve an ``Agent`` over a connection with the spec's cancel rules built in.

Guarantees, whatever the agent's code does:

- ``session/cancel`` (or ``$/cancel_request`` naming the ``session/prompt``) cancels the turn's
  task and cascades ``$/cancel_request`` to every request the turn still has pending; updates
  already sent stay before the response; the ``session/prompt`` response is
  ``{"stopReason": "cancelled"}`` even if the handler raised, returned ``end_turn`` or swallowed
  the cancellation (spec: "Agents MUST catch these errors and return the semantically meaningful
  cancelled stop reason"). A ``$/cancel_request`` for the prompt is answered the same way: a valid
  result, which the spec allows for ``$/cancel_request``, so clients see one behaviour.
- A handler that ignores cancellation gets ``cancel_timeout`` to unwind; then the turn is
  answered ``cancelled`` anyway and fenced: whatever it sends later raises ``TurnEndedError``.
- ``session/cancel`` for an idle or unknown session does nothing and cannot affect a later turn.
- One turn per session at a time: a second ``session/prompt`` while one runs is refused with
  ``-32600`` ("session busy"); the running turn is not disturbed.
- Capabilities advertised in ``initialize`` are exactly the methods the agent implements; the
  others answer ``-32601``.
- Params are checked against the schema's required shape before any agent code runs
  (``_params``): a ``session/prompt`` without ``prompt``, or with a string ``prompt``, is
  ``-32602`` with the reason, never a turn.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
from ..aio import Clock, Connection, LoopClock, current_request, wait_on
from ..core import V1, ErrorCode, ProtocolProfile, RpcError, negotiate
from ._params import check_params, params_problem
from ._spans import Spans
from ._turn import Session, Turn

logger = logging.getLogger("acp_driver.agent")

CANCELLED = {"stopReason": "cancelled"}


class Agent:
    """Base class for ACP agents. Override ``prompt``; override the other methods you support.

    Only overridden optional methods are advertised and served; the rest answer ``-32601``.
    The runtime speaks both protocol versions (``protocol_versions``); in v2 it serves the
    baseline session methods (list, resume, close) with defaults of its own.
    """

    protocol_versions: tuple[int, ...] = (1, 2)
    """The ACP versions this agent serves (the client's choice among them, see ``negotiate``)."""

    name: str = "acp-driver-agent"
    title: str | None = None
    version: str = "0.0.0"
    prompt_capabilities: dict[str, bool] = {}
    """``image``, ``audio``, ``embeddedContext``: which prompt content types are accepted."""
    auth_methods: list[dict[str, Any]] = []
    """Advertised authentication methods; ``authenticate`` is served only if non-empty."""

    async def prompt(self, turn: Turn) -> str | dict[str, Any] | None:
        """Run one prompt turn; return a stop reason (``None`` means ``end_turn``)."""
        raise NotImplementedError

    async def new_session(self, session: Session) -> dict[str, Any] | None:
        """A session was created; return extra response fields (``modes``, ``configOptions``)."""
        return None

    async def authenticate(self, method_id: str, params: dict[str, Any]) -> dict[str, Any] | None:
        raise RpcError.method_not_found(p.AUTHENTICATE)

    async def load_session(self, session: Session) -> dict[str, Any] | None:
        """Replay the session's history with ``session.update``; return extra response fields."""
        raise RpcError.method_not_found(p.SESSION_LOAD)

    async def resume_session(self, session: Session) -> dict[str, Any] | None:
        raise RpcError.method_not_found(p.SESSION_RESUME)

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError.method_not_found(p.SESSION_LIST)

    async def close_session(self, session: Session) -> None:
        raise RpcError.method_not_found(p.SESSION_CLOSE)

    async def set_mode(self, session: Session, mode_id: str) -> dict[str, Any] | None:
        raise RpcError.method_not_found(p.SESSION_SET_MODE)

    async def set_config_option(self, session: Session, config_id: str, value: Any) -> dict[str, Any]:
        raise RpcError.method_not_found(p.SESSION_SET_CONFIG_OPTION)

    def extensions(self) -> dict[str, Callable[[Any], Any]]:
        """Extension methods (names start with ``_``, per ACP extensibility): name -> handler
        (``async def``, or a plain ``def`` answered inline)."""
        return {}

    def extension_notifications(self) -> dict[str, Callable[[Any], Any]]:
        """Extension notifications: name -> handler."""
        return {}


def _implements(agent: Agent, name: str) -> bool:
    return getattr(type(agent), name, None) is not getattr(Agent, name)


_V2_BASELINE = frozenset({p.SESSION_LIST, p.SESSION_RESUME, p.SESSION_CLOSE})
"""v2's baseline session methods: served by every v2 agent (the runtime has a default for each)."""


@dataclass
class Faults:
    """Deliberate misbehaviour, for testing hosts against agents that get cancellation wrong.

    Never set these in a real agent. The reference agent's ``--behavior`` maps onto them.
    """

    ignore_session_cancel: bool = False
    """``session/cancel`` is ignored: the turn runs to its end."""
    stop_reason_on_cancel: str | None = None
    """Answer a cancelled turn with this stop reason instead of ``cancelled`` (e.g. ``end_turn``)."""
    error_on_cancel: bool = False
    """Answer a cancelled turn with a JSON-RPC error instead of ``cancelled``."""
    never_idle_on_cancel: bool = False
    """v2: after a cancel, never send the idle that ends the span."""
    idle_without_stop_reason: bool = False
    """v2: idle ``state_update`` without a ``stopReason``."""


class AgentRuntime:
    """Serves one ``Agent`` on one ``Connection``."""

    def __init__(
        self,
        agent: Agent,
        connection: Connection,
        *,
        cancel_timeout: float = 2.0,
        request_cancel_grace: float = 0.5,
        faults: Faults | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.agent = agent
        self.connection = connection
        self.clock: Clock = clock if clock is not None else LoopClock()
        """What ``cancel_timeout`` is measured on (a fake clock in tests)."""
        self.cancel_timeout = cancel_timeout
        """How long a cancelled turn may take to unwind before it is answered ``cancelled`` anyway."""
        self.request_cancel_grace = request_cancel_grace
        """How long a cancelled turn waits for the client to answer each of its pending requests."""
        self.faults = faults or Faults()
        self.sessions: dict[str, Session] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] | None = None
        self.protocol_version: int | None = None
        self.profile: ProtocolProfile = V1
        """The protocol version spoken on this connection, fixed by ``initialize``."""
        self.spans = Spans(self)
        """v2: held prompts, spans of work, the one idle per span (``_spans``)."""
        self._register()

    # ------------------------------------------------------------------ registry

    def _register(self) -> None:
        conn = self.connection
        agent = self.agent
        conn.on_request(p.INITIALIZE, self._initialize)
        conn.on_request(p.SESSION_NEW, self._new_session)
        conn.on_request(p.SESSION_PROMPT, self._prompt, on_cancel=self._prompt_cancel_request)
        conn.on_notification(p.SESSION_CANCEL, self._session_cancel)
        optional: list[tuple[str, str, Callable[[Any], Awaitable[Any]]]] = [
            ("load_session", p.SESSION_LOAD, self._load_session),
            ("resume_session", p.SESSION_RESUME, self._resume_session),
            ("list_sessions", p.SESSION_LIST, self._list_sessions),
            ("close_session", p.SESSION_CLOSE, self._close_session),
            ("set_mode", p.SESSION_SET_MODE, self._set_mode),
            ("set_config_option", p.SESSION_SET_CONFIG_OPTION, self._set_config_option),
        ]
        for attr, method, handler in optional:
            if _implements(agent, attr) or method in _V2_BASELINE:
                conn.on_request(method, handler)
        if agent.auth_methods and _implements(agent, "authenticate"):
            for method in (p.AUTHENTICATE, p.AUTH_LOGIN):  # v1's name, v2's
                conn.on_request(method, self._authenticate_as(method))
        for name, handler in agent.extensions().items():
            if not name.startswith("_"):
                raise ValueError(f"extension method names start with '_': {name!r}")
            conn.on_request(name, handler)
        for name, notification_handler in agent.extension_notifications().items():
            if not name.startswith("_"):
                raise ValueError(f"extension notification names start with '_': {name!r}")
            conn.on_notification(name, notification_handler)

    def capabilities(self) -> dict[str, Any]:
        """The ``agentCapabilities`` advertised: derived from what the agent implements."""
        agent = self.agent
        session_caps: dict[str, Any] = {}
        for attr, key in (
            ("list_sessions", "list"),
            ("resume_session", "resume"),
            ("close_session", "close"),
        ):
            if _implements(agent, attr):
                session_caps[key] = {}
        return {
            "loadSession": _implements(agent, "load_session"),
            "promptCapabilities": {
                "image": bool(agent.prompt_capabilities.get("image")),
                "audio": bool(agent.prompt_capabilities.get("audio")),
                "embeddedContext": bool(agent.prompt_capabilities.get("embeddedContext")),
            },
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": session_caps,
        }

    # ------------------------------------------------------------------ handlers

    async def _initialize(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.INITIALIZE, params)  # what every version requires
        version = params.get("protocolVersion")
        if type(version) is not int:
            raise RpcError.invalid_params('"protocolVersion" must be an integer')
        # Version negotiation: the client's version if we speak it, else the highest below it
        # (a client asking 0 gets 1). v2 names its fields info/capabilities; a client asking 2
        # may send v1's names too, so that a v1 agent can answer it.
        profile = negotiate(version, self.agent.protocol_versions)
        if profile.version == version:  # the client wrote this version's initialize: its schema
            check_params(profile, p.INITIALIZE, params)
        self.profile = profile
        self.protocol_version = self.profile.version
        if profile.holds_prompts:
            self.spans.install()  # the version's handlers for prompts, cancels, close, resume
        caps = params.get(profile.client_capabilities_field)
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        info = params.get(profile.client_info_field)
        self.client_info = info if isinstance(info, dict) else None
        agent_info: dict[str, Any] = {"name": self.agent.name, "version": self.agent.version}
        if self.agent.title:
            agent_info["title"] = self.agent.title
        advertised = {1: self.capabilities, 2: self.capabilities_v2}[profile.version]
        return {
            "protocolVersion": self.protocol_version,
            profile.capabilities_field: advertised(),
            "authMethods": list(self.agent.auth_methods),
            profile.info_field: agent_info,
        }

    def capabilities_v2(self) -> dict[str, Any]:
        """v2's ``capabilities``: ``session`` present means the baseline session methods
        (new, list, resume, close, prompt, cancel) are all served."""
        prompt: dict[str, Any] = {
            kind: {}
            for kind in ("image", "audio", "embeddedContext")
            if self.agent.prompt_capabilities.get(kind)
        }
        return {"session": {"prompt": prompt}}

    def _authenticate_as(self, method: str) -> Callable[[Any], Awaitable[dict[str, Any]]]:
        async def authenticate(params: Any) -> dict[str, Any]:
            params = check_params(self.profile, method, params)
            method_id = params.get("methodId")
            if not isinstance(method_id, str):
                raise RpcError.invalid_params('"methodId" must be a string')
            return await self.agent.authenticate(method_id, params) or {}

        return authenticate

    def _open_session(self, session_id: str, params: dict[str, Any]) -> Session:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise RpcError.invalid_params('"cwd" must be an absolute path')
        session = Session(self, session_id, cwd, params)
        self.sessions[session_id] = session
        return session

    async def _new_session(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.SESSION_NEW, params)
        session = self._open_session(f"sess_{uuid.uuid4().hex[:16]}", params)
        try:
            extra = await self.agent.new_session(session)
        except BaseException:
            self.sessions.pop(session.id, None)
            raise
        return {"sessionId": session.id, **(extra or {})}

    async def _load_session(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.SESSION_LOAD, params)
        session = self._open_session(_session_id(params), params)
        try:
            return await self.agent.load_session(session) or {}
        except BaseException:
            self.sessions.pop(session.id, None)
            raise

    async def _resume_session(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.SESSION_RESUME, params)
        sid = _session_id(params)
        session = self.sessions.get(sid) or self._open_session(sid, params)
        return await self.agent.resume_session(session) or {}

    async def _list_sessions(self, params: Any) -> dict[str, Any]:
        return await self.agent.list_sessions(check_params(self.profile, p.SESSION_LIST, params))

    async def _close_session(self, params: Any) -> dict[str, Any]:
        session = self._session(check_params(self.profile, p.SESSION_CLOSE, params))
        if session.turn is not None:
            await self._cancel_and_wait(session.turn, "session/close")
        await self.agent.close_session(session)
        self.sessions.pop(session.id, None)
        return {}

    async def _set_mode(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.SESSION_SET_MODE, params)
        session = self._session(params)
        mode_id = params.get("modeId")
        if not isinstance(mode_id, str):
            raise RpcError.invalid_params('"modeId" must be a string')
        result = await self.agent.set_mode(session, mode_id)
        session.mode = mode_id
        return result or {}

    async def _set_config_option(self, params: Any) -> dict[str, Any]:
        params = check_params(self.profile, p.SESSION_SET_CONFIG_OPTION, params)
        session = self._session(params)
        config_id = params.get("configId")
        if not isinstance(config_id, str):
            raise RpcError.invalid_params('"configId" must be a string')
        return await self.agent.set_config_option(session, config_id, params.get("value"))

    def _session(self, params: dict[str, Any]) -> Session:
        sid = _session_id(params)
        session = self.sessions.get(sid)
        if session is None:
            raise RpcError.resource_not_found(f"unknown session {sid!r}", {"sessionId": sid})
        return session

    # ------------------------------------------------------------------ prompt turns

    async def _prompt(self, params: Any) -> Any:
        params = check_params(self.profile, p.SESSION_PROMPT, params)
        session = self._session(params)
        if session.turn is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "session busy: a prompt turn is already running in this session",
                {"sessionId": session.id},
            )
        ctx = current_request()
        turn = Turn(self, session, params, ctx.id if ctx is not None else None)
        session.turn = turn
        # The turn runs in its own task (it inherits this request's context, so its requests
        # are children of the prompt); this handler stays free to answer when it is cancelled.
        settled = turn._start(self._run_turn(turn), f"turn {session.id}")
        task = turn.task
        assert task is not None
        if ctx is not None and ctx.cancel_requested and self.connection.honours_cancel_request:
            # $/cancel_request came in the same read as the prompt, before this handler ran.
            turn.cancel("$/cancel_request")
        try:
            try:
                # Woken once: by the turn's end, or by its cancel (``Turn.cancel`` cancels the
                # task before it settles this future, so when the turn unwinds in one step --
                # the usual case -- it has ended by the time this handler runs again).
                await settled
            except asyncio.CancelledError:
                # $/cancel_request for the prompt, or the connection is closing: same as session/cancel.
                if not task.done():
                    turn.cancel("$/cancel_request" if self.connection.is_open else "connection closing")
            if turn.cancel_requested:
                if not task.done():
                    await self._unwind(turn)
                elif not task.cancelled() and task.exception() is not None:
                    self._log_unwound(turn)
                # Spec (prompt-turn.mdx): "Agents MUST catch these errors and return the
                # semantically meaningful cancelled stop reason" -- whatever the handler did.
                return self._cancelled_answer(turn)
            return task.result()
        finally:
            if session.turn is turn:
                session.turn = None
            turn._end()

    async def _run_turn(self, turn: Turn) -> Any:
        try:
            return _stop_reason(await self.agent.prompt(turn), self.profile)
        finally:
            turn._settle()  # wakes ``_prompt`` now, not one loop iteration after the task's end

    async def _unwind(self, turn: Turn) -> None:
        """Give a cancelled turn's task ``cancel_timeout`` to end; what it ends with does not
        matter any more (the answer is ``cancelled``). A task still running then is fenced."""
        task = turn.task
        assert task is not None
        timeout = self.cancel_timeout if self.connection.is_open else min(self.cancel_timeout, 0.3)
        if not await wait_on(self.clock, (task,), timeout):
            logger.warning(
                "turn of session %s ignored cancellation for %.1fs; answering cancelled and fencing it",
                turn.session.id,
                timeout,
            )
            turn._end()  # fenced before its answer is queued
        elif not task.cancelled() and task.exception() is not None:
            self._log_unwound(turn)

    def _log_unwound(self, turn: Turn) -> None:
        assert turn.task is not None
        logger.debug(
            "turn of %s raised while cancelled; answering cancelled",
            turn.session.id,
            exc_info=turn.task.exception(),
        )

    def _cancelled_answer(self, turn: Turn) -> Any:
        faults = self.faults
        if faults.error_on_cancel:
            raise RpcError(ErrorCode.INTERNAL_ERROR, "Operation aborted", {"reason": turn.cancel_reason})
        if faults.stop_reason_on_cancel is not None:
            return {"stopReason": faults.stop_reason_on_cancel}
        return CANCELLED

    def _prompt_cancel_request(self, request_id: Any) -> None:
        """``$/cancel_request`` naming a ``session/prompt``: cancel its turn, which then answers
        ``{"stopReason": "cancelled"}`` like after ``session/cancel`` (one behaviour for clients).
        A prompt whose handler has not started yet sees the cancel when it starts."""
        for session in self.sessions.values():
            turn = session.turn
            if turn is not None and turn.request_id == request_id:
                turn.cancel("$/cancel_request")
                return

    def _session_cancel(self, params: Any) -> Awaitable[None] | None:
        """``session/cancel``, handled as it is read: the turn's task is cancelled in the same
        loop iteration (no task per cancel)."""
        session = self._turn_to_cancel(params, log=False)
        if session is None:
            # No turn (yet): a session/prompt read just before this cancel may not have started.
            # As a coroutine, the connection starts this as a task, after that prompt's task has
            # taken its first step (and registered its turn).
            return self._session_cancel_later(params)
        self._cancel_turn(session)
        return None

    async def _session_cancel_later(self, params: Any) -> None:
        session = self._turn_to_cancel(params, log=True)
        if session is not None:
            self._cancel_turn(session)

    def _turn_to_cancel(self, params: Any, *, log: bool) -> Session | None:
        """The session whose running turn ``session/cancel`` names (None: nothing to cancel)."""
        problem = params_problem(self.profile, p.SESSION_CANCEL, params)
        if problem is not None:  # a notification: never answered, only logged
            if log:
                logger.debug("ignoring session/cancel: invalid params: %s", problem)
            return None
        sid = params.get("sessionId")
        session = self.sessions.get(sid)
        if session is None or session.turn is None:
            if log:
                logger.debug("session/cancel for idle or unknown session %r: nothing to cancel", sid)
            return None
        return session

    def _cancel_turn(self, session: Session) -> None:
        assert session.turn is not None
        if self.faults.ignore_session_cancel:
            logger.debug("fault: ignoring session/cancel for %s", session.id)
            return
        session.turn.cancel("session/cancel")

    async def _cancel_and_wait(self, turn: Turn, reason: str) -> None:
        turn.cancel(reason)
        if turn.task is not None:
            await wait_on(self.clock, (turn.task,), self.cancel_timeout)


def _session_id(params: dict[str, Any]) -> str:
    sid = params.get("sessionId")
    if not isinstance(sid, str):
        raise RpcError.invalid_params('"sessionId" must be a string')
    return sid


def _stop_reason(outcome: Any, profile: ProtocolProfile) -> dict[str, Any]:
    if outcome is None:
        return {"stopReason": "end_turn"}
    if isinstance(outcome, str):
        if outcome not in profile.stop_reasons:
            raise RpcError.internal_error(f"agent returned an unknown stop reason {outcome!r}")
        return {"stopReason": outcome}
    if isinstance(outcome, dict) and outcome.get("stopReason") in profile.stop_reasons:
        return outcome
    raise RpcError.internal_error(f"agent returned an invalid prompt result {outcome!r}")


async def serve_stdio(
    agent: Agent,
    *,
    cancel_timeout: float = 2.0,
    request_cancel_grace: float = 0.5,
    faults: Faults | None = None,
    honour_cancel_request: bool = True,
    trace: Any = None,
) -> None:
    """Serve ``agent`` on this process's stdin/stdout until stdin ends (then return within ~1 s).

    ``trace``: a file path or a ``trace.TraceSink`` (e.g. ``OtelSink``) that sees every message
    (``dir`` relative to the agent: ``in`` comes from the client)."""
    from ..aio import open_stdio

    sink = None
    if trace is not None:
        from ..trace import follow_connection, open_trace

        sink, owned = open_trace(trace, role="agent")
    traced: dict[str, Any] = {"tracer": sink.wire} if sink is not None else {}
    connection = Connection(
        name="agent", close_timeout=0.5, honour_cancel_request=honour_cancel_request, **traced
    )
    if sink is not None:
        follow_connection(connection, sink, owned)
    runtime = AgentRuntime(
        agent,
        connection,
        cancel_timeout=cancel_timeout,
        request_cancel_grace=request_cancel_grace,
        faults=faults,
    )
    await open_stdio(connection)
    await connection.wait_closed()
    # Turns that ignore cancellation must not keep the process alive.
    leftovers = [
        s.turn.task for s in runtime.sessions.values() if s.turn is not None and s.turn.task is not None
    ]
    for task in leftovers:
        task.cancel()
    if leftovers:
        await asyncio.wait(leftovers, timeout=0.2)


def run_agent(
    agent: Agent, *, loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None, **options: Any
) -> None:
    """Run ``agent`` on stdio until stdin ends: the usual ``if __name__ == "__main__"`` entry point.

    ``loop_factory`` makes its event loop (e.g. ``uvloop.new_event_loop``; by default
    ``asyncio.new_event_loop``, which follows the loop policy). If a turn still refuses to stop
    after its cancellation, the process exits anyway (``os._exit``): an agent must not outlive
    its client's pipe.
    """
    loop = (loop_factory or asyncio.new_event_loop)()
    try:
        loop.run_until_complete(serve_stdio(agent, **options))
        leftovers = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if leftovers:
            import os
            import sys

            logger.warning("%d task(s) ignore cancellation at exit; exiting hard", len(leftovers))
            sys.stderr.flush()
            os._exit(0)
    finally:
        loop.close()
