"""The lifecycle of a connection."""

from __future__ import annotations

import enum


class State(enum.Enum):
    """Lifecycle of a connection."""

    NEW = "new"
    """Created; no transport attached yet."""
    OPEN = "open"
    """Reading and writing."""
    CLOSING = "closing"
    """Answering what is in flight with -32800, failing our waiters; no new work."""
    CLOSED = "closed"
    """Done; every request was answered or abandoned, no task is left."""
