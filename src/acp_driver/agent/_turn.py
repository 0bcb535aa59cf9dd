"""Sessions and prompt turns as the agent author sees them.

A ``Turn`` is the only way a prompt handler talks to the client: updates (message and thought
chunks, tool calls, plan) and requests (permission, files, terminals). Everything a turn sends
belongs to it: once the runtime has answered the turn's ``session/prompt``, the turn is *ended*
and every further send raises ``TurnEndedError`` -- nothing of a turn is ever sent after its
response (spec: updates after ``session/cancel`` MUST come before the response).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .. import protocol as p
from ..core import AcpError, AgentTurnEvent, AgentTurnMachine, RpcError

if TYPE_CHECKING:
    from ._runtime import AgentRuntime

_tool_ids = itertools.count(1)


class _Foreground(Protocol):
    """Where a turn reports the session's foreground state (v2's ``state_update``)."""

    async def set_state(self, session: Session, state: str) -> None: ...


class _NoForeground:
    """A version without foreground states (v1): nothing to report."""

    async def set_state(self, session: Session, state: str) -> None:
        return None


_NO_FOREGROUND = _NoForeground()


class TurnEndedError(AcpError):
    """The turn's ``session/prompt`` was answered (or cancelled): it can send nothing more."""


class CapabilityError(RpcError):
    """The client did not advertise the capability this call needs; nothing was sent."""

    def __init__(self, method: str) -> None:
        super().__init__(-32601, f"the client does not support {method}", {"method": method})


class Session:
    """One ACP session held by the runtime."""

    def __init__(self, runtime: AgentRuntime, session_id: str, cwd: str, params: dict[str, Any]) -> None:
        self.runtime = runtime
        self.id = session_id
        self.cwd = cwd
        self.params = params
        """The ``session/new`` (or load/resume) params as received."""
        self.turn: Turn | None = None
        """The running prompt turn, if any."""
        self.held: collections.deque[tuple[asyncio.Future[None], asyncio.Task[Any] | None]] = (
            collections.deque()
        )
        """v2: prompts waiting to be inserted, in order (a gate and the task serving each)."""
        self.work_state = "idle"
        """v2: the foreground state last reported (``idle``, ``running``, ``requires_action``)."""
        self.closed = False
        """v2: ``session/close`` ended it; nothing more of it is sent."""
        self.tool_calls: dict[str, ToolCall] = {}
        """The tool calls its turns reported, by id (v2: ``tool_call/cancel`` finds them here)."""
        self.background: list[dict[str, Any]] = []
        """v2: the background work the agent runs for this session (``{"type": "tool_call",
        "toolCallId": ...}`` / ``{"type": "terminal", "terminalId": ...}``): listed on every
        ``state_update`` once the agent reported any."""
        self.reports_background = False
        self.mode: str | None = None
        self.state: dict[str, Any] = {}
        """Free space for the agent's own per-session state (history, model, ...)."""

    async def update(self, update: dict[str, Any]) -> None:
        """Send a ``session/update`` that is not part of a turn (commands, mode, title, usage;
        in v2 also background work after a turn's idle). Raises ``TurnEndedError`` once the
        session was closed (v2: nothing of it after the close's answer)."""
        if self.closed:
            raise TurnEndedError(f"session {self.id} is closed; update not sent")
        await self.runtime.connection.notify(p.SESSION_UPDATE, {"sessionId": self.id, "update": update})

    def __repr__(self) -> str:
        return f"Session({self.id!r}, cwd={self.cwd!r})"


