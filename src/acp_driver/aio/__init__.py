"""asyncio adapters: the connection (tasks, futures, one writer) and byte-stream transports."""

from ._connection import Connection, RequestContext, State, current_request
from ._transports import open_pipes, open_stdio, open_streams

__all__ = [
    "Connection",
    "RequestContext",
    "State",
    "current_request",
    "open_pipes",
    "open_stdio",
    "open_streams",
]
