"""The sans-IO core: framing, JSON-RPC envelopes, in-flight ledgers, the cancel ladder. No I/O, no clock.

Imports nothing from asyncio, subprocess, os or time (a test keeps it that way). Names load
lazily (``acp_driver._lazy``): an agent does not import the host's turn machine and ladder.
"""

import typing

from .._lazy import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "._agent_turn": (
            "AgentTurnEvent",
            "AgentTurnMachine",
            "AgentTurnState",
        ),
        "._endings": ("TurnEnding",),
        "._endpoint": ("Endpoint",),
        "._escalation": (
            "CLOSE_GRACE",
            "EXIT_WAIT",
            "OUTPUT_GRACE",
            "SHUTDOWN_GRACE",
            "TERM_GRACE",
            "TREE_WAIT",
            "resolve_within",
        ),
        "._errors": (
            "AcpError",
            "ConnectionClosedError",
            "ErrorCode",
            "LocalProtocolError",
            "RemoteProtocolError",
            "RequestCancelledError",
            "RequestTimeoutError",
            "RpcError",
            "error_from_object",
        ),
        "._events": (
            "CancelRequest",
            "EndOfInput",
            "ErrorResponse",
            "Event",
            "Ignored",
            "Notification",
            "NotificationRun",
            "ProtocolViolation",
            "Quiet",
            "Request",
            "RequestId",
            "Response",
            "Violation",
            "worth_logging",
        ),
        "._framing": (
            "DEFAULT_MAX_LINE_BYTES",
            "LineFramer",
            "OversizedLine",
        ),
        "._json": ("encode_json", "encode_relayed", "parse_json", "printable", "scrub"),
        "._connection_end": ("ConnectionEndMachine",),
        "._host_turn": ("TurnMachine", "TurnState"),
        "._ladder": (
            "DEFAULT_BUDGET",
            "CancelLadder",
            "CancelMachine",
            "LadderPolicy",
            "Observation",
            "Resolution",
            "Seen",
            "Step",
        ),
        "._negotiation": (
            "ECHO_NOTE",
            "Negotiated",
            "NegotiationError",
            "Wanted",
            "answers_like_v1",
            "first_version",
            "initialize_params",
            "read_answer",
            "retry_version",
        ),
        "._rungs": ("Action", "Rung"),
        "._lifecycle": (
            "CancelPlan",
            "Decided",
            "Decision",
            "Effects",
            "PromptState",
            "SessionLifecycle",
            "V1Session",
            "V2Session",
            "lifecycle_for",
        ),
        "._wire_reading": ("read_prompt_answer", "read_update"),
        "._shapes": ("Shapes",),
        "._profile": (
            "LATEST",
            "PROFILES",
            "V1",
            "V2",
            "ProtocolProfile",
            "TurnEnd",
            "negotiate",
            "profile_for",
        ),
        "._ledger": (
            "DEFAULT_TOMBSTONES",
            "InFlight",
            "Ledger",
            "Outcome",
            "Tombstone",
        ),
        "._receiving": (
            "CANCEL_REQUEST_METHOD",
            "Received",
            "Tracer",
            "is_request_id",
        ),
    },
)

