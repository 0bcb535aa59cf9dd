"""One agent under audit (``acp-driver check``): a process (or a connection) driven at the wire
level, with every message it sends recorded with the time it arrived.

Each probe negotiates its ACP version at ``initialize`` as the driver does: ``auto`` asks for 2
with v1's field names too (a v1 agent answers 1), ``1``/``2`` insist. The audit then judges the
agent by the rules of the version it answered (``version``).

The audit does not use the polite driver: it must be able to hold a permission request open,
send a malformed line, or see replies to notifications. What the agent sent is the evidence:
``incoming`` keeps every message with its arrival time (read off the wire by the connection's
tracer), so latencies are measured from the wire, never from when the audit got around to
looking.

Starting a fresh agent (the connection of a remote one, ``initialize``, ``authenticate``, its
first ``session/new`` and its mode) is bounded by ``start_timeout``, not by ``timeout``:
``--timeout`` is what a rule waits for the agent's reaction (a cancel landing, an answer), and a
process that is slow to come up (a runtime warming up, ``npx`` fetching the agent, a busy
machine) is not slow to react. The time a start step takes is not counted in the check's own
bound (``budget``) either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from .. import __version__
from .. import protocol as p
from ..aio import AgentProcess, Connection, ProcessGroup, StderrTail, exit_description
from ..core import (
    ConnectionClosedError,
    NegotiationError,
    RequestId,
    RpcError,
    Wanted,
    first_version,
    initialize_params,
    parse_json,
    profile_for,
    read_answer,
    retry_version,
)
from ..driver import AgentStartError
from ..trace import follow_connection, wire_tracer
from ._remote_options import credentials_hint
from ._text import excerpt

TURN_ACTIVITY = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "usage_update"}
)
"""``session/update`` kinds that show a turn at work. Session-level updates (available
commands, mode, config options, session info) do not: agents send them before any model call."""

TURN_ACTIVITY_V2 = p.TURN_UPDATES_V2 - {"user_message", "user_message_chunk"}
_ACTIVITY = {1: TURN_ACTIVITY, 2: TURN_ACTIVITY_V2}
"""v2: the updates that show foreground work at it (messages, thoughts, tool calls, plans,
terminals). Neither ``state_update`` (``running`` may come before any model call) nor the
session-wide ``usage_update`` (claude-agent-acp sends it before the model answers) counts."""

START_TIMEOUT = 30.0
"""What each step of a fresh agent's start may take: ``--start-timeout``'s default (unless
``--timeout`` is longer), the driver's own ``initialize`` bound."""

START_SLACK = 1.0
"""What a start step's room in the check's ``budget`` has beyond ``start_timeout``: the step's
own bound must go off first, as a ``SetupError`` (not tested), never as the check's bound."""

T = TypeVar("T")

SPAWNED: list[ProcessGroup] = []
"""Every agent process the audit started, so that an interrupted audit can still kill them all."""


class SetupError(Exception):
    """The agent could not be started or brought to a ready session."""


class AgentGone(Exception):
    """The agent's process exited (or closed its output) while the audit waited for it."""


def update_kind(message: dict[str, Any]) -> Any:
    """The ``sessionUpdate`` of a ``session/update`` notification, else None."""
    if message.get("method") != p.SESSION_UPDATE:
        return None
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return update.get("sessionUpdate") if isinstance(update, dict) else None


@dataclass(frozen=True)
class _Session:
    """What the host services need of a session (``services.SessionLike``)."""

    id: str
    cwd: str

    @property
    def roots(self) -> list[str]:
        return [self.cwd]


