"""Error codes and exceptions of the connection core.

Hierarchy::

    AcpError                      base of every error this package raises on purpose
    ├── LocalProtocolError        we tried to break a rule (answer twice, unknown id, send after close)
    └── RpcError                  carries a JSON-RPC error object (code, message, data)
        ├── RequestCancelledError   the peer answered -32800, or we gave up on the request
        │   └── RequestTimeoutError   our own timeout elapsed (also a TimeoutError)
        ├── ConnectionClosedError   the connection ended before an answer came
        └── RemoteProtocolError     the peer broke a rule (invalid response, ...)

Peer misbehaviour on input never raises: the core reports it as a ``ProtocolViolation`` event.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    """JSON-RPC 2.0 and ACP error codes."""

    PARSE_ERROR = -32700
    """Invalid JSON was received."""
    INVALID_REQUEST = -32600
    """The JSON sent is not a valid request object."""
    METHOD_NOT_FOUND = -32601
    """The method does not exist or is not available."""
    INVALID_PARAMS = -32602
    """Invalid method parameters."""
    INTERNAL_ERROR = -32603
    """Internal error of the side that answered."""
    REQUEST_CANCELLED = -32800
    """The request was cancelled (``$/cancel_request``, timeout, shutdown)."""
    AUTH_REQUIRED = -32000
    """ACP: authentication is required."""
    RESOURCE_NOT_FOUND = -32002
    """ACP: a resource (file, session...) was not found."""


class AcpError(Exception):
    """Base class of the errors raised by acp-driver."""


class LocalProtocolError(AcpError):
    """We tried to do something the protocol or the connection state forbids."""


class RpcError(AcpError):
    """An error that maps onto a JSON-RPC error object.

    Raise it from a request handler to answer with this exact error; catch it from
    ``Connection.request`` to see what the peer answered.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC error object for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})

    @classmethod
    def invalid_params(cls, detail: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.INVALID_PARAMS, f"Invalid params: {detail}", data)

    @classmethod
    def internal_error(cls, detail: str = "Internal error") -> RpcError:
        return cls(ErrorCode.INTERNAL_ERROR, detail)

    @classmethod
    def resource_not_found(cls, detail: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.RESOURCE_NOT_FOUND, detail, data)


class RequestCancelledError(RpcError):
    """The request ended cancelled: the peer answered ``-32800``, or we stopped waiting."""

    def __init__(self, message: str = "Request cancelled", data: Any = None) -> None:
        super().__init__(ErrorCode.REQUEST_CANCELLED, message, data)


class RequestTimeoutError(RequestCancelledError, TimeoutError):
    """Our timeout for the request elapsed; ``$/cancel_request`` was sent to the peer."""


class ConnectionClosedError(RpcError):
    """The connection ended (closed by us, by the peer, or the peer exited) before an answer."""

    def __init__(self, message: str = "Connection closed", data: Any = None) -> None:
        super().__init__(ErrorCode.INTERNAL_ERROR, message, data)


class RemoteProtocolError(RpcError):
    """The peer broke a protocol rule in a way that concerns one of our requests."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message, data)


def error_from_object(error: Any) -> RpcError:
    """Build the most specific ``RpcError`` for a (validated) JSON-RPC error object."""
    code = error["code"]
    message = error["message"]
    data = error.get("data")
    if code == ErrorCode.REQUEST_CANCELLED:
        return RequestCancelledError(message, data)
    return RpcError(code, message, data)
