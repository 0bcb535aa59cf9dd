"""The host driver: launch any ACP agent (or connect to one), run turns, cancel with a scope;
the ladder always resolves.

``RemoteAgent`` and ``RemoteSession`` are the former names of ``AgentHandle`` and
``SessionHandle`` (kept as aliases: they named local processes, while "remote" means a network).
"""

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from ..core import DEFAULT_BUDGET, CancelLadder, LadderPolicy, Resolution, Rung
from ._agent import AgentHandle, launch
from ._errors import AgentDisconnectedError, AgentExitedError, AgentStartError
from ._network_peer import NetworkPeer, connect
from ._peer import HostControl, Peer
from ._permissions import (
    PermissionPolicy,
    PermissionRequest,
    allow_all,
    by_tool_kind,
    deny_all,
)
from ._process_peer import ProcessPeer
from ._prompt_turn import PromptTurn
from ._reference import reference_agent_argv
from ._results import CancelOutcome, ToolCallState, TurnResult
from ._services import ClientServices, FileSystemService, TerminalService
from ._session import Scope, SessionHandle
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

RemoteAgent = AgentHandle
RemoteSession = SessionHandle

__all__ = [
    "DEFAULT_BUDGET",
    "AgentDisconnectedError",
    "AgentExitedError",
    "AgentHandle",
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
    "HostControl",
    "LadderPolicy",
    "NetworkPeer",
    "Peer",
    "PermissionPolicy",
    "PermissionRequest",
    "Plan",
    "ProcessPeer",
    "PromptTurn",
    "Resolution",
    "Rung",
    "Scope",
    "SessionHandle",
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
    "reference_agent_argv",
]
