"""Events the core produces from incoming bytes.

Each is a small slotted dataclass; treat them as read-only. (Not ``frozen``: a frozen
dataclass costs three times as much to create, and one is created per message on the hot
path.) Requests and notifications are the peer asking something of
us; responses answer what we asked. ``CancelRequest`` is an incoming ``$/cancel_request`` that
names one of the peer's requests still in flight here. The rest are reports: things to log or
count, never things that stop the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

RequestId = int | str | None
"""JSON-RPC request id: an integer, a string, or (discouraged) null."""


@dataclass(slots=True)
class Request:
    """The peer sent a request; it is now in flight in the incoming ledger."""

    id: RequestId
    method: str
    params: Any = None


@dataclass(slots=True)
class Notification:
    """The peer sent a notification (never answered). ``$/cancel_request`` is not one of these."""

    method: str
    params: Any = None


@dataclass(slots=True)
class NotificationRun:
    """Consecutive notifications of one method, in the order read, for a method the receiver
    takes a run at a time (``Endpoint.run_methods``): one event for a stream's run instead of a
    ``Notification`` each. A run ends at any other message, whose event comes after it."""

    method: str
    params: list[Any]


@dataclass(slots=True)
class CancelRequest:
    """The peer sent ``$/cancel_request`` for its request ``id``, still in flight here."""

    id: RequestId


@dataclass(slots=True)
class Response:
    """The peer answered our request ``id`` with a result."""

    id: RequestId
    result: Any


@dataclass(slots=True)
class ErrorResponse:
    """The peer answered our request ``id`` with an error object."""

    id: RequestId
    code: int
    message: str
    data: Any = None


class Ignored(Enum):
    """Why a message was dropped quietly: normal races, not the peer's fault."""

    LATE_RESPONSE = "late_response"
    """A reply to a request we had stopped waiting for (it hit the tombstone)."""
    LATE_CANCEL = "late_cancel"
    """A ``$/cancel_request`` for a request we had already answered."""
    REPEATED_CANCEL = "repeated_cancel"
    """A second ``$/cancel_request`` for a request whose cancel was already requested."""


@dataclass(slots=True)
class Quiet:
    """A message that needs no action (see ``Ignored``); log it at debug level."""

    reason: Ignored
    id: RequestId
    method: str | None = None


class Violation(Enum):
    """Kinds of peer rule-breaking the core detects."""

    PARSE_ERROR = "parse_error"
    """The line is not valid JSON (or not UTF-8). Answered -32700 with id null (as every error
    reply to malformed input: up to the connection's bound on such replies in a row)."""
    INVALID_MESSAGE = "invalid_message"
    """Valid JSON that is not a JSON-RPC 2.0 message. Answered -32600, unless response-shaped
    (``result``/``error`` without ``method``, e.g. an error object without ``id``): never answered."""
    EMPTY_BATCH = "empty_batch"
    """An empty array. Answered with one -32600."""
    OVERSIZED_LINE = "oversized_line"
    """A line over the size limit was discarded. Answered -32600 with id null."""
    DUPLICATE_REQUEST_ID = "duplicate_request_id"
    """A request reused the id of one of its requests still in flight. Answered -32600 with id null."""
    UNKNOWN_RESPONSE_ID = "unknown_response_id"
    """A response for an id we never used (or forgot long ago)."""
    DUPLICATE_RESPONSE = "duplicate_response"
    """A second response for a request that was already answered."""
    INVALID_RESPONSE = "invalid_response"
    """A response that breaks the rules, or whose id matches one of our requests only loosely
    (``3.0`` or ``"3"`` for ``3``); the request it names fails. Never answered."""
    INVALID_CANCEL = "invalid_cancel"
    """A ``$/cancel_request`` without a usable ``requestId``."""
    UNKNOWN_CANCEL_ID = "unknown_cancel_id"
    """A ``$/cancel_request`` for an id that never was in flight here (or was forgotten)."""
    NULL_ID_ERROR = "null_id_error"
    """An error response with id null: the peer could not read something we sent."""


@dataclass(slots=True)
class ProtocolViolation:
    """The peer broke a rule. ``replied`` says whether the core queued an error reply (never for
    a response; not past the connection's bound on error replies to garbage in a row)."""

    kind: Violation
    detail: str
    id: RequestId = None
    replied: bool = False
    line: bytes | None = None
    """The start of the offending line, for lines that could not be read as a message."""


@dataclass(slots=True)
class EndOfInput:
    """The peer's output ended (``receive_data(b"")``)."""


Event = (
    Request
    | Notification
    | NotificationRun
    | CancelRequest
    | Response
    | ErrorResponse
    | Quiet
    | ProtocolViolation
    | EndOfInput
)


def worth_logging(n: int) -> bool:
    """Whether the ``n``-th occurrence of a repeated report is logged: the 1st, 10th, 100th...

    O(log n) log lines for n repeats, each saying the count: a peer that misbehaves on every
    line cannot flood the log.
    """
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1
