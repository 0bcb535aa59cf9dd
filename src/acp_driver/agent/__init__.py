"""The agent runtime: write ACP agents in Python with the spec's cancellation rules built in."""

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from ._runtime import Agent, AgentRuntime, Faults, run_agent, serve_stdio
from ._turn import CapabilityError, Session, Terminal, ToolCall, Turn, TurnEndedError, text_content

__all__ = [
    "Agent",
    "AgentRuntime",
    "CapabilityError",
    "Faults",
    "Session",
    "Terminal",
    "ToolCall",
    "Turn",
    "TurnEndedError",
    "run_agent",
    "serve_stdio",
    "text_content",
]
