"""The host driver's errors (the rest are the core's: ``RpcError`` and its subclasses)."""

from __future__ import annotations

from ..core import AcpError, ConnectionClosedError


class AgentStartError(AcpError):
    """The agent could not be started or did not complete ``initialize``."""


class AgentExitedError(ConnectionClosedError):
    """The agent process ended (or closed its output) while we still needed it."""
