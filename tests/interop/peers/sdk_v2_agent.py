"""An ACP v2 agent written with the official Python SDK's ``acp.experimental.v2`` (1.0.0rc3+).

Run as ``python sdk_v2_agent.py``: it serves ACP v2 on its stdin/stdout until stdin ends. The SDK
gives an agent typed handlers and nothing of the v2 lifecycle: this script does it all itself, the
way the SDK lets it -- answers ``session/prompt`` when the user message is inserted (its
``messageId``), reports ``running`` / ``requires_action`` / ``idle`` with ``state_update``,
holds a prompt sent while the session works and inserts it later, in order.

Cancellation, the way the SDK lets it: the work of a prompt is an ``asyncio`` task.
``session/cancel`` cancels it (the SDK then withdraws a pending permission request with
``$/cancel_request``: it does so for any request whose awaiting task is cancelled) and the task
ends with an idle ``cancelled``; held prompts are answered ``-32800`` (their handlers' tasks are
cancelled: the SDK answers a cancelled handler ``-32800``). ``$/cancel_request`` on a held prompt
cancels its handler the same way and leaves the running work alone. ``session/close`` cancels
like ``session/cancel`` and answers after the idle.

Prompt commands (the text of the prompt):

- ``/stream N MS``: N ``agent_message_chunk`` "w0 " .. "w{N-1} ", MS ms apart; ``end_turn``.
- ``/sleep MS``: a chunk "sleeping", then MS ms (a slow turn); ``end_turn``.
- ``/permission``: a ``tool_call_update`` (pending), ``requires_action``, then
  ``session/request_permission`` (options ``allow`` / ``reject``); on the answer ``running``,
  the tool call ``completed`` (allowed) or ``failed``, and a chunk "permission outcome: ...";
  ``end_turn``.
- ``/oblivious MS``: an agent that does nothing about a cancel (it registers no cancellation):
  a chunk "oblivious", MS ms that nothing interrupts, ``end_turn``. While it runs,
  ``session/cancel`` is ignored altogether (held prompts stay held): what the SDK does on its
  own then is what a client sees.
- ``/permission-oblivious``: ``/permission``, by an agent that does nothing about a cancel: it
  keeps waiting for the answer.
- ``/permission-withdraw MS``: ``/permission``, but the agent gives up waiting after MS ms and
  withdraws the request itself (the task awaiting it is cancelled: the SDK sends
  ``$/cancel_request``); then ``running``, the tool call ``failed``, a chunk "permission
  withdrawn"; ``end_turn``.
- anything else: echoed back as one chunk; ``end_turn``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import itertools
import sys
import uuid
from typing import Any

from acp.exceptions import RequestError
from acp.experimental import v2
from acp.experimental.v2 import schema

SDK_VERSION = importlib.metadata.version("agent-client-protocol")
_ids = itertools.count(1)


def log(*parts: Any) -> None:
    print("sdk_v2_agent:", *parts, file=sys.stderr, flush=True)


class Session:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.turn = asyncio.Lock()
        """Held by the work of the inserted prompt; prompts wait for it in order (FIFO)."""
        self.work: asyncio.Task[None] | None = None
        self.oblivious = False
        self.held: set[asyncio.Task[Any]] = set()
        """The handlers of prompts waiting for their turn."""
        self.cancels = 0
        """How many ``session/cancel`` arrived: one during an insertion cancels the new work."""


class V2InteropAgent:
    """Implements the SDK's v2 ``Agent`` protocol."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self, protocol_version: int, info: Any, capabilities: Any = None, **kwargs: Any
    ) -> Any:
        return schema.InitializeResponse(
            protocol_version=v2.PROTOCOL_VERSION,
            info=schema.Implementation(name="sdk-v2-interop-agent", version=SDK_VERSION),
            capabilities=schema.AgentCapabilities(session=schema.SessionCapabilities()),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        session_id = f"sdk2-{uuid.uuid4().hex[:12]}"
        self.sessions[session_id] = Session(session_id)
        return schema.NewSessionResponse(session_id=session_id)

    def session(self, session_id: str) -> Session:
        if session_id not in self.sessions:
            raise RequestError(-32002, "Session not found", {"sessionId": session_id})
        return self.sessions[session_id]

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        parsed = schema.UpdateSessionNotification.model_validate({"sessionId": session_id, "update": update})
        await self.conn.session_update(session_id=session_id, update=parsed.update)

    async def state(self, session_id: str, state: str, stop_reason: str | None = None) -> None:
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop_reason is not None:
            update["stopReason"] = stop_reason
        await self.update(session_id, update)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        session = self.session(session_id)
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        me = asyncio.current_task()
        assert me is not None
        session.held.add(me)
        try:
            # Held while the session works: asyncio's lock wakes its waiters in order.
            # Cancelled here by session/cancel or $/cancel_request: the SDK answers -32800.
            await session.turn.acquire()
        finally:
            session.held.discard(me)
        cancels = session.cancels
        n = next(_ids)
        message_id = f"u-{n}"
        try:
            await self.update(
                session_id,
                {
                    "sessionUpdate": "user_message",
                    "messageId": message_id,
                    "content": [{"type": "text", "text": text}],
                },
            )
            await self.state(session_id, "running")
        except BaseException:
            session.turn.release()
            raise
        session.oblivious = text.startswith("/oblivious") or text == "/permission-oblivious"
        session.work = asyncio.create_task(self.work(session, text, f"a-{n}"))
        if session.cancels != cancels:
            self.stop(session)  # a cancel arrived while the prompt was being inserted
        return schema.PromptResponse(message_id=message_id)

    async def work(self, session: Session, text: str, message_id: str) -> None:
        stop = "end_turn"
        try:
            await self.run_command(session, text, message_id)
        except asyncio.CancelledError:
            log("work cancelled")
            stop = "cancelled"
        except Exception as exc:  # a failed turn ends idle "error", never a JSON-RPC error
            log("work failed:", repr(exc))
            stop = "error"
        finally:
            session.oblivious = False
            try:
                await self.state(session.id, "idle", stop)
            finally:
                session.work = None
                session.turn.release()

    async def say(self, session: Session, message_id: str, text: str) -> None:
        await self.update(
            session.id,
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": message_id,
                "content": {"type": "text", "text": text},
            },
        )

    async def run_command(self, session: Session, text: str, message_id: str) -> None:
        words = text.split()
        if text.startswith("/stream"):
            count, ms = int(words[1]), int(words[2])
            for i in range(count):
                if i and ms:
                    await asyncio.sleep(ms / 1000)
                await self.say(session, message_id, f"w{i} ")
        elif text.startswith("/sleep"):
            await self.say(session, message_id, "sleeping")
            await asyncio.sleep(int(words[1]) / 1000)
        elif text.startswith("/oblivious"):
            await self.say(session, message_id, "oblivious")
            await asyncio.shield(asyncio.sleep(int(words[1]) / 1000))
        elif text in ("/permission", "/permission-oblivious"):
            await self.permission(session, message_id)
        elif text.startswith("/permission-withdraw"):
            await self.permission(session, message_id, withdraw_after=int(words[1]) / 1000)
        else:
            await self.say(session, message_id, text)

    async def permission(
        self, session: Session, message_id: str, withdraw_after: float | None = None
    ) -> None:
        tool_call_id = f"call-{next(_ids)}"
        tool = {
            "toolCallId": tool_call_id,
            "title": "Edit a pretend file",
            "kind": "edit",
            "status": "pending",
        }
        await self.update(session.id, {"sessionUpdate": "tool_call_update", **tool})
        await self.state(session.id, "requires_action")
        asked = self.conn.request_permission(
            session_id=session.id,
            title="Edit a pretend file",
            options=[
                schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
            subject=schema.ToolCallPermissionSubjectVariant(
                tool_call=schema.ToolCallUpdate.model_validate({"toolCallId": tool_call_id})
            ),
        )
        try:
            if withdraw_after is None:
                response = await asked
            else:
                try:
                    # On time out wait_for cancels the request's task: the SDK withdraws it.
                    response = await asyncio.wait_for(asked, withdraw_after)
                except TimeoutError:
                    log("permission request withdrawn by the agent")
                    await self.state(session.id, "running")
                    await self.update(
                        session.id,
                        {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "failed"},
                    )
                    await self.say(session, message_id, "permission withdrawn")
                    return
        except asyncio.CancelledError:
            # The SDK has sent $/cancel_request for the permission request: the last update
            # of the tool call goes out before the idle.
            with contextlib.suppress(Exception):
                await self.update(
                    session.id,
                    {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "cancelled"},
                )
            raise
        await self.state(session.id, "running")
        outcome = response.outcome
        if outcome.outcome == "selected":
            described = f"selected {outcome.option_id}"
            allowed = outcome.option_id == "allow"
        else:
            described, allowed = str(outcome.outcome), False
        status = "completed" if allowed else "failed"
        await self.update(
            session.id, {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": status}
        )
        await self.say(session, message_id, f"permission outcome: {described}")

    def stop(self, session: Session) -> asyncio.Task[None] | None:
        """Cancel the session's held prompts and its work; return the work, to await its idle."""
        if session.oblivious:
            log("session/cancel ignored: the running work is oblivious")
            return None
        for handler in list(session.held):
            handler.cancel()
        work = session.work
        if work is not None:
            work.cancel()
        return work

    async def cancel_session(self, session_id: str, **kwargs: Any) -> None:
        log("session/cancel", session_id)
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancels += 1
            self.stop(session)

    async def close_session(self, session_id: str, **kwargs: Any) -> Any:
        session = self.session(session_id)
        work = self.stop(session)
        if work is not None:
            await asyncio.wait({work})  # its idle "cancelled" goes out before this answer
        del self.sessions[session_id]
        return schema.CloseSessionResponse()


async def main() -> None:
    log(f"agent-client-protocol {SDK_VERSION} (v2) ready")
    await v2.run_agent(V2InteropAgent())
    log("stdin ended; exiting")


if __name__ == "__main__":
    asyncio.run(main())
