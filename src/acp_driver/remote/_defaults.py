"""The server's default settings, importable without loading the server (the CLI's help uses them)."""

from __future__ import annotations

from typing import Final

DEFAULT_PORT: Final = 8765
DEFAULT_CANCEL_BUDGET: Final = 4.0
"""Seconds from a connection's end to SIGKILL of its agent."""
DEFAULT_MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS: Final = 256
DEFAULT_IDLE_TIMEOUT: Final = 300.0
