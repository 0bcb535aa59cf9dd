"""The incoming request a task serves, for nested requests to know their parent (cascade)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..core import InFlight, RequestId

if TYPE_CHECKING:
    from ._connection import Connection


class RequestContext:
    """The incoming request being served by the current task (see ``current_request``)."""

    __slots__ = ("_entry", "connection")

    def __init__(self, connection: Connection, entry: InFlight) -> None:
        self.connection = connection
        self._entry = entry

    @property
    def id(self) -> RequestId:
        return self._entry.id

    @property
    def method(self) -> str:
        return self._entry.method

    @property
    def cancel_requested(self) -> bool:
        """The peer sent ``$/cancel_request`` for this request (or we are closing)."""
        return self._entry.cancel_requested

    def __repr__(self) -> str:
        return f"RequestContext(id={self.id!r}, method={self.method!r})"


current: ContextVar[RequestContext | None] = ContextVar("acp_driver_current_request", default=None)
"""Set by the serving side around each handler; read by the requesting side."""


def current_request() -> RequestContext | None:
    """The incoming request the calling task serves, if any."""
    return current.get()
