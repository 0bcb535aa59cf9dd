"""How the messages an agent sends look in each protocol version (part of the profile).

The agent runtime's ``Turn`` says what it means (a chunk of text, a new tool call, the plan, a
permission question); the profile's ``Shapes`` says how that is written on the wire:

=====================  ======================================  ===========================================
what                   v1                                      v2
=====================  ======================================  ===========================================
a message chunk        ``agent_message_chunk`` (id optional)   the same, ``messageId`` required
a new tool call        ``tool_call``                           ``tool_call_update`` (creates, then patches)
the plan               ``plan`` ``{entries}``                  ``plan_update`` ``{plan: {type: items,
                                                               planId, entries}}``
a permission question  ``{toolCall, options}``                 ``{title, subject: {type: tool_call,
                                                               toolCall}, options}``
=====================  ======================================  ===========================================

Pure: plain JSON values in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Shapes:
    """v1's shapes."""

    message_ids_required = False

    def chunk(self, kind: str, text: str, message_id: str | None) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if message_id is not None:
            update["messageId"] = message_id
        return update

    def new_tool_call(self, tool_call_id: str, title: str, kind: str, status: str) -> dict[str, Any]:
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "status": status,
        }

    def plan(self, plan_id: str, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {"sessionUpdate": "plan", "entries": list(entries)}

    def permission(
        self, session_id: str, tool_call: dict[str, Any], options: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        return {"sessionId": session_id, "toolCall": tool_call, "options": list(options)}


class ShapesV2(Shapes):
    """v2's shapes (the newest schema's)."""

    message_ids_required = True

    def new_tool_call(self, tool_call_id: str, title: str, kind: str, status: str) -> dict[str, Any]:
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "status": status,
        }

    def plan(self, plan_id: str, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": plan_id, "entries": list(entries)},
        }

    def permission(
        self, session_id: str, tool_call: dict[str, Any], options: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        title = tool_call.get("title")
        return {
            "sessionId": session_id,
            "title": title if isinstance(title, str) else "Permission",
            "subject": {"type": "tool_call", "toolCall": tool_call},
            "options": list(options),
        }


V1_SHAPES = Shapes()
V2_SHAPES = ShapesV2()
