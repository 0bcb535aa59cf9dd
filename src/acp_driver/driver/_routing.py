"""The agent's messages to the host: ``session/update`` routing and the client methods it calls.

Each agent request names a session; while that session has a turn running, the request is
served as work of the turn (``turn_work``): cancelled with it, and -- for a permission request
-- answered ``{"outcome": "cancelled"}`` the moment the turn is cancelled. Spec
(prompt-turn.mdx): "The Client MUST respond to all pending ``session/request_permission``
requests with the ``cancelled`` outcome."

Cleanup is never refused: while a turn is being cancelled, the agent's ``terminal/output``,
``terminal/wait_for_exit``, ``terminal/kill`` and ``terminal/release`` are answered normally
(they are how an agent tidies up in answer to the cancel).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..aio import current_request
from ..core import RequestCancelledError, RpcError, worth_logging
from ._permissions import CANCELLED_OUTCOME, PermissionRequest, validate_outcome
from ._prompt_turn import PromptTurn

if TYPE_CHECKING:
    from ._agent import AgentHandle
    from ._session import SessionHandle

logger = logging.getLogger("acp_driver.driver")

UNKNOWN_SESSION_BUFFER = 256
"""Updates kept per session id we do not know yet (sent before the ``session/new`` answer)."""
UNKNOWN_SESSIONS = 64

CLEANUP_METHODS = frozenset(
    {p.TERMINAL_OUTPUT, p.TERMINAL_WAIT_FOR_EXIT, p.TERMINAL_KILL, p.TERMINAL_RELEASE}
)
"""Agent requests that tidy up: never refused or cancelled because a turn is being cancelled."""


class AgentRequests:
    """Registers the host's handlers for what the agent sends, on the agent's connection."""

    def __init__(self, agent: AgentHandle) -> None:
        self.agent = agent
        self.unknown_updates: dict[str, list[dict[str, Any]]] = {}
        self.malformed_updates = 0
        """``session/update`` notifications without a session id and an update object."""
        conn = agent.connection
        conn.on_notification_run(p.SESSION_UPDATE, self.on_updates)
        self._asking: dict[Any, asyncio.Task[Any]] = {}
        """Permission requests whose policy runs, by id (what the agent's withdrawal cancels)."""
        conn.on_request(p.SESSION_REQUEST_PERMISSION, self.on_permission, on_cancel=self._question_withdrawn)
        conn.on_request(p.ELICITATION_CREATE, self.on_elicitation)
        services = agent.services
        if services.fs is not None:
            if services.fs.can_read:
                conn.on_request(p.FS_READ_TEXT_FILE, self.on_read)
            if services.fs.can_write:
                conn.on_request(p.FS_WRITE_TEXT_FILE, self.on_write)
        if services.terminals is not None:
            conn.on_request(p.TERMINAL_CREATE, self.on_terminal_create)
            for method, name in (
                (p.TERMINAL_OUTPUT, "output"),
                (p.TERMINAL_WAIT_FOR_EXIT, "wait_for_exit"),
                (p.TERMINAL_KILL, "kill"),
                (p.TERMINAL_RELEASE, "release"),
            ):
                conn.on_request(method, self._terminal_call(method, name))

    # ------------------------------------------------------------------ updates

    def on_updates(self, run: list[Any]) -> None:
        """The params of consecutive ``session/update`` notifications (one read's run), in order:
        each update object goes to its session (consecutive ones of a session at once)."""
        sessions = self.agent.sessions
        target: SessionHandle | None = None
        target_id: str | None = None
        raws: list[dict[str, Any]] = []
        for params in run:
            if type(params) is dict:
                sid = params.get("sessionId")
                raw = params.get("update")
            else:
                sid = raw = None
            if type(sid) is not str or type(raw) is not dict:
                self._malformed(params)
                continue
            if sid != target_id:
                session = sessions.get(sid)
                if session is None:
                    # Possibly sent before the session/new response that tells us the id: keep a few.
                    pending = self.unknown_updates.setdefault(sid, [])
                    if len(pending) < UNKNOWN_SESSION_BUFFER and len(self.unknown_updates) < UNKNOWN_SESSIONS:
                        pending.append(raw)
                    continue
                if raws:
                    assert target is not None
                    target.deliver_all(raws)
                    raws = []
                target = session
                target_id = sid
            raws.append(raw)
        if raws:
            assert target is not None
            target.deliver_all(raws)

    def _malformed(self, params: Any) -> None:
        self.malformed_updates += 1
        if worth_logging(self.malformed_updates):  # 1st, 10th, 100th...: never a flood
            logger.warning(
                "%s: malformed session/update (%d so far): %.200r",
                self.agent.name,
                self.malformed_updates,
                params,
            )

    def replay_unknown(self, session: SessionHandle) -> None:
        """Deliver the updates that named ``session`` before we knew it."""
        session.deliver_all(self.unknown_updates.pop(session.id, []))

    # ------------------------------------------------------------------ requests

    def _session_and_turn(self, params: Any) -> tuple[SessionHandle, PromptTurn | None, dict[str, Any]]:
        if not isinstance(params, dict):
            raise RpcError.invalid_params("params must be an object")
        sid = params.get("sessionId")
        session = self.agent.sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise RpcError.invalid_params(f"unknown session {sid!r}", {"sessionId": sid})
        return session, session.current_turn, params

    @contextlib.contextmanager
    def turn_work(self, turn: PromptTurn | None, method: str) -> Iterator[None]:
        """Serve an agent request as work of ``turn``: refused if the turn is being cancelled,
        cancelled with it (the turn cancels the task serving it), forgotten when done.
        Cleanup methods are served as plain requests: never refused, never cancelled."""
        if turn is None or method in CLEANUP_METHODS:
            yield
            return
        if turn.cancel_requested:
            raise RequestCancelledError(f"{method}: the turn is being cancelled")
        ctx = current_request()
        task = asyncio.current_task()
        if ctx is None or task is None:
            yield
            return
        turn.incoming[ctx.id] = (method, task)
        try:
            yield
        finally:
            turn.incoming.pop(ctx.id, None)

    async def on_permission(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        tool_call = params.get("toolCall")
        subject = params.get("subject")
        if tool_call is None and isinstance(subject, dict):  # v2: {subject: {type: tool_call, toolCall}}
            tool_call = subject.get("toolCall") if subject.get("type") == "tool_call" else subject
        options = params.get("options")
        if not isinstance(tool_call, dict) or not isinstance(options, list):
            raise RpcError.invalid_params(
                '"toolCall" (v2: "subject") must be an object and "options" an array'
            )
        turn = session.turn_of(tool_call.get("toolCallId"))
        # Spec: pending permission requests of a cancelled turn are answered "cancelled".
        if turn is not None and turn.cancel_requested:
            return {"outcome": dict(CANCELLED_OUTCOME)}
        ctx = current_request()
        if ctx is not None and ctx.cancel_requested:  # withdrawn before the policy ran
            if session.life.profile.withdrawn_question_cancelled:
                return {"outcome": dict(CANCELLED_OUTCOME)}
            raise RequestCancelledError("permission request withdrawn by the agent")
        request = PermissionRequest(
            session.id, tool_call, [o for o in options if isinstance(o, dict)], params, turn
        )
        task = asyncio.current_task()
        if ctx is not None and task is not None:
            self._asking[ctx.id] = task
        try:
            with self.turn_work(turn, p.SESSION_REQUEST_PERMISSION):
                outcome = await self.agent.services.permission(request)
        except asyncio.CancelledError:
            # Our turn cancel: answer "cancelled" at once -- also when the agent's withdrawal
            # ($/cancel_request, which allows a result) was read before this task unwound: a
            # fast agent withdraws in answer to session/cancel, and on uvloop that is often read
            # first. v2 also answers a withdrawal alone with the cancelled outcome (the newer
            # schema's rule); v1's is answered -32800.
            if request.cancelled_by_turn:
                return {"outcome": dict(CANCELLED_OUTCOME)}
            if session.life.profile.withdrawn_question_cancelled and ctx is not None and ctx.cancel_requested:
                return {"outcome": dict(CANCELLED_OUTCOME)}
            raise
        finally:
            if ctx is not None:
                self._asking.pop(ctx.id, None)
        if request.cancelled_by_turn:  # a policy that swallowed the cancel and answered anyway
            return {"outcome": dict(CANCELLED_OUTCOME)}
        return {"outcome": validate_outcome(outcome, request)}

    def _question_withdrawn(self, request_id: Any) -> None:
        """The agent's ``$/cancel_request`` for a permission request: its policy, if running, is
        cancelled; one not started yet sees the cancel when it starts (``on_permission``) -- so
        a withdrawal is answered by the version's rule whenever it lands (v2: ``cancelled``)."""
        task = self._asking.get(request_id)
        if task is not None:
            task.cancel("$/cancel_request")

    async def on_elicitation(self, params: Any) -> dict[str, Any]:
        """v2 ``elicitation/create``: the host's handler, or ``decline``; ``cancel`` when the turn
        it belongs to is cancelled or the agent withdraws it."""
        if not isinstance(params, dict):
            raise RpcError.invalid_params("params must be an object")
        sid = params.get("sessionId")
        session = self.agent.sessions.get(sid) if isinstance(sid, str) else None
        turn = session.turn_of(params.get("toolCallId")) if session is not None else None
        handler = self.agent.services.elicitation
        if handler is None:
            return {"action": "decline"}
        if turn is not None and turn.cancel_requested:
            return {"action": "cancel"}
        try:
            with self.turn_work(turn, p.ELICITATION_CREATE):
                answer = await handler(params)
        except asyncio.CancelledError:
            return {"action": "cancel"}
        if turn is not None and turn.cancel_requested:
            return {"action": "cancel"}
        return (
            answer
            if isinstance(answer, dict) and isinstance(answer.get("action"), str)
            else {"action": "decline"}
        )

    async def on_read(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        path = params.get("path")
        line = params.get("line")
        limit = params.get("limit")
        if not isinstance(path, str):
            raise RpcError.invalid_params('"path" must be a string')
        if (line is not None and type(line) is not int) or (limit is not None and type(limit) is not int):
            raise RpcError.invalid_params('"line" and "limit" must be integers')
        fs = self.agent.services.fs
        assert fs is not None
        with self.turn_work(turn, p.FS_READ_TEXT_FILE):
            return {"content": await fs.read_text_file(session, path, line, limit)}

    async def on_write(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        path = params.get("path")
        content = params.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            raise RpcError.invalid_params('"path" and "content" must be strings')
        fs = self.agent.services.fs
        assert fs is not None
        with self.turn_work(turn, p.FS_WRITE_TEXT_FILE):
            await fs.write_text_file(session, path, content)
            return {}

    async def on_terminal_create(self, params: Any) -> dict[str, Any]:
        session, turn, params = self._session_and_turn(params)
        terminals = self.agent.services.terminals
        assert terminals is not None
        with self.turn_work(turn, p.TERMINAL_CREATE):
            terminal_id = await terminals.create(session, turn if turn is not None else session, params)
            return {"terminalId": terminal_id}

    def _terminal_call(self, method: str, name: str) -> Any:
        async def handler(params: Any) -> dict[str, Any]:
            session, turn, params = self._session_and_turn(params)
            terminal_id = params.get("terminalId")
            if not isinstance(terminal_id, str):
                raise RpcError.invalid_params('"terminalId" must be a string')
            terminals = self.agent.services.terminals
            assert terminals is not None
            with self.turn_work(turn, method):
                result = await getattr(terminals, name)(session, terminal_id)
                return result if isinstance(result, dict) else {}

        return handler
