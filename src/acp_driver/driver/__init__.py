"""The host driver: launch any ACP agent, run turns, cancel with a scope; the ladder always resolves."""

from ..core import DEFAULT_BUDGET, CancelLadder, LadderPolicy, Resolution, Rung
from ._errors import AgentDisconnectedError, AgentExitedError, AgentStartError
from ._permissions import (
    PermissionPolicy,
    PermissionRequest,
    allow_all,
    by_tool_kind,
    deny_all,
)
from ._remote_agent import RemoteAgent, connect, launch
from ._results import CancelOutcome, ToolCallState, TurnResult
from ._services import ClientServices, FileSystemService, TerminalService
from ._session import RemoteSession, Scope
from ._turn import PromptTurn
from ._updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Plan,
    SessionInfoUpdate,
    ToolCall,
    ToolCallUpdate,
    UnknownUpdate,
    Update,
    UsageUpdate,
    UserMessageChunk,
    make_update,
)

__all__ = [
    "DEFAULT_BUDGET",
    "AgentDisconnectedError",
    "AgentExitedError",
    "AgentMessageChunk",
    "AgentStartError",
    "AgentThoughtChunk",
    "AvailableCommandsUpdate",
    "CancelLadder",
    "CancelOutcome",
    "ClientServices",
    "ConfigOptionUpdate",
    "CurrentModeUpdate",
    "FileSystemService",
    "LadderPolicy",
    "PermissionPolicy",
    "PermissionRequest",
    "Plan",
    "PromptTurn",
    "RemoteAgent",
    "RemoteSession",
    "Resolution",
    "Rung",
    "Scope",
    "SessionInfoUpdate",
    "TerminalService",
    "ToolCall",
    "ToolCallState",
    "ToolCallUpdate",
    "TurnResult",
    "UnknownUpdate",
    "Update",
    "UsageUpdate",
    "UserMessageChunk",
    "allow_all",
    "by_tool_kind",
    "connect",
    "deny_all",
    "launch",
    "make_update",
]
