"""asyncio adapters: the connection (tasks, futures, one writer), transports, child processes.

Names load lazily (``acp_driver._lazy``): an agent does not import the process supervision.
"""

import typing

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from .._lazy import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "._agent_process": ("AgentProcess",),
        "._clock": (
            "Clock",
            "LoopClock",
            "Timer",
            "timeout_on",
            "wait_on",
        ),
        "._connection": ("Connection",),
        "._ladder_runner": ("LadderRunner", "PeerControl"),
        "._context": (
            "RequestContext",
            "current_request",
        ),
        "._ndjson": (
            "NdjsonTransport",
            "open_pipes",
            "open_stdio",
            "open_streams",
        ),
        "._process": ("ProcessGroup", "supervision_available"),
        "._stderr": (
            "StderrTail",
            "connect_read_pipe",
            "connect_write_pipe",
            "drain_pipe",
            "exit_description",
        ),
        "._requesting": ("PendingRequest",),
        "._serving": (
            "NotificationHandler",
            "RequestHandler",
        ),
        "._state": ("State",),
        "._transport": (
            "Transport",
            "TransportReceiver",
        ),
    },
)

if typing.TYPE_CHECKING:
    from ._agent_process import AgentProcess as AgentProcess
    from ._clock import Clock as Clock
    from ._clock import LoopClock as LoopClock
    from ._clock import Timer as Timer
    from ._clock import timeout_on as timeout_on
    from ._clock import wait_on as wait_on
    from ._connection import Connection as Connection
    from ._context import RequestContext as RequestContext
    from ._context import current_request as current_request
    from ._ladder_runner import LadderRunner as LadderRunner
    from ._ladder_runner import PeerControl as PeerControl
    from ._ndjson import NdjsonTransport as NdjsonTransport
    from ._ndjson import open_pipes as open_pipes
    from ._ndjson import open_stdio as open_stdio
    from ._ndjson import open_streams as open_streams
    from ._process import ProcessGroup as ProcessGroup
    from ._process import supervision_available as supervision_available
    from ._requesting import PendingRequest as PendingRequest
    from ._serving import NotificationHandler as NotificationHandler
    from ._serving import RequestHandler as RequestHandler
    from ._state import State as State
    from ._stderr import StderrTail as StderrTail
    from ._stderr import connect_read_pipe as connect_read_pipe
    from ._stderr import connect_write_pipe as connect_write_pipe
    from ._stderr import drain_pipe as drain_pipe
    from ._stderr import exit_description as exit_description
    from ._transport import Transport as Transport
    from ._transport import TransportReceiver as TransportReceiver
