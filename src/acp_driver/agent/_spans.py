"""ACP v2 on the agent side: held prompts, insertion, spans of work, and the one idle per span.

In v2 the runtime, not the agent's code, keeps the lifecycle (an agent written on the runtime
only writes ``prompt(turn)``, as for v1):

- ``session/prompt`` with a content block the agent does not take (not ``text`` or
  ``resource_link``, nor opted in by ``Agent.prompt_capabilities``) is ``-32602`` at once.
- ``session/prompt`` is **held** while the session works (answered by nobody yet), then
  **inserted** in the order the prompts came: the runtime sends the ``user_message`` (with the
  ``messageId`` it made), ``state_update running``, answers the prompt ``{"messageId": ...}`` and
  starts the turn. A held prompt withdrawn with ``$/cancel_request`` is answered ``-32800``
  without touching the running span.
- The span ends with **exactly one idle** ``state_update`` carrying its stop reason, after every
  update the turn sent: the handler's own stop reason; ``error`` (with the error) when it raised
  -- never a JSON-RPC error after insertion; ``cancelled`` after a cancel, whatever the handler
  did (spec, prompt-lifecycle.mdx: "Agents MUST catch these errors and report the semantically
  meaningful ``cancelled`` stop reason"). A handler that ignores its cancel gets
  ``cancel_timeout`` (on the runtime's clock); then the turn is fenced and the idle sent anyway.
  The turn's own requests still pending are withdrawn first (``$/cancel_request``, a bounded
  wait for each).
- ``session/cancel`` cancels the running span **and every prompt held at that moment** (each
  answered ``-32800``), never a prompt sent after it. ``session/close`` does the same, sends the
  idle ``cancelled`` before its answer, and nothing of the session after it.
- While a permission request of the turn is pending the state is ``requires_action``, then
  ``running`` again.

Pure bookkeeping lives on ``Session`` (``held``, ``state``); the sending is the runtime's.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..aio import current_request, wait_on
from ..core import ConnectionClosedError, RequestCancelledError, RpcError
from ._params import check_params, params_problem
from ._turn import Session, Turn

if TYPE_CHECKING:
    from ._runtime import AgentRuntime

logger = logging.getLogger("acp_driver.agent")


class Spans:
    """The v2 lifecycle for one runtime (see the module docstring)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    def install(self) -> None:
        """Serve this connection's v2 methods (``initialize`` chose v2): prompts, cancels,
        close and resume by the v2 rules, v1's own methods answered ``-32601``."""
        conn = self.runtime.connection
        conn.on_request(p.SESSION_PROMPT, self.prompt)
        conn.on_notification(p.SESSION_CANCEL, self.session_cancel)
        conn.on_request(p.SESSION_CLOSE, self.close_session)
        conn.on_request(p.SESSION_RESUME, self.resume_session)
        conn.on_request(p.SESSION_LIST, self.list_sessions)
        conn.on_request(p.TOOL_CALL_CANCEL, self.cancel_tool_call)
        for method in (p.SESSION_LOAD, p.SESSION_SET_MODE, p.AUTHENTICATE):
            conn.on_request(method, _not_in_v2(method))

    # ------------------------------------------------------------------ prompts

    async def prompt(self, params: Any) -> dict[str, Any]:
        """``session/prompt`` in v2: hold, insert, answer with the message id, start the span."""
        runtime = self.runtime
        params = check_params(self.runtime.profile, p.SESSION_PROMPT, params)
        _refuse_unsupported_blocks(runtime.agent.prompt_capabilities, params["prompt"])
        session = runtime._session(params)
        ctx = current_request()
        task = asyncio.current_task()
        if session.turn is not None or session.held:
            gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (gate, task)
            session.held.append(entry)
            try:
                await gate  # released by the span before it, in order
            except asyncio.CancelledError:
                # $/cancel_request on this held prompt, session/cancel or close, the connection
                # closing: answered -32800 by the connection; the running span is untouched.
                if entry in session.held:
                    session.held.remove(entry)
                # Also when its gate was opened already (the cancel was read in the iteration that
                # released it): it was next, so the one after it is now.
                self._release_next(session)
                raise
        if session.closed:
            raise RequestCancelledError("the session was closed")
        turn = Turn(runtime, session, params, ctx.id if ctx is not None else None)
        turn.user_message_id = f"msg_{uuid.uuid4().hex[:16]}"
        session.turn = turn
        # Insertion, with no await from here to the answer: once the user message is inserted a
        # $/cancel_request cannot turn the answer into -32800 (the schema: "If the message has
        # already been inserted, the Agent MUST respond successfully with its messageId").
        self._send_now(
            session,
            {"sessionUpdate": "user_message", "messageId": turn.user_message_id, "content": turn.prompt},
        )
        if session.work_state != "running":
            session.work_state = "running"
            self._send_now(session, {"sessionUpdate": "state_update", "state": "running"})
        turn._start(self._run(turn), f"span {session.id}")
        turn.span = asyncio.get_running_loop().create_task(self._span(turn), name=f"span end {session.id}")
        return {"messageId": turn.user_message_id}

    async def _run(self, turn: Turn) -> Any:
        return await self.runtime.agent.prompt(turn)

    async def _span(self, turn: Turn) -> None:
        """Wait for the turn (or its cancel), then end the span with one idle."""
        runtime = self.runtime
        task = turn.task
        assert task is not None
        assert turn._settled is not None
        await turn._settled
        stop: str
        error: dict[str, Any] | None = None
        if turn.cancel_requested:
            if not task.done() and not await wait_on(runtime.clock, (task,), runtime.cancel_timeout):
                logger.warning(
                    "turn of session %s ignored cancellation for %.1fs; ending it cancelled and fencing it",
                    turn.session.id,
                    runtime.cancel_timeout,
                )
            stop = "cancelled"
        else:
            try:
                stop = self._stop_reason(task.result())
            except RpcError as exc:
                stop, error = "error", exc.to_error()
            except Exception as exc:
                logger.error("turn of session %s failed", turn.session.id, exc_info=exc)
                stop, error = "error", {"code": -32603, "message": f"Internal error: {type(exc).__name__}"}
        # The turn's own requests still pending are withdrawn ($/cancel_request, bounded).
        await self._withdraw(turn)
        turn._end()  # the fence: nothing of the turn after the idle
        await self._end_span(turn, stop, error)

    async def _withdraw(self, turn: Turn) -> None:
        runtime = self.runtime
        if turn.request_id is None:
            return
        pending = runtime.connection.cascade_cancel(turn.request_id, "the turn's work ended")
        if pending and turn.task is not None and not turn.task.done():
            await wait_on(runtime.clock, (turn.task,), runtime.request_cancel_grace)

    async def _end_span(self, turn: Turn, stop: str, error: dict[str, Any] | None) -> None:
        session = turn.session
        faults = self.runtime.faults
        if turn.cancel_requested:
            if faults.never_idle_on_cancel:
                logger.debug("fault: no idle after the cancel of %s", session.id)
                self._finish(session, turn)
                return
            if faults.stop_reason_on_cancel is not None:
                stop = faults.stop_reason_on_cancel
            elif faults.error_on_cancel:
                stop, error = "error", {"code": -32603, "message": "Operation aborted"}
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle"}
        if not faults.idle_without_stop_reason:
            update["stopReason"] = stop
        if error is not None and stop == "error":
            update["error"] = error
        session.work_state = "idle"
        try:
            await self._send(session, update)
        except ConnectionClosedError:  # the client is gone: no one to tell (and no task error left)
            logger.debug("connection closed before the idle of %s", session.id)
        finally:
            self._finish(session, turn)

    def _finish(self, session: Session, turn: Turn) -> None:
        if session.turn is turn:
            session.turn = None
        session.work_state = "idle"
        self._release_next(session)

    def _release_next(self, session: Session) -> None:
        if session.turn is None and session.held and not session.closed:
            gate, _task = session.held[0]
            session.held.popleft()
            if not gate.done():
                gate.set_result(None)

    def _stop_reason(self, outcome: Any) -> str:
        if outcome is None:
            return "end_turn"
        reason = outcome.get("stopReason") if isinstance(outcome, dict) else outcome
        if isinstance(reason, str) and (
            reason in self.runtime.profile.stop_reasons or reason.startswith("_")
        ):
            return reason
        raise RpcError.internal_error(f"agent returned an invalid stop reason {outcome!r}")

    # ------------------------------------------------------------------ state and cancels

    async def set_state(self, session: Session, state: str) -> None:
        """Report the session's foreground state (``running``, ``requires_action``)."""
        if session.work_state == state or session.closed:
            return
        session.work_state = state
        await self._send(session, {"sessionUpdate": "state_update", "state": state})

    async def _send(self, session: Session, update: dict[str, Any]) -> None:
        await self.runtime.connection.notify(p.SESSION_UPDATE, self._params(session, update))

    def _send_now(self, session: Session, update: dict[str, Any]) -> None:
        self.runtime.connection.notify_nowait(p.SESSION_UPDATE, self._params(session, update))

    def _params(self, session: Session, update: dict[str, Any]) -> dict[str, Any]:
        if update.get("sessionUpdate") == "state_update":
            if session.background:
                session.reports_background = True
            if session.reports_background:  # once reported, on every state update (the schema)
                update["background"] = list(session.background)
        return {"sessionId": session.id, "update": update}

    def cancel(self, session: Session, reason: str) -> Turn | None:
        """``session/cancel``: the running span and every prompt held now; returns the span's turn."""
        for _gate, task in list(session.held):
            if task is not None and not task.done():
                task.cancel(reason)
        turn = session.turn
        if turn is not None:
            turn.cancel(reason)
        return turn

    async def close(self, session: Session) -> None:
        """``session/close``: cancel as ``session/cancel``, wait for the idle (bounded), then
        nothing more of the session."""
        turn = self.cancel(session, "session/close")
        if turn is not None and turn.span is not None:
            await wait_on(
                self.runtime.clock,
                (turn.span,),
                self.runtime.cancel_timeout + self.runtime.request_cancel_grace + 1.0,
            )
        session.closed = True

    async def snapshot(self, session: Session) -> None:
        """The current-state ``state_update`` a resume sends after its replay, before its answer."""
        await self._send(session, {"sessionUpdate": "state_update", "state": session.work_state})

    # ------------------------------------------------------------------ handlers (v2)

    async def session_cancel(self, params: Any) -> None:
        """``session/cancel``: the span and the prompts held now (never one sent after it)."""
        runtime = self.runtime
        problem = params_problem(self.runtime.profile, p.SESSION_CANCEL, params)
        if problem is not None:  # a notification: never answered, only logged
            logger.debug("ignoring session/cancel: invalid params: %s", problem)
            return
        sid = params.get("sessionId")
        session = runtime.sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            logger.debug("session/cancel for unknown session %r", sid)
            return
        if runtime.faults.ignore_session_cancel:
            logger.debug("fault: ignoring session/cancel for %s", sid)
            return
        self.cancel(session, "session/cancel")

    async def close_session(self, params: Any) -> dict[str, Any]:
        """``session/close``: its work cancelled, the idle ``cancelled`` sent, then the answer and
        nothing more of the session. An unknown session is ``-32002`` (clients count it closed)."""
        runtime = self.runtime
        session = runtime._session(check_params(self.runtime.profile, p.SESSION_CLOSE, params))
        await self.close(session)
        if _implements_close(runtime):
            await runtime.agent.close_session(session)
        runtime.sessions.pop(session.id, None)
        return {}

    async def resume_session(self, params: Any) -> dict[str, Any]:
        """``session/resume``: the agent's replay (``replayFrom``), then the current state, then
        the answer. A session this runtime does not hold is resumed only by an agent that
        implements ``resume_session``; else ``-32002``."""
        runtime = self.runtime
        params = check_params(self.runtime.profile, p.SESSION_RESUME, params)
        replay = params.get("replayFrom")
        if replay is not None and not (isinstance(replay, dict) and replay.get("type") == "start"):
            raise RpcError.invalid_params(
                '"replayFrom": only {"type": "start"} is supported', {"replayFrom": replay}
            )
        sid = params.get("sessionId")
        if not isinstance(sid, str):
            raise RpcError.invalid_params('"sessionId" must be a string')
        session = runtime.sessions.get(sid)
        extra: dict[str, Any] = {}
        if _implements_resume(runtime):
            if session is None:
                session = runtime._open_session(sid, params)
            else:
                session.params = params  # what the agent reads: replayFrom, the roots
            extra = await runtime.agent.resume_session(session) or {}
        elif session is None:
            raise RpcError.resource_not_found(f"unknown session {sid!r}", {"sessionId": sid})
        await self.snapshot(session)
        return extra

    async def cancel_tool_call(self, params: Any) -> dict[str, Any]:
        """``tool_call/cancel``: accepted (the agent's code is told; it confirms with a final
        ``tool_call_update``) for a tool call that advertises it and is not final; else
        ``-32602``. It does not change the foreground state by itself."""
        params = check_params(self.runtime.profile, p.TOOL_CALL_CANCEL, params)
        session = self.runtime._session(params)
        call = session.tool_calls.get(params["toolCallId"])
        if call is None or call.final or not call.cancellable:
            raise RpcError.invalid_params(
                "unknown, final or not cancellable tool call", {"toolCallId": params.get("toolCallId")}
            )
        call.cancel_requested.set()
        return {}

    async def list_sessions(self, params: Any) -> dict[str, Any]:
        """``session/list``: the agent's own listing, or the sessions this runtime holds."""
        runtime = self.runtime
        params = check_params(self.runtime.profile, p.SESSION_LIST, params)
        if _implements_list(runtime):
            return await runtime.agent.list_sessions(params)
        cwd = params.get("cwd")
        return {
            "sessions": [
                {"sessionId": s.id, "cwd": s.cwd}
                for s in runtime.sessions.values()
                if not s.closed and (cwd is None or s.cwd == cwd)
            ]
        }