class ToolCall:
    """A tool call reported by a turn; ``update``/``complete``/``fail`` report its progress."""

    def __init__(self, turn: Turn, tool_call_id: str, title: str, kind: str) -> None:
        self.turn = turn
        self.id = tool_call_id
        self.title = title
        self.kind = kind
        self.status = "pending"
        self.cancellable = False
        """v2: advertises ``capabilities.cancel`` (the client may send ``tool_call/cancel``)."""
        self.cancel_requested = asyncio.Event()
        """v2: set when the client sent ``tool_call/cancel`` for it: stop, then report
        ``cancelled`` (``await call.update("cancelled")``)."""

    @property
    def final(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    async def update(self, status: str | None = None, **fields: Any) -> None:
        """Send a ``tool_call_update``; ``fields`` are wire names (``content``, ``rawOutput``...)."""
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": self.id}
        if status is not None:
            update["status"] = status
            self.status = status
        update.update(fields)
        await self.turn.update(update)

    async def complete(self, text: str | None = None, **fields: Any) -> None:
        if text is not None:
            fields.setdefault("content", [text_content(text)])
        await self.update("completed", **fields)

    async def fail(self, text: str | None = None, **fields: Any) -> None:
        if text is not None:
            fields.setdefault("content", [text_content(text)])
        await self.update("failed", **fields)

    def as_update(self) -> dict[str, Any]:
        """This tool call as a ``ToolCallUpdate`` (what a permission request refers to)."""
        return {"toolCallId": self.id, "title": self.title, "kind": self.kind, "status": self.status}


class Terminal:
    """A terminal the client runs for this turn (``terminal/*`` methods)."""

    def __init__(self, turn: Turn, terminal_id: str) -> None:
        self.turn = turn
        self.id = terminal_id

    async def output(self) -> dict[str, Any]:
        return await self.turn.request(p.TERMINAL_OUTPUT, self._params())  # type: ignore[no-any-return]

    async def wait_for_exit(self) -> dict[str, Any]:
        return await self.turn.request(p.TERMINAL_WAIT_FOR_EXIT, self._params())  # type: ignore[no-any-return]

    async def kill(self) -> None:
        await self.turn.request(p.TERMINAL_KILL, self._params())

    async def release(self) -> None:
        await self.turn.request(p.TERMINAL_RELEASE, self._params())

    def _params(self) -> dict[str, Any]:
        return {"sessionId": self.turn.session.id, "terminalId": self.id}


def text_content(text: str) -> dict[str, Any]:
    """A ``ToolCallContent`` holding plain text."""
    return {"type": "content", "content": {"type": "text", "text": text}}


class Turn:
    """One prompt turn: what the client asked, and the means to answer it."""

    def __init__(
        self, runtime: AgentRuntime, session: Session, params: dict[str, Any], request_id: Any
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.params = params
        self.request_id = request_id
        """Id of the ``session/prompt`` request this turn answers."""
        prompt = params.get("prompt")
        self.prompt: list[dict[str, Any]] = prompt if isinstance(prompt, list) else []
        self._state = AgentTurnMachine()
        self.task: asyncio.Task[Any] | None = None
        self._after_end: list[Callable[[], object]] = []
        self._settled: asyncio.Future[None] | None = None
        """Set by the runtime: done once the turn's task ended or the turn was cancelled."""
        self._notify = runtime.connection.notify
        self._shapes = runtime.profile.shapes
        self.user_message_id: str | None = None
        """v2: the ``messageId`` the runtime gave the prompt when it inserted it."""
        self.span: asyncio.Task[None] | None = None
        """v2: the runtime's task that ends the span (done once its idle is sent)."""
        self._ids: dict[str, str] = {}
        self._permissions = 0
        self._foreground: _Foreground = runtime.spans if runtime.profile.holds_prompts else _NO_FOREGROUND
        """Where the session's foreground state is reported (v2: the runtime's spans; a version
        with no such state: nowhere)."""
        self._cancellable_calls = runtime.profile.cancellable_tool_calls

    @property
    def cancel_requested(self) -> bool:
        """The client cancelled the turn (``session/cancel`` or ``$/cancel_request`` on the prompt)."""
        return self._state.cancel_requested

    @property
    def cancel_reason(self) -> str | None:
        return self._state.cancel_reason

    @property
    def ended(self) -> bool:
        """The turn's prompt is answered: it is fenced, nothing of it can be sent any more."""
        return self._state.ended

    @property
    def text(self) -> str:
        """The text blocks of the prompt, joined by newlines."""
        return "\n".join(
            block.get("text", "")
            for block in self.prompt
            if isinstance(block, dict) and block.get("type") == "text"
        )

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.runtime.client_capabilities

    # ------------------------------------------------------------------ updates

    async def update(self, update: dict[str, Any]) -> None:
        """Send one ``session/update`` of this turn (``update`` is the ``SessionUpdate`` object)."""
        # Spec (prompt-turn.mdx): updates after session/cancel -- "it MUST ensure that it does
        # so before responding to the session/prompt request". The fence:
        if self.ended:
            raise TurnEndedError(f"turn of session {self.session.id} has ended; update not sent")
        await self._notify(p.SESSION_UPDATE, {"sessionId": self.session.id, "update": update})

    def _id(self, what: str) -> str | None:
        """This turn's id for its ``what`` (message, thought, plan) where the version needs one."""
        if not self._shapes.message_ids_required and what != "plan":
            return None
        found = self._ids.get(what)
        if found is None:
            found = self._ids[what] = f"{what}_{uuid.uuid4().hex[:12]}"
        return found

    async def message(self, text: str, *, message_id: str | None = None) -> None:
        """Stream an ``agent_message_chunk`` of text (v2: one message id per turn by default)."""
        await self.update(self._shapes.chunk("agent_message_chunk", text, message_id or self._id("msg")))

    async def thought(self, text: str) -> None:
        """Stream an ``agent_thought_chunk`` of text."""
        await self.update(self._shapes.chunk("agent_thought_chunk", text, self._id("thought")))

    async def plan(self, entries: Sequence[dict[str, Any]]) -> None:
        """Send the full plan (each entry: ``content``, ``priority``, ``status``)."""
        await self.update(self._shapes.plan(self._id("plan") or "plan", entries))

    async def tool_call(
        self,
        title: str,
        *,
        kind: str = "other",
        status: str = "pending",
        tool_call_id: str | None = None,
        cancellable: bool = False,
        **fields: Any,
    ) -> ToolCall:
        """Report a new tool call and return a handle to update it. ``cancellable`` (v2): the
        client may ask to cancel it (``tool_call/cancel``): ``call.cancel_requested`` is set."""
        call = ToolCall(self, tool_call_id or f"call_{next(_tool_ids)}", title, kind)
        call.status = status
        update = self._shapes.new_tool_call(call.id, title, kind, status)
        if cancellable and self._cancellable_calls:  # the version has tool_call/cancel
            call.cancellable = True
            update["capabilities"] = {"cancel": {}}
        update.update(fields)
        self.session.tool_calls[call.id] = call
        await self.update(update)
        return call

    # ------------------------------------------------------------------ client requests

    async def request(self, method: str, params: Any) -> Any:
        """A request to the client that belongs to this turn (cancelled with it, cascaded)."""
        if self.ended:  # the fence (see ``update``)
            raise TurnEndedError(f"turn of session {self.session.id} has ended; {method} not sent")
        return await self.runtime.connection.request(
            method, params, cancel_grace=self.runtime.request_cancel_grace
        )

    async def request_permission(
        self, tool_call: ToolCall | dict[str, Any], options: Sequence[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Ask ``session/request_permission``; returns the outcome object
        (``{"outcome": "selected", "optionId": ...}`` or ``{"outcome": "cancelled"}``)."""
        if options is None:
            options = [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
        call = tool_call.as_update() if isinstance(tool_call, ToolCall) else tool_call
        params = self._shapes.permission(self.session.id, call, options)
        foreground = self._foreground
        self._permissions += 1  # blocked on the user while a question is pending
        await foreground.set_state(self.session, "requires_action")
        try:
            response = await self.request(p.SESSION_REQUEST_PERMISSION, params)
        finally:
            self._permissions -= 1
            if not self._permissions and not self.ended and not self.cancel_requested:
                await foreground.set_state(self.session, "running")
        outcome = response.get("outcome") if isinstance(response, dict) else None
        if not isinstance(outcome, dict) or "outcome" not in outcome:
            raise RpcError(-32603, "invalid permission response from the client", {"response": response})
        return outcome

    async def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        self._require("fs", "readTextFile", p.FS_READ_TEXT_FILE)
        params: dict[str, Any] = {"sessionId": self.session.id, "path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        response = await self.request(p.FS_READ_TEXT_FILE, params)
        content = response.get("content") if isinstance(response, dict) else None
        if not isinstance(content, str):
            raise RpcError(
                -32603, "invalid fs/read_text_file response from the client", {"response": response}
            )
        return content

    async def write_text_file(self, path: str, content: str) -> None:
        self._require("fs", "writeTextFile", p.FS_WRITE_TEXT_FILE)
        await self.request(
            p.FS_WRITE_TEXT_FILE, {"sessionId": self.session.id, "path": path, "content": content}
        )

    async def create_terminal(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
    ) -> Terminal:
        self._require("terminal", None, p.TERMINAL_CREATE)
        params: dict[str, Any] = {"sessionId": self.session.id, "command": command, "args": list(args)}
        if env:
            params["env"] = [{"name": k, "value": v} for k, v in env.items()]
        if cwd is not None:
            params["cwd"] = cwd
        if output_byte_limit is not None:
            params["outputByteLimit"] = output_byte_limit
        response = await self.request(p.TERMINAL_CREATE, params)
        terminal_id = response.get("terminalId") if isinstance(response, dict) else None
        if not isinstance(terminal_id, str):
            raise RpcError(-32603, "invalid terminal/create response from the client", {"response": response})
        return Terminal(self, terminal_id)

    def _require(self, group: str, flag: str | None, method: str) -> None:
        caps = self.runtime.client_capabilities
        value = caps.get(group)
        ok = bool(value) if flag is None else isinstance(value, dict) and bool(value.get(flag))
        if not ok:
            raise CapabilityError(method)

    def after_end(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the turn's response has been queued (e.g. to send a title)."""
        self._after_end.append(callback)

    # ------------------------------------------------------------------ runtime side

    def _end(self) -> None:
        self._state.feed(AgentTurnEvent.END)
        task = self.task
        if task is not None and task.done():
            # Its cancelled error's traceback holds the turn's frames, which hold this turn:
            # without the task, that is no cycle, and all of it is freed without the collector.
            self.task = None
        if self._after_end:
            loop = asyncio.get_running_loop()
            for callback in self._after_end:
                loop.call_soon(callback)  # runs after the response is queued
            self._after_end.clear()

    def _start(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Future[None]:
        """Run ``work`` as the turn's task; return the future settled once the task ends (one
        cancelled before its first step too) or the turn is cancelled, whichever is first."""
        loop = asyncio.get_running_loop()
        settled = self._settled = loop.create_future()
        self.task = loop.create_task(work, name=name)
        self.task.add_done_callback(self._settle)
        return settled

    def _settle(self, _task: object = None) -> None:
        settled = self._settled
        if settled is not None and not settled.done():
            settled.set_result(None)

    def cancel(self, reason: str) -> None:
        """Cancel the turn (runtime use): cancel its task and every request it has pending."""
        if not self._state.feed(AgentTurnEvent.CANCEL, reason):
            return  # already cancelled, or ended
        if self.task is not None and not self.task.done():
            self.task.cancel(reason)
        self._settle()  # after the task's cancel: the task unwinds before the runtime looks
        self.runtime.connection.cascade_cancel(self.request_id, f"turn cancelled: {reason}")

    def __repr__(self) -> str:
        return f"Turn(session={self.session.id!r}, request={self.request_id!r}, cancel_requested={self.cancel_requested})"
