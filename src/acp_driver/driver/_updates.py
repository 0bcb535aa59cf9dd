"""Typed views of ``session/update`` notifications, built cheaply from the wire JSON.

Each view is a small slotted object holding the raw ``SessionUpdate`` dict (``raw``) and
exposing its fields as attributes; nothing is validated beyond what the driver needs, so a
stream of updates costs little more than parsing it. ``to_model()`` gives the official
``acp.schema`` pydantic model (if the ``agent-client-protocol`` package is installed) for code
that wants full validation.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .. import protocol as p


class Update:
    """One ``session/update``. Subclasses are chosen by the ``sessionUpdate`` discriminator."""

    __slots__ = ("raw", "session_id")
    kind: ClassVar[str] = ""
    turn_scoped: ClassVar[bool] = True
    """Belongs to a prompt turn (False: about the session, valid any time)."""

    def __init__(self, session_id: str, raw: dict[str, Any]) -> None:
        self.session_id = session_id
        self.raw = raw

    @property
    def session_update(self) -> str:
        """The wire discriminator (``agent_message_chunk``...)."""
        value = self.raw.get("sessionUpdate")
        return value if isinstance(value, str) else ""

    def to_model(self) -> Any:
        """The official ``acp.schema.SessionNotification`` for this update (validates it)."""
        from acp.schema import SessionNotification

        return SessionNotification.model_validate({"sessionId": self.session_id, "update": self.raw})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, Update)
            and other.raw == self.raw
            and other.session_id == self.session_id
        )

    __hash__ = None  # type: ignore[assignment]


class _Chunk(Update):
    __slots__ = ()

    @property
    def content(self) -> dict[str, Any]:
        content = self.raw.get("content")
        return content if isinstance(content, dict) else {}

    @property
    def text(self) -> str:
        """The chunk's text ('' for non-text content)."""
        content = self.raw.get("content")
        if isinstance(content, dict) and content.get("type") == "text":
            text = content.get("text")
            return text if isinstance(text, str) else ""
        return ""

    @property
    def message_id(self) -> str | None:
        value = self.raw.get("messageId")
        return value if isinstance(value, str) else None


class AgentMessageChunk(_Chunk):
    __slots__ = ()
    kind = "agent_message_chunk"


class AgentThoughtChunk(_Chunk):
    __slots__ = ()
    kind = "agent_thought_chunk"


class UserMessageChunk(_Chunk):
    __slots__ = ()
    kind = "user_message_chunk"


class _ToolCallBase(Update):
    __slots__ = ()

    @property
    def tool_call_id(self) -> str:
        value = self.raw.get("toolCallId")
        return value if isinstance(value, str) else ""

    @property
    def status(self) -> str | None:
        value = self.raw.get("status")
        return value if isinstance(value, str) else None

    @property
    def title(self) -> str | None:
        value = self.raw.get("title")
        return value if isinstance(value, str) else None

    @property
    def tool_kind(self) -> str | None:
        value = self.raw.get("kind")
        return value if isinstance(value, str) else None

    @property
    def content(self) -> list[Any]:
        value = self.raw.get("content")
        return value if isinstance(value, list) else []


class ToolCall(_ToolCallBase):
    """A new tool call (``tool_call``)."""

    __slots__ = ()
    kind = "tool_call"


class ToolCallUpdate(_ToolCallBase):
    """Progress of a tool call (``tool_call_update``)."""

    __slots__ = ()
    kind = "tool_call_update"


class Plan(Update):
    __slots__ = ()
    kind = "plan"

    @property
    def entries(self) -> list[dict[str, Any]]:
        value = self.raw.get("entries")
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


class AvailableCommandsUpdate(Update):
    __slots__ = ()
    kind = "available_commands_update"
    turn_scoped = False

    @property
    def commands(self) -> list[dict[str, Any]]:
        value = self.raw.get("availableCommands")
        return value if isinstance(value, list) else []


class CurrentModeUpdate(Update):
    __slots__ = ()
    kind = "current_mode_update"
    turn_scoped = False

    @property
    def mode_id(self) -> str | None:
        value = self.raw.get("currentModeId")
        return value if isinstance(value, str) else None


class ConfigOptionUpdate(Update):
    __slots__ = ()
    kind = "config_option_update"
    turn_scoped = False


class SessionInfoUpdate(Update):
    __slots__ = ()
    kind = "session_info_update"
    turn_scoped = False

    @property
    def title(self) -> str | None:
        value = self.raw.get("title")
        return value if isinstance(value, str) else None


