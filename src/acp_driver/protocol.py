"""ACP method names and small constants, shared by the agent runtime and the host driver.

Wire names are kept verbatim; Python names follow them (``session/cancel`` -> ``SESSION_CANCEL``).
"""

from __future__ import annotations

from typing import Final, Literal

PROTOCOL_VERSION: Final = 1
"""The first ACP protocol version (the one every agent speaks); ``core.PROFILES`` lists all
the versions this package speaks, ``core.LATEST`` the newest."""

# Agent methods (client -> agent)
INITIALIZE: Final = "initialize"
AUTHENTICATE: Final = "authenticate"
LOGOUT: Final = "logout"
SESSION_NEW: Final = "session/new"
SESSION_LOAD: Final = "session/load"
SESSION_LIST: Final = "session/list"
SESSION_RESUME: Final = "session/resume"
SESSION_CLOSE: Final = "session/close"
SESSION_DELETE: Final = "session/delete"
SESSION_SET_MODE: Final = "session/set_mode"
SESSION_SET_CONFIG_OPTION: Final = "session/set_config_option"
SESSION_PROMPT: Final = "session/prompt"
SESSION_CANCEL: Final = "session/cancel"  # notification

# Client methods (agent -> client)
SESSION_UPDATE: Final = "session/update"  # notification
SESSION_REQUEST_PERMISSION: Final = "session/request_permission"
FS_READ_TEXT_FILE: Final = "fs/read_text_file"
FS_WRITE_TEXT_FILE: Final = "fs/write_text_file"
TERMINAL_CREATE: Final = "terminal/create"
TERMINAL_OUTPUT: Final = "terminal/output"
TERMINAL_WAIT_FOR_EXIT: Final = "terminal/wait_for_exit"
TERMINAL_KILL: Final = "terminal/kill"
TERMINAL_RELEASE: Final = "terminal/release"

# Both directions
CANCEL_REQUEST: Final = "$/cancel_request"  # notification

# v2 only (the draft; see docs/v2.md)
AUTH_LOGIN: Final = "auth/login"
AUTH_LOGOUT: Final = "auth/logout"
TOOL_CALL_CANCEL: Final = "tool_call/cancel"
TERMINAL_CANCEL: Final = "terminal/cancel"
ELICITATION_CREATE: Final = "elicitation/create"
ELICITATION_COMPLETE: Final = "elicitation/complete"  # notification
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""v2's error for an ``initialize`` asking a version below every one the agent speaks."""
RESOURCE_NOT_FOUND: Final = -32002

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
STOP_REASONS: Final = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
PermissionOptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

SESSION_WIDE_UPDATES: Final = frozenset(
    {
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)
"""Updates about the session rather than a turn: valid at any time, even between turns."""

TURN_UPDATES: Final = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    }
)
"""Updates that belong to the running prompt turn."""

STOP_REASONS_V2: Final = STOP_REASONS | {"error"}
"""v2's stop reasons (an idle ``state_update``'s); custom ones start with ``_``."""

TURN_UPDATES_V2: Final = frozenset(
    {
        "user_message_chunk",
        "user_message",
        "agent_message_chunk",
        "agent_message",
        "agent_thought_chunk",
        "agent_thought",
        "tool_call_update",
        "tool_call_content_chunk",
        "terminal_update",
        "terminal_output_chunk",
        "plan_update",
    }
)
"""v2 updates of the foreground work (or of background work the agent started in a turn)."""

SESSION_WIDE_UPDATES_V2: Final = frozenset(
    {
        "state_update",
        "available_commands_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "notice",
        "compaction_update",
        "compaction_summary_chunk",
    }
)
"""v2 updates about the session, valid at any time (``state_update`` drives the turn)."""
