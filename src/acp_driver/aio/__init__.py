"""asyncio adapters: the connection (tasks, futures, one writer), transports, child processes."""

from ._connection import Connection, State
from ._context import RequestContext, current_request
from ._ndjson import NdjsonTransport, open_pipes, open_stdio, open_streams
from ._requesting import PendingRequest
from ._serving import NotificationHandler, RequestHandler
from ._transport import Transport, TransportReceiver

__all__ = [
    "Connection",
    "NdjsonTransport",
    "NotificationHandler",
    "PendingRequest",
    "RequestContext",
    "RequestHandler",
    "State",
    "Transport",
    "TransportReceiver",
    "current_request",
    "open_pipes",
    "open_stdio",
    "open_streams",
]