class UsageUpdate(Update):
    __slots__ = ()
    kind = "usage_update"
    turn_scoped = False

    @property
    def used(self) -> int | None:
        value = self.raw.get("used")
        return value if isinstance(value, int) else None

    @property
    def size(self) -> int | None:
        value = self.raw.get("size")
        return value if isinstance(value, int) else None


# ---------------------------------------------------------------------- v2 (docs/v2.md)


class _Message(Update):
    """v2: a message created or patched by ``messageId`` (``content`` present: replaces it)."""

    __slots__ = ()

    @property
    def message_id(self) -> str | None:
        value = self.raw.get("messageId")
        return value if isinstance(value, str) else None

    @property
    def content(self) -> list[dict[str, Any]] | None:
        """The message's new content (None: unchanged; ``[]``: cleared)."""
        if "content" not in self.raw:
            return None
        value = self.raw.get("content")
        return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else []


class UserMessage(_Message):
    __slots__ = ()
    kind = "user_message"


class AgentMessage(_Message):
    __slots__ = ()
    kind = "agent_message"


class AgentThought(_Message):
    __slots__ = ()
    kind = "agent_thought"


class StateUpdate(Update):
    """v2: the session's foreground state (``running``, ``requires_action``, ``idle``)."""

    __slots__ = ()
    kind = "state_update"
    turn_scoped = False

    @property
    def state(self) -> str | None:
        value = self.raw.get("state")
        return value if isinstance(value, str) else None

    @property
    def stop_reason(self) -> str | None:
        value = self.raw.get("stopReason")
        return value if isinstance(value, str) else None

    @property
    def background(self) -> list[dict[str, Any]] | None:
        """The background work listed (None: not reported)."""
        value = self.raw.get("background")
        return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else None


class ToolCallContentChunk(_ToolCallBase):
    """v2: content appended to a tool call's."""

    __slots__ = ()
    kind = "tool_call_content_chunk"


class TerminalUpdate(Update):
    """v2: a display terminal the agent owns, created or updated."""

    __slots__ = ()
    kind = "terminal_update"

    @property
    def terminal_id(self) -> str:
        value = self.raw.get("terminalId")
        return value if isinstance(value, str) else ""


class TerminalOutputChunk(TerminalUpdate):
    """v2: bytes appended to a display terminal's output."""

    __slots__ = ()
    kind = "terminal_output_chunk"


class PlanUpdate(Update):
    """v2: a plan by ``planId``, replaced whole."""

    __slots__ = ()
    kind = "plan_update"

    @property
    def plan_id(self) -> str | None:
        plan = self.raw.get("plan")
        value = plan.get("planId") if isinstance(plan, dict) else None
        return value if isinstance(value, str) else None

    @property
    def entries(self) -> list[dict[str, Any]]:
        plan = self.raw.get("plan")
        value = plan.get("entries") if isinstance(plan, dict) else None
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


class Notice(Update):
    """v2: information for the user that is not part of the session's history."""

    __slots__ = ()
    kind = "notice"
    turn_scoped = False


class CompactionUpdate(Update):
    __slots__ = ()
    kind = "compaction_update"
    turn_scoped = False


class CompactionSummaryChunk(Update):
    __slots__ = ()
    kind = "compaction_summary_chunk"
    turn_scoped = False


class UnknownUpdate(Update):
    """An update kind this version does not know (kept, never dropped)."""

    __slots__ = ()
    kind = "unknown"
    turn_scoped = False


UPDATE_TYPES: dict[str, type[Update]] = {
    cls.kind: cls
    for cls in (
        AgentMessageChunk,
        AgentThoughtChunk,
        UserMessageChunk,
        ToolCall,
        ToolCallUpdate,
        Plan,
        AvailableCommandsUpdate,
        CurrentModeUpdate,
        ConfigOptionUpdate,
        SessionInfoUpdate,
        UsageUpdate,
        UserMessage,
        AgentMessage,
        AgentThought,
        StateUpdate,
        ToolCallContentChunk,
        TerminalUpdate,
        TerminalOutputChunk,
        PlanUpdate,
        Notice,
        CompactionUpdate,
        CompactionSummaryChunk,
    )
}
assert set(UPDATE_TYPES) == (
    p.TURN_UPDATES | p.SESSION_WIDE_UPDATES | p.TURN_UPDATES_V2 | p.SESSION_WIDE_UPDATES_V2
)


def make_update(session_id: str, raw: dict[str, Any]) -> Update:
    """The typed view for one wire ``SessionUpdate`` object."""
    cls = UPDATE_TYPES.get(raw.get("sessionUpdate"), UnknownUpdate)  # type: ignore[arg-type]
    return cls(session_id, raw)
