"""The sans-IO core: framing, JSON-RPC envelopes, in-flight ledgers, the cancel ladder. No I/O, no clock.

Imports nothing from asyncio, subprocess, os or time (a test keeps it that way).
"""

from ._agent_turn import AGENT_TURN_TRANSITIONS, AgentTurnEvent, AgentTurnMachine, AgentTurnState
from ._connection import CANCEL_REQUEST_METHOD, Connection, Received, Tracer, is_request_id
from ._errors import (
    AcpError,
    ConnectionClosedError,
    ErrorCode,
    LocalProtocolError,
    RemoteProtocolError,
    RequestCancelledError,
    RequestTimeoutError,
    RpcError,
    error_from_object,
)
from ._events import (
    CancelRequest,
    EndOfInput,
    ErrorResponse,
    Event,
    Ignored,
    Notification,
    ProtocolViolation,
    Quiet,
    Request,
    RequestId,
    Response,
    Violation,
    worth_logging,
)
from ._framing import DEFAULT_MAX_LINE_BYTES, LineFramer, OversizedLine
from ._ladder import DEFAULT_BUDGET, CancelLadder, LadderPolicy, Resolution, Rung
from ._ledger import DEFAULT_TOMBSTONES, InFlight, Ledger, Outcome, Tombstone
from ._turn import TRANSITIONS, Observation, Seen, Step, TurnMachine, TurnState

__all__ = [
    "AGENT_TURN_TRANSITIONS",
    "CANCEL_REQUEST_METHOD",
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_TOMBSTONES",
    "TRANSITIONS",
    "AcpError",
    "AgentTurnEvent",
    "AgentTurnMachine",
    "AgentTurnState",
    "CancelLadder",
    "CancelRequest",
    "Connection",
    "ConnectionClosedError",
    "EndOfInput",
    "ErrorCode",
    "ErrorResponse",
    "Event",
    "Ignored",
    "InFlight",
    "LadderPolicy",
    "Ledger",
    "LineFramer",
    "LocalProtocolError",
    "Notification",
    "Observation",
    "Outcome",
    "OversizedLine",
    "ProtocolViolation",
    "Quiet",
    "Received",
    "RemoteProtocolError",
    "Request",
    "RequestCancelledError",
    "RequestId",
    "RequestTimeoutError",
    "Resolution",
    "Response",
    "RpcError",
    "Rung",
    "Seen",
    "Step",
    "Tombstone",
    "Tracer",
    "TurnMachine",
    "TurnState",
    "Violation",
    "error_from_object",
    "is_request_id",
    "worth_logging",
]