_BASELINE_BLOCKS = frozenset({"text", "resource_link"})
"""Content blocks every v2 agent takes in a prompt; the others only where advertised."""
_OPT_IN_BLOCKS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}
"""block type -> the prompt capability that admits it (``Agent.prompt_capabilities``)."""


def _refuse_unsupported_blocks(capabilities: dict[str, bool], prompt: list[dict[str, Any]]) -> None:
    """v2 (ContentBlock): "Agents MUST reject a session/prompt request with a content block type
    they do not support with -32602" -- before the prompt is held or inserted."""
    for i, block in enumerate(prompt):
        kind = block["type"]
        if kind in _BASELINE_BLOCKS or capabilities.get(_OPT_IN_BLOCKS.get(kind, "")):
            continue
        shown = kind if len(kind) <= 40 else kind[:40] + "..."
        raise RpcError.invalid_params(
            f"session/prompt: prompt[{i}] is a {shown!r} block, which this agent does not take "
            "(capabilities.session.prompt)",
            {"type": shown},
        )


def _not_in_v2(method: str) -> Any:
    async def refuse(params: Any) -> Any:
        raise RpcError.method_not_found(method)

    return refuse


def _implements_close(runtime: AgentRuntime) -> bool:
    from ._runtime import _implements

    return _implements(runtime.agent, "close_session")


def _implements_resume(runtime: AgentRuntime) -> bool:
    from ._runtime import _implements

    return _implements(runtime.agent, "resume_session")


def _implements_list(runtime: AgentRuntime) -> bool:
    from ._runtime import _implements

    return _implements(runtime.agent, "list_sessions")
