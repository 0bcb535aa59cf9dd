"""asyncio adapters: the connection (tasks, futures, one writer), transports, child processes."""

from ._agent_process import AgentProcess
from ._clock import Clock, LoopClock, Timer
from ._connection import Connection
from ._context import RequestContext, current_request
from ._ndjson import NdjsonTransport, open_pipes, open_stdio, open_streams
from ._process import ProcessGroup, StderrTail, drain_pipe, exit_description, supervision_available
from ._requesting import PendingRequest
from ._serving import NotificationHandler, RequestHandler
from ._state import State
from ._transport import Transport, TransportReceiver

__all__ = [
    "AgentProcess",
    "Clock",
    "Connection",
    "LoopClock",
    "NdjsonTransport",
    "NotificationHandler",
    "PendingRequest",
    "ProcessGroup",
    "RequestContext",
    "RequestHandler",
    "State",
    "StderrTail",
    "Timer",
    "Transport",
    "TransportReceiver",
    "current_request",
    "drain_pipe",
    "exit_description",
    "open_pipes",
    "open_stdio",
    "open_streams",
    "supervision_available",
]