@dataclass
class Probe:
    """One agent process under audit."""

    argv: list[str]
    cwd: str
    """Where the agent process starts (the sessions' directory too)."""
    session_cwd: str
    """Every session's working directory (a throw-away directory unless ``--cwd``)."""
    timeout: float
    """``--timeout``: what a rule's request to the agent waits for its answer by default."""
    start_timeout: float = START_TIMEOUT
    """What each step of the start (the connection of a remote agent, ``initialize``,
    ``authenticate``, the first ``session/new`` and its mode) waits."""
    budget: asyncio.Timeout | None = None
    """The check's own bound, set by the audit: each start step pushes it back by the time it
    took, so that a slow start never eats the time of the rules."""
    auth: str | None = None
    """``--auth``: the ``authenticate`` method id sent after ``initialize``."""
    mode: str | None = None
    url: str | None = None
    """A remote agent's URL (``argv`` is then ``[url]``): a connection per probe, no process here."""
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    """``--cacert``: trust for a ``wss://``/``https://`` agent."""
    terminal: bool = False
    """``--terminal``: offer real terminals (``terminal/*`` run here, killed with the probe)."""
    protocol: str | int = 1
    """What to ask at ``initialize``: ``"auto"`` (2, with v1's field names too), ``1`` or ``2``."""
    version: int = 1
    """The version the agent speaks (the rules it is audited by)."""
    negotiation_note: str | None = None
    """Why ``version`` is not the one the agent claimed (``core.ECHO_NOTE``), if so."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """The agent's capabilities (v1 ``agentCapabilities``, v2 ``capabilities``)."""
    initialized: bool = False
    transport: Any = None
    process: ProcessGroup | None = None
    child: AgentProcess | None = None
    conn: Connection | None = None
    stderr: StderrTail = field(default_factory=lambda: StderrTail("audit"))
    incoming: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    outgoing: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """Every message the audit sent, with its place in the wire's order: how many messages of
    ``incoming`` had been read when it went out."""
    readings: dict[str, Any] = field(default_factory=dict)
    """Each session's ``_check_spans.WireTurns``, once a rule asked (kept: it reads on from
    where it stopped)."""
    activity: asyncio.Event = field(default_factory=asyncio.Event)
    arrival: asyncio.Event = field(default_factory=asyncio.Event)
    """Set whenever a message arrives (``wait_for`` re-reads the record then)."""
    peer_gone: asyncio.Event = field(default_factory=asyncio.Event)
    permission_handler: Callable[[Any], Awaitable[Any]] | None = None
    session_id: str | None = None
    agent_info: dict[str, Any] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    terminals: Any = None
    """The ``LocalTerminals`` serving ``--terminal``, once the agent asked for one."""
    trace: Any = None
    """With ``--trace``: this probe's ``TraceSink`` (bound to its check's name)."""

    async def start(self) -> None:
        with self._start_step():
            await self._start()

    async def _start(self) -> None:
        conn = self.conn = Connection(
            name="audit", tracer=wire_tracer(self._trace, self.trace), close_timeout=0.3
        )
        if self.trace is not None:
            follow_connection(conn, self.trace, owned=False)
        conn.on_peer_gone = lambda how: self.peer_gone.set()
        conn.on_request(p.SESSION_REQUEST_PERMISSION, self._permission)
        if self.terminal:
            self._serve_terminals(conn)
        if self.url is not None:
            from ..net import open_transport

            self.transport = await open_transport(
                self.url,
                conn,
                headers=self.headers,
                open_timeout=self.start_timeout,
                ssl_context=self.ssl_context,
            )
            return
        self.child = await AgentProcess.spawn(
            self.argv, conn, cwd=self.cwd, stderr=self.stderr, trace=self.trace
        )
        self.process = self.child.process
        SPAWNED.append(self.process)

    def _trace(self, direction: str, line: bytes) -> None:
        try:
            message = parse_json(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if direction != "in":
            self.outgoing.append((len(self.incoming), message))
            return
        self.incoming.append((time.monotonic(), message))
        self.arrival.set()
        if update_kind(message) in self.activity_kinds:
            self.activity.set()

    @property
    def session_updates(self) -> frozenset[str]:
        """The update kinds about the session (valid at any time), in the version spoken."""
        return profile_for(self.version).session_updates

    @property
    def activity_kinds(self) -> frozenset[str]:
        """The update kinds that show a turn at work, in the version spoken."""
        return _ACTIVITY[self.version]

    async def wait_for(self, found: Callable[[], T | None], timeout: float) -> T | None:
        """Re-read the record at every arrival until ``found()`` gives something (returned), or
        ``timeout`` passed (None). ``AgentGone`` if the agent goes away first."""
        deadline = time.monotonic() + timeout
        while True:
            self.arrival.clear()
            value = found()
            if value is not None:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self.peer_gone.is_set():
                raise AgentGone(await self.gone_reason_after_exit())
            arrived = asyncio.ensure_future(self.arrival.wait())
            gone = asyncio.ensure_future(self.peer_gone.wait())
            try:
                await asyncio.wait({arrived, gone}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrived.cancel()
                gone.cancel()

    async def _permission(self, params: Any) -> Any:
        if self.permission_handler is not None:
            return await self.permission_handler(params)
        return {"outcome": {"outcome": "cancelled"}}

    def _serve_terminals(self, conn: Connection) -> None:
        from ..services import LocalTerminals

        terminals = self.terminals = LocalTerminals()

        def session_of(params: Any) -> tuple[_Session, dict[str, Any]]:
            if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
                raise RpcError.invalid_params('"sessionId" must be a string')
            return _Session(params["sessionId"], self.session_cwd), params

        async def create(params: Any) -> dict[str, Any]:
            session, params = session_of(params)
            return {"terminalId": await terminals.create(session, session, params)}

        def call(name: str) -> Callable[[Any], Awaitable[dict[str, Any]]]:
            async def handler(params: Any) -> dict[str, Any]:
                session, params = session_of(params)
                terminal_id = params.get("terminalId")
                if not isinstance(terminal_id, str):
                    raise RpcError.invalid_params('"terminalId" must be a string')
                result = await getattr(terminals, name)(session, terminal_id)
                return result if isinstance(result, dict) else {}

            return handler

        conn.on_request(p.TERMINAL_CREATE, create)
        for method, name in (
            (p.TERMINAL_OUTPUT, "output"),
            (p.TERMINAL_WAIT_FOR_EXIT, "wait_for_exit"),
            (p.TERMINAL_KILL, "kill"),
            (p.TERMINAL_RELEASE, "release"),
        ):
            conn.on_request(method, call(name))

    def gone_reason(self) -> str:
        if self.transport is not None:
            return f"the connection to {self.url} ended: {self.transport.end_reason or 'closed'}"
        status = "running"
        if self.process is not None and self.process.returncode is not None:
            status = exit_description(self.process.returncode)
        return f"the agent closed its output ({status}; {self.stderr.describe(3)})"

    async def gone_reason_after_exit(self) -> str:
        """``gone_reason`` once the process had a moment to exit (its output closes first)."""
        if self.process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await self.process.wait()
        return self.gone_reason()

    async def until_gone(self, awaitable: Awaitable[Any]) -> Any:
        """Await ``awaitable``, or raise ``AgentGone`` as soon as the agent's process is gone."""
        work = asyncio.ensure_future(awaitable)
        gone = asyncio.ensure_future(self.peer_gone.wait())
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        if not work.done() or work.cancelled():
            raise AgentGone(await self.gone_reason_after_exit())
        if isinstance(work.exception(), ConnectionClosedError) and self.peer_gone.is_set():
            # The agent went away before the request could even be written: say how it went.
            raise AgentGone(await self.gone_reason_after_exit()) from work.exception()
        return work.result()

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        assert self.conn is not None
        limit = self.timeout if timeout is None else timeout
        return await self.until_gone(self.conn.request(method, params, timeout=limit))

    @contextlib.contextmanager
    def _start_step(self) -> Iterator[None]:
        """A step of the agent's start: the check's ``budget`` (if any) gets room for it, then
        keeps only the time the step really took."""
        budget = self.budget
        room = self.start_timeout + START_SLACK
        began = time.monotonic()
        _push_back(budget, room)
        try:
            yield
        finally:
            _push_back(budget, time.monotonic() - began - room)

    async def _start_request(self, method: str, params: Any) -> Any:
        """A request of the agent's start, bounded by ``start_timeout``."""
        with self._start_step():
            return await self.request(method, params, timeout=self.start_timeout)

    async def _step(self, what: str, method: str, params: Any, start: bool = True) -> Any:
        """A set-up request: of the agent's start (``start_timeout``), or not (``timeout``)."""
        try:
            if start:
                return await self._start_request(method, params)
            return await self.request(method, params)
        except (RpcError, TimeoutError, AgentGone) as exc:
            raise SetupError(f"{what}: {exc or type(exc).__name__}") from exc

    async def ready(self) -> str:
        """Start the agent, initialize, authenticate (``--auth``), open a session, set its mode."""
        await self.connect()
        return await self.new_session()

    async def connect(self) -> None:
        """Start the agent (or connect), negotiate the version at ``initialize``, authenticate
        (``--auth``; v2 ``auth/login``). Done once per probe."""
        if self.initialized:
            return
        try:
            await self.start()
        except (OSError, TimeoutError, ValueError) as exc:
            if self.url is not None:
                raise SetupError(f"cannot connect to {self.url}: {exc}{credentials_hint(exc, '; ')}") from exc
            what: object = exc
            if isinstance(exc, OSError):
                what = AgentStartError.spawn_reason(self.argv[0], exc, os.environ.get("PATH", os.defpath))
            raise SetupError(f"cannot start {self.argv[0]!r}: {what}") from exc
        await self._initialize()
        self.initialized = True
        if self.auth is not None:
            method = profile_for(self.version).auth_login
            await self._step(f"{method} {self.auth!r}", method, {"methodId": self.auth})

    async def _initialize(self) -> None:
        """``initialize``, negotiated by the driver's rule (``core``'s negotiation: ``auto``
        asks for 2 with both versions' field names and speaks what the agent answers -- by its
        shape, not only the number it echoes; after a ``-32022`` naming the versions it speaks,
        asks again for the newest of them we speak); ``1``/``2`` insist on that version."""
        wanted = cast(Wanted, self.protocol)
        try:
            result = await self._start_request(
                p.INITIALIZE, self._initialize_params(first_version(wanted), both=wanted == "auto")
            )
        except RpcError as exc:
            try:
                again = retry_version(wanted, exc.code, exc.data, p.UNSUPPORTED_PROTOCOL_VERSION)
            except NegotiationError as why:
                raise SetupError(f"initialize: {why}") from exc
            if again is None:
                raise SetupError(f"initialize: {exc}{credentials_hint(exc, '; ')}") from exc
            result = await self._step("initialize", p.INITIALIZE, self._initialize_params(again, both=False))
        except (TimeoutError, AgentGone) as exc:
            raise SetupError(f"initialize: {exc or type(exc).__name__}") from exc
        try:
            negotiated = read_answer(wanted, result)
        except NegotiationError as why:
            raise SetupError(f"initialize: {why} (--protocol)") from None
        if negotiated.note is not None:
            self.negotiation_note = negotiated.note
        self.version = negotiated.profile.version
        if negotiated.info:
            self.agent_info = negotiated.info
        if negotiated.capabilities:
            self.capabilities = negotiated.capabilities

    def _initialize_params(self, version: int, both: bool) -> dict[str, Any]:
        """v1's fields, v2's, or (``auto`` asking 2) both sets."""
        info = {"name": "acp-driver-check", "version": __version__}
        v1_caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": self.terminal}
        return initialize_params(version, both=both, info=info, capabilities={1: v1_caps, 2: {}})

    async def new_session(self) -> str:
        """``session/new`` (and ``session/set_mode`` with ``--mode``); the session's id. The
        probe's first session is part of the agent's start; a later one (a control turn's) is
        asked of an agent already up, which a wedged agent must not make wait ``start_timeout``."""
        start = self.session_id is None
        params = {"cwd": self.session_cwd, "mcpServers": []}
        result = await self._step("session/new", p.SESSION_NEW, params, start)
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise SetupError(f"session/new: invalid response {excerpt(result)}")
        self.session_id = sid
        if self.mode is not None and profile_for(self.version).modes_are_options:
            await self._step(
                f"session/set_config_option mode={self.mode!r}",
                p.SESSION_SET_CONFIG_OPTION,
                {"sessionId": sid, "configId": "mode", "type": "id", "value": self.mode},
                start,
            )
        elif self.mode is not None:
            await self._step(
                f"session/set_mode {self.mode!r}",
                p.SESSION_SET_MODE,
                {"sessionId": sid, "modeId": self.mode},
                start,
            )
        return sid

    def notify(self, method: str, params: Any) -> None:
        assert self.conn is not None
        self.conn.notify_nowait(method, params)

    def updates_after(
        self, since: float, session_id: str, until: float = float("inf")
    ) -> list[dict[str, Any]]:
        """Turn-scoped session/update messages of ``session_id`` received after ``since`` (and
        up to ``until``)."""
        late = []
        for at, message in self.incoming:
            if at <= since or at > until or message.get("method") != p.SESSION_UPDATE:
                continue
            params = message.get("params")
            if not isinstance(params, dict) or params.get("sessionId") != session_id:
                continue
            if update_kind(message) not in self.session_updates:
                late.append(message)
        return late

    def updates_after_answer(self, request_id: RequestId, session_id: str) -> list[dict[str, Any]]:
        """Turn-scoped session/update messages of ``session_id`` that came after the answer to
        ``request_id``, in the order of the wire (none if it was not answered)."""
        answered = next(
            (
                i
                for i, (_at, m) in enumerate(self.incoming)
                if "method" not in m and m.get("id") == request_id
            ),
            None,
        )
        if answered is None:
            return []
        return [
            message
            for _at, message in self.incoming[answered + 1 :]
            if message.get("method") == p.SESSION_UPDATE
            and isinstance(message.get("params"), dict)
            and message["params"].get("sessionId") == session_id
            and update_kind(message) not in self.session_updates
        ]

    def first_activity(self, after: float) -> tuple[float, str] | None:
        """When the first turn activity after ``after`` arrived, and its kind."""
        for at, message in self.incoming:
            kind = update_kind(message)
            if at > after and kind in self.activity_kinds:
                return at, str(kind)
        return None

    def replies_since(self, since: float, expected: set[Any]) -> list[dict[str, Any]]:
        """Response-shaped messages (with or without an id) after ``since``, but for ``expected`` ids."""
        return [
            message
            for at, message in self.incoming
            if at > since
            and "method" not in message
            and ("result" in message or "error" in message or "id" in message)
            and not ("id" in message and message["id"] in expected)
        ]

    def answered_at(self, request_id: RequestId) -> float | None:
        """When the answer to our request ``request_id`` arrived (off the wire), if it did."""
        for at, message in self.incoming:
            if "method" not in message and message.get("id") == request_id:
                return at
        return None

    def arrived_at(self, method: str, after: float, **params: Any) -> float | None:
        """When the first ``method`` message after ``after`` whose params hold ``params`` arrived."""
        for at, message in self.incoming:
            if at <= after or message.get("method") != method:
                continue
            got = message.get("params")
            if isinstance(got, dict) and all(got.get(k) == v for k, v in params.items()):
                return at
        return None

    async def close(self) -> str:
        """Reap the agent's whole group (and every terminal it had); returns how it ended."""
        conn = self.conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await conn.aclose("audit done")
        for task in self.tasks:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self.terminals is not None:
            await self.terminals.aclose()
        if self.transport is not None:
            with contextlib.suppress(Exception):
                await self.transport.aclose(0.5)
            return "connection closed"
        if self.child is None:
            return "not started"
        code = await self.child.reap(term_timeout=0.5)
        self.child.close_stderr()
        return exit_description(code)


def _push_back(budget: asyncio.Timeout | None, by: float) -> None:
    """Move ``budget``'s deadline ``by`` seconds later (earlier, if negative), unless it has none,
    went off already, or is no longer entered."""
    when = budget.when() if budget is not None and not budget.expired() else None
    if budget is None or when is None:
        return
    with contextlib.suppress(RuntimeError):  # exited: nothing left to bound
        budget.reschedule(when + by)


def absolute_paths(argv: list[str]) -> list[str]:
    """The agent's command line with relative paths made absolute: a relative program path
    (``./my-agent``), and any argument naming an existing file or directory from here
    (``python my_agent.py``). Options and other words are left as they are."""
    out = []
    for i, arg in enumerate(argv):
        relative = arg and not os.path.isabs(arg) and not arg.startswith("-")
        if relative and ((i == 0 and os.sep in arg) or (i > 0 and os.path.exists(arg))):
            arg = os.path.abspath(arg)
        out.append(arg)
    return out
