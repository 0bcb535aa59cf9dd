"""The host driver's errors (the rest are the core's: ``RpcError`` and its subclasses)."""

from __future__ import annotations

from ..core import AcpError, ConnectionClosedError


class AgentStartError(AcpError):
    """The agent could not be started or did not complete ``initialize``."""


class AgentExitedError(ConnectionClosedError):
    """The agent process ended (or closed its output) while we still needed it."""


class AgentDisconnectedError(AgentExitedError):
    """The connection to a remote agent ended (the server or the network dropped it, or the
    host closed it) while we still needed it; the message names the URL and what happened."""
