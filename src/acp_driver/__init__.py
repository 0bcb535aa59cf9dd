"""acp-driver: an Agent Client Protocol stack where cancellation always lands."""

from .aio import Connection, RequestContext, current_request
from .core import (
    AcpError,
    ConnectionClosedError,
    ErrorCode,
    LocalProtocolError,
    RemoteProtocolError,
    RequestCancelledError,
    RequestTimeoutError,
    RpcError,
)

__version__ = "0.1.0"

__all__ = [
    "AcpError",
    "Connection",
    "ConnectionClosedError",
    "ErrorCode",
    "LocalProtocolError",
    "RemoteProtocolError",
    "RequestCancelledError",
    "RequestContext",
    "RequestTimeoutError",
    "RpcError",
    "__version__",
    "current_request",
]
