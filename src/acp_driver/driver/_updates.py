"""Typed views of ``session/update`` notifications, built cheaply from the wire JSON.

Each view is a small slotted object holding the raw ``SessionUpdate`` dict (``raw``) and
exposing its fields as attributes; nothing is validated beyond what the driver needs, so a
stream of updates costs little more than parsing it. ``to_model()`` gives the official
``acp.schema`` pydantic model (if the ``agent-client-protocol`` package is installed) for code
that wants full validation.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from .. import protocol as p


class Topic(enum.Enum):
    """What an update is about, the same in both protocol versions: match on ``update.topic``
    and code written against v1 keeps working when an agent moves to v2 (docs/hosts.md has the
    table of kinds per topic)."""

    __hash__ = object.__hash__

    AGENT_TEXT = "agent_text"
    """The agent's reply: v1 ``agent_message_chunk``; v2 also ``agent_message`` (``.text`` on both)."""
    THOUGHT = "thought"
    """The agent's reasoning: ``agent_thought_chunk``; v2 also ``agent_thought`` (``.text``)."""
    USER_TEXT = "user_text"
    """The user's message: ``user_message_chunk``; v2 also ``user_message`` (``.text``)."""
    TOOL_CALL = "tool_call"
    """A tool call: ``tool_call`` (v1), ``tool_call_update``, ``tool_call_content_chunk`` (v2)
    (``.tool_call_id``, ``.status``, ``.title`` on each)."""
    PLAN = "plan"
    """The agent's plan: v1 ``plan``, v2 ``plan_update`` (``.entries`` on both)."""
    TERMINAL = "terminal"
    """v2: a display terminal (``terminal_update``, ``terminal_output_chunk``)."""
    STATE = "state"
    """v2: the session's foreground state (``state_update``)."""
    COMMANDS = "commands"
    MODE = "mode"
    CONFIG = "config"
    SESSION_INFO = "session_info"
    USAGE = "usage"
    NOTICE = "notice"
    COMPACTION = "compaction"
    UNKNOWN = "unknown"
    """A kind this version does not know (kept, never dropped)."""


class Update:
    """One ``session/update``. Subclasses are chosen by the ``sessionUpdate`` discriminator."""

    __slots__ = ("raw", "session_id")
    kind: ClassVar[str] = ""
    topic: ClassVar[Topic] = Topic.UNKNOWN
    """What it is about, in either version (``Topic``)."""
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
    topic = Topic.AGENT_TEXT


class AgentThoughtChunk(_Chunk):
    __slots__ = ()
    kind = "agent_thought_chunk"
    topic = Topic.THOUGHT


class UserMessageChunk(_Chunk):
    __slots__ = ()
    kind = "user_message_chunk"
    topic = Topic.USER_TEXT


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
    topic = Topic.TOOL_CALL


class ToolCallUpdate(_ToolCallBase):
    """Progress of a tool call (``tool_call_update``)."""

    __slots__ = ()
    kind = "tool_call_update"
    topic = Topic.TOOL_CALL


class Plan(Update):
    __slots__ = ()
    kind = "plan"
    topic = Topic.PLAN

    @property
    def entries(self) -> list[dict[str, Any]]:
        value = self.raw.get("entries")
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


class AvailableCommandsUpdate(Update):
    __slots__ = ()
    kind = "available_commands_update"
    topic = Topic.COMMANDS
    turn_scoped = False

    @property
    def commands(self) -> list[dict[str, Any]]:
        value = self.raw.get("availableCommands")
        return value if isinstance(value, list) else []


class CurrentModeUpdate(Update):
    __slots__ = ()
    kind = "current_mode_update"
    topic = Topic.MODE
    turn_scoped = False

    @property
    def mode_id(self) -> str | None:
        value = self.raw.get("currentModeId")
        return value if isinstance(value, str) else None


class ConfigOptionUpdate(Update):
    __slots__ = ()
    kind = "config_option_update"
    topic = Topic.CONFIG
    turn_scoped = False


class SessionInfoUpdate(Update):
    __slots__ = ()
    kind = "session_info_update"
    topic = Topic.SESSION_INFO
    turn_scoped = False

    @property
    def title(self) -> str | None:
        value = self.raw.get("title")
        return value if isinstance(value, str) else None


class UsageUpdate(Update):
    __slots__ = ()
    kind = "usage_update"
    topic = Topic.USAGE
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

    @property
    def text(self) -> str:
        """The text of its text blocks, joined ('' when none): as a v1 chunk's ``text``."""
        return "".join(
            b["text"]
            for b in self.content or ()
            if b.get("type") == "text" and isinstance(b.get("text"), str)
        )


class UserMessage(_Message):
    __slots__ = ()
    kind = "user_message"
    topic = Topic.USER_TEXT


class AgentMessage(_Message):
    __slots__ = ()
    kind = "agent_message"
    topic = Topic.AGENT_TEXT


class AgentThought(_Message):
    __slots__ = ()
    kind = "agent_thought"
    topic = Topic.THOUGHT


class StateUpdate(Update):
    """v2: the session's foreground state (``running``, ``requires_action``, ``idle``)."""

    __slots__ = ()
    kind = "state_update"
    topic = Topic.STATE
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
    topic = Topic.TOOL_CALL


class TerminalUpdate(Update):
    """v2: a display terminal the agent owns, created or updated."""

    __slots__ = ()
    kind = "terminal_update"
    topic = Topic.TERMINAL

    @property
    def terminal_id(self) -> str:
        value = self.raw.get("terminalId")
        return value if isinstance(value, str) else ""


class TerminalOutputChunk(TerminalUpdate):
    """v2: bytes appended to a display terminal's output."""

    __slots__ = ()
    kind = "terminal_output_chunk"
    topic = Topic.TERMINAL


class PlanUpdate(Update):
    """v2: a plan by ``planId``, replaced whole."""

    __slots__ = ()
    kind = "plan_update"
    topic = Topic.PLAN

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
    topic = Topic.NOTICE
    turn_scoped = False


class CompactionUpdate(Update):
    __slots__ = ()
    kind = "compaction_update"
    topic = Topic.COMPACTION
    turn_scoped = False


class CompactionSummaryChunk(Update):
    __slots__ = ()
    kind = "compaction_summary_chunk"
    topic = Topic.COMPACTION
    turn_scoped = False


class UnknownUpdate(Update):
    """An update kind this version does not know (kept, never dropped)."""

    __slots__ = ()
    kind = "unknown"
    topic = Topic.UNKNOWN
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


_new = object.__new__


def make_update(session_id: str, raw: dict[str, Any]) -> Update:
    """The typed view for one wire ``SessionUpdate`` object.

    Made the cheap way (one per update of a stream): a text chunk's class without hashing its
    discriminator (a new string each message), and the two slots set without the class call."""
    kind = raw.get("sessionUpdate")
    if kind == "agent_message_chunk":
        cls: type[Update] = AgentMessageChunk
    else:  # a discriminator that is no string (a list: unhashable) is of no known kind
        cls = UPDATE_TYPES.get(kind, UnknownUpdate) if type(kind) is str else UnknownUpdate
    view: Update = _new(cls)
    view.session_id = session_id
    view.raw = raw
    return view
