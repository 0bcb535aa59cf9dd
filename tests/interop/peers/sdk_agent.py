"""An ACP agent written with the official Python SDK's high-level agent API (``acp.run_agent``).

Works with ``agent-client-protocol`` 0.12.x and 1.0.x: it implements the SDK's ``Agent``
protocol (snake_case methods taking the request's fields as keyword arguments), gets the
``AgentSideConnection`` through ``on_connect`` and builds every payload with ``acp.schema``
models (0.12 had ``acp.helpers``; 1.0 removed them, the models exist in both).

``initialize`` is answered as the SDK's own echo example answers it: with the client's
``protocolVersion`` echoed back (a v1 agent asked for 2 "agrees"), in v1's field names.

Run as ``python sdk_agent.py`` with the SDK installed: it serves ACP on its stdin/stdout until
stdin ends. What it does for a prompt (the text of its text blocks):

- ``/sleep MS``: one ``agent_message_chunk`` "sleeping", then waits MS ms or until
  ``session/cancel`` (the SDK idiom: the ``cancel`` handler sets the session's event; the
  prompt returns ``stopReason: cancelled``). With SDK 1.0, ``$/cancel_request`` on the prompt
  cancels the handler's task and the SDK answers ``-32800``.
- ``/permission``: a ``tool_call``, then ``session/request_permission`` (options ``allow`` /
  ``reject``); reports ``permission outcome: <selected ID|cancelled>`` as a message chunk and
  the tool call ``completed`` or ``failed``; ends ``cancelled`` when the outcome is cancelled.
  With SDK 1.0, ``$/cancel_request`` on the prompt cancels the handler's task, and the SDK
  cascades: it sends ``$/cancel_request`` for the pending permission request.
- ``/permission-withdraw MS``: the same, but the agent stops waiting for the answer after MS ms
  (``asyncio.timeout``) and reports ``permission outcome: withdrawn``; ends ``end_turn``.
- anything else: echoed back as one ``agent_message_chunk``; ends ``end_turn``.

Extension methods: ``_sdk/sleep`` ``{"ms": N}`` (answers ``{"slept": N}``) and ``_sdk/echo``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import itertools
import sys
import uuid
from typing import Any

from acp import RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

SDK_VERSION = importlib.metadata.version("agent-client-protocol")
_tool_ids = itertools.count(1)


def log(*parts: Any) -> None:
    print("sdk_agent:", *parts, file=sys.stderr, flush=True)


class InteropAgent:
    """Implements the SDK's ``acp.Agent`` protocol."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,  # the SDK example's way: the client's own, echoed
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(
                name="sdk-interop-agent", title="SDK interop agent", version=SDK_VERSION
            ),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sdk-{uuid.uuid4().hex[:12]}"
        self.cancelled[session_id] = asyncio.Event()
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log("session/cancel", session_id)
        event = self.cancelled.get(session_id)
        if event is not None:
            event.set()

    async def say(self, session_id: str, text: str) -> None:
        chunk = AgentMessageChunk.model_validate(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        )
        await self.conn.session_update(session_id=session_id, update=chunk)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()  # a new turn: an earlier turn's cancel does not apply
        if text.startswith("/sleep"):
            return await self.sleep(session_id, int(text.split()[1]), cancelled)
        if text == "/permission":
            return await self.permission(session_id, cancelled)
        if text.startswith("/permission-withdraw"):
            return await self.permission(session_id, cancelled, withdraw_after=int(text.split()[1]))
        await self.say(session_id, text)
        return PromptResponse(stop_reason="end_turn")

    async def sleep(self, session_id: str, ms: int, cancelled: asyncio.Event) -> PromptResponse:
        await self.say(session_id, "sleeping")
        waiter = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({waiter}, timeout=ms / 1000)
        except asyncio.CancelledError:
            log("prompt task cancelled ($/cancel_request)")
            raise
        finally:
            waiter.cancel()
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def permission(
        self, session_id: str, cancelled: asyncio.Event, withdraw_after: int | None = None
    ) -> PromptResponse:
        tool_call_id = f"call-{next(_tool_ids)}"
        start = ToolCallStart.model_validate(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": tool_call_id,
                "title": "Edit a pretend file",
                "kind": "edit",
                "status": "pending",
            }
        )
        await self.conn.session_update(session_id=session_id, update=start)
        asking = self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate.model_validate(
                {
                    "toolCallId": tool_call_id,
                    "title": "Edit a pretend file",
                    "kind": "edit",
                    "status": "pending",
                }
            ),
            options=[
                PermissionOption.model_validate({"optionId": "allow", "name": "Allow", "kind": "allow_once"}),
                PermissionOption.model_validate(
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
                ),
            ],
        )
        if withdraw_after is None:
            response = await asking
        else:
            # The agent gives up on the answer (internal cancellation): SDK 1.0 then sends
            # $/cancel_request for the request; SDK 0.12 sends nothing.
            try:
                async with asyncio.timeout(withdraw_after / 1000):
                    response = await asking
            except TimeoutError:
                log("permission request withdrawn")
                await self.say(session_id, "permission outcome: withdrawn")
                return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")
        outcome = response.outcome
        described = f"selected {outcome.option_id}" if outcome.outcome == "selected" else str(outcome.outcome)
        allowed = outcome.outcome == "selected" and outcome.option_id == "allow"
        progress = ToolCallProgress.model_validate(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool_call_id,
                "status": "completed" if allowed else "failed",
            }
        )
        await self.conn.session_update(session_id=session_id, update=progress)
        await self.say(session_id, f"permission outcome: {described}")
        if outcome.outcome == "cancelled" or cancelled.is_set():
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # The SDK strips the leading underscore of extension method names.
        if method == "sdk/sleep":
            ms = int(params.get("ms", 0))
            log("_sdk/sleep started")  # what a test waits for before it cancels
            try:
                await asyncio.sleep(ms / 1000)
            except asyncio.CancelledError:
                log("_sdk/sleep cancelled")
                raise
            return {"slept": ms}
        if method == "sdk/echo":
            return params
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main() -> None:
    log(f"agent-client-protocol {SDK_VERSION} ready")
    await run_agent(InteropAgent())
    log("stdin ended; exiting")


if __name__ == "__main__":
    asyncio.run(main())
