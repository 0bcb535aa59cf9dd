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
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    CompactionSummaryChunk,
    CompactionUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Notice,
    Plan,
    PlanUpdate,
    SessionInfoUpdate,
    StateUpdate,
    TerminalOutputChunk,
    TerminalUpdate,
    ToolCall,
    ToolCallContentChunk,
    ToolCallUpdate,
    Topic,
    UnknownUpdate,
    Update,
    UsageUpdate,
    UserMessage,
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
    "AgentMessage",
    "AgentMessageChunk",
    "AgentStartError",
    "AgentThought",
    "AgentThoughtChunk",
    "AvailableCommandsUpdate",
    "CancelLadder",
    "CancelOutcome",
    "ClientServices",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOptionUpdate",
    "CurrentModeUpdate",
    "FileSystemService",
    "HostControl",
    "LadderPolicy",
    "NetworkPeer",
    "Notice",
    "Peer",
    "PermissionPolicy",
    "PermissionRequest",
    "Plan",
    "PlanUpdate",
    "ProcessPeer",
    "PromptTurn",
    "RemoteAgent",
    "RemoteSession",
    "Resolution",
    "Rung",
    "Scope",
    "SessionHandle",
    "SessionInfoUpdate",
    "StateUpdate",
    "TerminalOutputChunk",
    "TerminalService",
    "TerminalUpdate",
    "ToolCall",
    "ToolCallContentChunk",
    "ToolCallState",
    "ToolCallUpdate",
    "Topic",
    "TurnResult",
    "UnknownUpdate",
    "Update",
    "UsageUpdate",
    "UserMessage",
    "UserMessageChunk",
    "allow_all",
    "by_tool_kind",
    "connect",
    "deny_all",
    "launch",
    "make_update",
    "reference_agent_argv",
]