if typing.TYPE_CHECKING:
    from ._agent_turn import AgentTurnEvent as AgentTurnEvent
    from ._agent_turn import AgentTurnMachine as AgentTurnMachine
    from ._agent_turn import AgentTurnState as AgentTurnState
    from ._connection_end import ConnectionEndMachine as ConnectionEndMachine
    from ._endings import TurnEnding as TurnEnding
    from ._endpoint import Endpoint as Endpoint
    from ._errors import AcpError as AcpError
    from ._errors import ConnectionClosedError as ConnectionClosedError
    from ._errors import ErrorCode as ErrorCode
    from ._errors import LocalProtocolError as LocalProtocolError
    from ._errors import RemoteProtocolError as RemoteProtocolError
    from ._errors import RequestCancelledError as RequestCancelledError
    from ._errors import RequestTimeoutError as RequestTimeoutError
    from ._errors import RpcError as RpcError
    from ._errors import error_from_object as error_from_object
    from ._escalation import CLOSE_GRACE as CLOSE_GRACE
    from ._escalation import EXIT_WAIT as EXIT_WAIT
    from ._escalation import OUTPUT_GRACE as OUTPUT_GRACE
    from ._escalation import SHUTDOWN_GRACE as SHUTDOWN_GRACE
    from ._escalation import TERM_GRACE as TERM_GRACE
    from ._escalation import TREE_WAIT as TREE_WAIT
    from ._escalation import resolve_within as resolve_within
    from ._events import CancelRequest as CancelRequest
    from ._events import EndOfInput as EndOfInput
    from ._events import ErrorResponse as ErrorResponse
    from ._events import Event as Event
    from ._events import Ignored as Ignored
    from ._events import Notification as Notification
    from ._events import NotificationRun as NotificationRun
    from ._events import ProtocolViolation as ProtocolViolation
    from ._events import Quiet as Quiet
    from ._events import Request as Request
    from ._events import RequestId as RequestId
    from ._events import Response as Response
    from ._events import Violation as Violation
    from ._events import worth_logging as worth_logging
    from ._framing import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES
    from ._framing import LineFramer as LineFramer
    from ._framing import OversizedLine as OversizedLine
    from ._host_turn import TurnMachine as TurnMachine
    from ._host_turn import TurnState as TurnState
    from ._json import encode_json as encode_json
    from ._json import encode_relayed as encode_relayed
    from ._json import parse_json as parse_json
    from ._json import printable as printable
    from ._json import scrub as scrub
    from ._ladder import DEFAULT_BUDGET as DEFAULT_BUDGET
    from ._ladder import CancelLadder as CancelLadder
    from ._ladder import CancelMachine as CancelMachine
    from ._ladder import LadderPolicy as LadderPolicy
    from ._ladder import Observation as Observation
    from ._ladder import Resolution as Resolution
    from ._ladder import Seen as Seen
    from ._ladder import Step as Step
    from ._ledger import DEFAULT_TOMBSTONES as DEFAULT_TOMBSTONES
    from ._ledger import InFlight as InFlight
    from ._ledger import Ledger as Ledger
    from ._ledger import Outcome as Outcome
    from ._ledger import Tombstone as Tombstone
    from ._lifecycle import CancelPlan as CancelPlan
    from ._lifecycle import Decided as Decided
    from ._lifecycle import Decision as Decision
    from ._lifecycle import Effects as Effects
    from ._lifecycle import PromptState as PromptState
    from ._lifecycle import SessionLifecycle as SessionLifecycle
    from ._lifecycle import V1Session as V1Session
    from ._lifecycle import V2Session as V2Session
    from ._lifecycle import lifecycle_for as lifecycle_for
    from ._negotiation import ECHO_NOTE as ECHO_NOTE
    from ._negotiation import Negotiated as Negotiated
    from ._negotiation import NegotiationError as NegotiationError
    from ._negotiation import Wanted as Wanted
    from ._negotiation import answers_like_v1 as answers_like_v1
    from ._negotiation import first_version as first_version
    from ._negotiation import initialize_params as initialize_params
    from ._negotiation import read_answer as read_answer
    from ._negotiation import retry_version as retry_version
    from ._profile import LATEST as LATEST
    from ._profile import PROFILES as PROFILES
    from ._profile import V1 as V1
    from ._profile import V2 as V2
    from ._profile import ProtocolProfile as ProtocolProfile
    from ._profile import TurnEnd as TurnEnd
    from ._profile import negotiate as negotiate
    from ._profile import profile_for as profile_for
    from ._receiving import CANCEL_REQUEST_METHOD as CANCEL_REQUEST_METHOD
    from ._receiving import Received as Received
    from ._receiving import Tracer as Tracer
    from ._receiving import is_request_id as is_request_id
    from ._rungs import Action as Action
    from ._rungs import Rung as Rung
    from ._shapes import Shapes as Shapes
    from ._wire_reading import read_prompt_answer as read_prompt_answer
    from ._wire_reading import read_update as read_update
