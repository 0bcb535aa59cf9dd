"""The receiving half of the sans-IO connection: messages from the peer -> events.

Rules enforced here (and nowhere else):

- Parsing: orjson first; only a line it rejects is parsed again by the standard library, which
  also accepts lone-surrogate escapes (``"\\ud83d"``: valid JSON text per RFC 8259, emitted by
  JavaScript's ``JSON.stringify``). NaN/Infinity stay invalid.
- Invalid JSON -> ``-32700`` with id null. Valid JSON that is not a message -> ``-32600``; the
  id is echoed when the message is request-shaped (has ``method``, or neither ``result`` nor
  ``error``) and the id is readable.
- A response (``result``/``error``, no ``method``) is never answered, valid or not: answering
  one would start a ping-pong with a peer that answers our answers (e.g. id-less error objects
  sent in reply to our notifications). An invalid one is reported (``replied`` False). If it
  names one of our requests in flight, that request fails (``Violation.INVALID_RESPONSE``)
  instead of hanging.
- Ids match exactly (JSON-RPC 2.0): a response whose id only *looks* like one of ours in flight
  (``3.0`` or ``"3"`` for our ``3``) does not answer it; that request fails at once with
  ``Violation.INVALID_RESPONSE`` naming the mismatch (rather than waiting forever).
- Error replies to garbage are bounded: after ``max_error_replies`` in a row with no valid
  message between them, malformed input is still reported but no longer answered (a peer that
  answers our errors with garbage cannot make us flood it). A valid message resets the count.
- Arrays are JSON-RPC 2.0 batches: their requests are answered together in one array once all
  are answered; ``[]`` -> one ``-32600``; a batch of notifications gets no reply.
- A notification is never answered (``$/cancel_request`` included).
- Ended requests are tombstoned (``Ledger``) so late replies and late cancels are recognised
  (``Quiet`` events), not misrouted.
- Nothing a peer sends raises: violations become ``ProtocolViolation`` events.

Where each kind of message is handled: ``_receive`` reads every message (a transport's texts,
and a batch's items through the same loop) and takes the two common valid cases itself -- a
result for one of our requests in flight, and a notification other than ``$/cancel_request``
(an update stream) -- each checked there and nowhere else. Every other message goes to the
method of its kind: ``_receive_response`` (error answers, strays, invalid responses) or
``_receive_call`` (requests, ``$/cancel_request``, and everything request-shaped that is invalid).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ._errors import ErrorCode
from ._events import (
    CancelRequest,
    EndOfInput,
    ErrorResponse,
    Event,
    Ignored,
    Notification,
    NotificationRun,
    ProtocolViolation,
    Quiet,
    Request,
    RequestId,
    Response,
    Violation,
)
from ._framing import LineFramer, OversizedLine
from ._json import loads_lenient as _loads_lenient
from ._ledger import Ledger, Outcome

CANCEL_REQUEST_METHOD = "$/cancel_request"

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_MISSING: Any = object()

QUOTE_BYTES = 160
"""How much of a malformed line a violation quotes."""

Tracer = Callable[[str, bytes], None]
"""Called with ("in", message) for every incoming message (its JSON text) and ("out", message)
for every outgoing one (its JSON text and the ``\n`` terminator)."""

Received = bytes | str | OversizedLine
"""What a transport hands the core: one message's JSON text, or the report of a message it
dropped for its size."""


def _quote(line: bytes | str) -> bytes:
    data = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    return data[:QUOTE_BYTES]


def _lenient_match(rid: Any) -> int | None:
    """The int id a non-matching response id looks like (``3.0``, ``"3"``), if any."""
    t = type(rid)
    if t is float and rid.is_integer():
        return int(rid)
    if t is str and rid.strip().lstrip("-").isdigit() and len(rid) < 20:
        return int(rid)
    return None


def is_request_id(value: object) -> bool:
    """Whether ``value`` may be a JSON-RPC request id (int, str or null; bools and floats are not)."""
    t = type(value)
    return t is int or t is str or value is None


class Batch:
    """Replies to one incoming batch, held until all its requests are answered."""

    __slots__ = ("pending", "replies")

    def __init__(self) -> None:
        self.pending = 0
        self.replies: list[bytes] = []


class Receiving:
    """Mixin of ``Endpoint``: the peer's messages in, events out (see the module docstring)."""

    _framer: LineFramer
    _tracer: Tracer | None
    incoming: Ledger
    outgoing: Ledger
    their_eof: bool
    closed: bool
    max_error_replies: int
    _garbage_run: int
    heard_valid: bool
    run_methods: frozenset[str]

    if TYPE_CHECKING:  # the sending half (``Endpoint``)

        def _emit(self, data: bytes) -> None: ...

        def _encode_answer(self, message: dict[str, Any]) -> bytes: ...

        def _finish_batch(self, batch: Batch) -> None: ...

    # ------------------------------------------------------------------ entry points

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed NDJSON bytes from the peer (``b""`` at end of input); return the resulting events."""
        events = self.receive_messages(self._framer.feed(data))
        if not data:
            events.extend(self.receive_eof())
        return events

    def receive_messages(self, messages: Sequence[Received]) -> list[Event]:
        """Feed messages from the peer, in order; return the resulting events."""
        events: list[Event] = []
        self._receive(messages, events, None)
        return events

    def receive_eof(self) -> list[Event]:
        """The peer's output ended (once; later calls return nothing)."""
        if self.their_eof:
            return []
        self.their_eof = True
        return [EndOfInput()]

    # ------------------------------------------------------------------ every message

    def _receive(self, items: Sequence[Any], events: list[Event], batch: Batch | None) -> None:
        """Messages in order: the texts of a transport (``batch`` None), or the parsed items of
        a batch. The two common valid cases are taken here (see the module docstring)."""
        close_if_open = self.outgoing.close_if_open
        tracer = self._tracer
        run_methods = self.run_methods
        run: NotificationRun | None = None
        for item in items:
            if batch is not None:
                message = item
                if type(message) is not dict:
                    detail = f"a message must be an object, got {type(message).__name__}"
                    self._invalid(None, detail, events, batch)
                    continue
            elif type(item) is bytes or type(item) is str:
                if tracer is not None:
                    tracer("in", item if isinstance(item, bytes) else item.encode("utf-8", "surrogatepass"))
                try:
                    message = _loads(item)
                except _JSONDecodeError as exc:
                    message = self._parse_leniently(item, exc, events)
                    if message is _MISSING:
                        continue
                if type(message) is not dict:
                    self._receive_parsed(message, item, events)
                    continue
            else:
                self._oversized(item, events)
                continue
            event: Event
            if "method" not in message:
                if "result" not in message:
                    if "error" in message:
                        self._receive_response(message, events, batch)
                    else:
                        self._receive_call(message, events, batch)  # neither: request-shaped, invalid
                    continue
                # A result: for one of our requests in flight, valid, it answers it here.
                rid = message.get("id")
                if (
                    (type(rid) is int or type(rid) is str)
                    and "error" not in message
                    and message.get("jsonrpc") == "2.0"
                    and close_if_open(rid, Outcome.RESULT) is not None
                ):
                    event = Response(rid, message["result"])
                else:
                    self._receive_response(message, events, batch)
                    continue
            elif "id" not in message:
                # A notification: valid, and not $/cancel_request, it is an event here.
                method = message["method"]
                params = message.get("params")
                if message.get("jsonrpc") == "2.0" and (
                    type(params) is dict or params is None or type(params) is list
                ):
                    if run is not None and run.method == method and events[-1] is run:
                        # The run goes on (a run's method is a string, never $/cancel_request):
                        # nothing came between (every message leaves an event), so the garbage
                        # count was reset by its first message.
                        run.params.append(params)
                        continue
                    if type(method) is not str or method == CANCEL_REQUEST_METHOD:
                        self._receive_call(message, events, batch)
                        continue
                    if method in run_methods:
                        event = run = NotificationRun(method, [params])
                    else:
                        event = Notification(method, params)
                else:
                    self._receive_call(message, events, batch)
                    continue
            else:
                self._receive_call(message, events, batch)
                continue
            # ``_heard_valid``, inlined: the call costs ~1.4 % of an update's instructions (host
            # only, update stream, ``benchmarks/instructions.py``), over the 0.5 % an inline
            # copy must save to stay (docs/benchmarks.md).
            if self._garbage_run:
                self._garbage_run = 0
            if not self.heard_valid:
                self.heard_valid = True
            events.append(event)

    def _heard_valid(self) -> None:
        """A valid message: the run of error replies to garbage ends."""
        if self._garbage_run:
            self._garbage_run = 0
        if not self.heard_valid:
            self.heard_valid = True

    def _parse_leniently(self, line: bytes | str, exc: Exception, events: list[Event]) -> Any:
        """A line orjson rejected: the standard library's parse (e.g. lone-surrogate escapes),
        else ``-32700`` (returns ``_MISSING`` then)."""
        try:
            return _loads_lenient(line)
        except ValueError:
            replied = self._reply_error(
                None, ErrorCode.PARSE_ERROR, "Parse error", None, {"detail": str(exc)}
            )
            events.append(ProtocolViolation(Violation.PARSE_ERROR, str(exc), None, replied, _quote(line)))
            return _MISSING

    def _oversized(self, item: OversizedLine, events: list[Event]) -> None:
        assert isinstance(item, OversizedLine)
        detail = f"message of {item.size} bytes exceeds the limit of {item.limit} bytes; discarded"
        replied = self._reply_error(
            None, ErrorCode.INVALID_REQUEST, "Message too large", None, {"detail": detail}
        )
        events.append(ProtocolViolation(Violation.OVERSIZED_LINE, detail, None, replied))

    def _receive_parsed(self, message: Any, line: bytes | str, events: list[Event]) -> None:
        """A parsed message that is not an object: a batch, or invalid."""
        if type(message) is list:
            self._receive_batch(message, events)
        else:
            self._invalid(
                None, f"a message must be an object, got {type(message).__name__}", events, None, line
            )

    def _receive_batch(self, items: list[Any], events: list[Event]) -> None:
        if not items:
            replied = self._reply_error(
                None, ErrorCode.INVALID_REQUEST, "Invalid request", None, {"detail": "empty batch"}
            )
            events.append(ProtocolViolation(Violation.EMPTY_BATCH, "empty batch", None, replied, b"[]"))
            return
        batch = Batch()
        batch.pending = 1  # held while the items are read, so the batch cannot finish early
        self._receive(items, events, batch)
        batch.pending -= 1
        if batch.pending == 0:
            self._finish_batch(batch)

    # ------------------------------------------------------------------ requests and notifications

    def _receive_call(self, msg: dict[str, Any], events: list[Event], batch: Batch | None) -> None:
        """A request, ``$/cancel_request``, or anything request-shaped that is invalid (a valid
        notification other than ``$/cancel_request`` was taken by ``_receive``)."""
        method = msg.get("method", _MISSING)
        rid = msg.get("id", _MISSING)
        params = msg.get("params")
        if (
            type(method) is not str
            or msg.get("jsonrpc") != "2.0"
            or (params is not None and type(params) is not dict and type(params) is not list)
        ):
            echo = rid if rid is not _MISSING and is_request_id(rid) else None
            if msg.get("jsonrpc") != "2.0":
                problem = 'missing or wrong "jsonrpc" member (must be "2.0")'
            elif method is _MISSING:
                problem = 'missing "method" member'
            elif type(method) is not str:
                problem = '"method" must be a string'
            else:
                problem = '"params" must be an object or an array'
            self._invalid(echo, problem, events, batch)
            return
        self._heard_valid()
        if rid is _MISSING:
            if method == CANCEL_REQUEST_METHOD:
                self._receive_cancel(params, events)
            else:
                events.append(Notification(method, params))
            return
        if not is_request_id(rid):
            self._invalid(
                None, f'"id" must be an integer, a string or null, got {type(rid).__name__}', events, batch
            )
            return
        if rid in self.incoming:
            detail = f"request id {rid!r} is already in flight ({method!r})"
            replied = self._reply_error(
                None, ErrorCode.INVALID_REQUEST, "Invalid request", batch, {"detail": detail}
            )
            events.append(ProtocolViolation(Violation.DUPLICATE_REQUEST_ID, detail, rid, replied))
            return
        self.incoming.open(rid, method, None, batch)
        if batch is not None:
            batch.pending += 1
        events.append(Request(rid, method, params))

    def _receive_cancel(self, params: Any, events: list[Event]) -> None:
        if type(params) is not dict or "requestId" not in params or not is_request_id(params["requestId"]):
            events.append(
                ProtocolViolation(Violation.INVALID_CANCEL, f"$/cancel_request with params {params!r}")
            )
            return
        rid = params["requestId"]
        entry = self.incoming.get(rid)
        if entry is not None:
            if entry.cancel_requested:
                events.append(Quiet(Ignored.REPEATED_CANCEL, rid, entry.method))
            else:
                entry.cancel_requested = True
                events.append(CancelRequest(rid))
            return
        stone = self.incoming.tombstone(rid)
        if stone is not None:
            events.append(Quiet(Ignored.LATE_CANCEL, rid, stone.method))
        else:
            events.append(
                ProtocolViolation(
                    Violation.UNKNOWN_CANCEL_ID, f"$/cancel_request for unknown request {rid!r}", rid
                )
            )

    # ------------------------------------------------------------------ responses

    def _receive_response(self, msg: dict[str, Any], events: list[Event], batch: Batch | None) -> None:
        """A response other than a valid result for one of our requests in flight (taken by
        ``_receive``): never answered (see the module docstring)."""
        rid = msg.get("id", _MISSING)
        problem = None
        if msg.get("jsonrpc") != "2.0":
            problem = 'missing or wrong "jsonrpc" member (must be "2.0")'
        elif rid is _MISSING:
            problem = 'response without "id"'
        elif not is_request_id(rid):
            problem = f'"id" must be an integer, a string or null, got {type(rid).__name__}'
        elif "result" in msg and "error" in msg:
            problem = 'a response has either "result" or "error", not both'
        elif "error" in msg:
            error = msg["error"]
            if (
                type(error) is not dict
                or type(error.get("code")) is not int
                or type(error.get("message")) is not str
            ):
                problem = '"error" must be an object with an integer "code" and a string "message"'
            elif rid in self.outgoing:
                # A valid error answer to one of our requests in flight.
                self._heard_valid()
                code = error["code"]
                outcome = Outcome.CANCELLED if code == ErrorCode.REQUEST_CANCELLED else Outcome.ERROR
                self.outgoing.close(rid, outcome)
                events.append(ErrorResponse(rid, code, error["message"], error.get("data")))
                return
        # Not an answer to a request of ours in flight: report it, never answer it.
        failed: RequestId = None
        if problem is not None and rid is not _MISSING and is_request_id(rid) and rid in self.outgoing:
            failed = rid  # a broken answer to our request: fail it rather than wait forever
        elif rid is not _MISSING and rid is not None and (problem is not None or rid not in self.outgoing):
            looks_like = _lenient_match(rid)
            if looks_like is not None and looks_like in self.outgoing:
                failed = looks_like
                problem = (
                    f"response id {rid!r} ({type(rid).__name__}) does not match our request id "
                    f"{looks_like!r} exactly (JSON-RPC ids must match in type and value)"
                )
        if failed is not None:
            assert problem is not None
            self.outgoing.close(failed, Outcome.ERROR)
            events.append(ProtocolViolation(Violation.INVALID_RESPONSE, problem, failed))
        elif problem is not None:
            events.append(ProtocolViolation(Violation.INVALID_MESSAGE, problem, None, False))
        else:
            self._stray_response(rid, msg, events)

    def _stray_response(self, rid: RequestId, msg: dict[str, Any], events: list[Event]) -> None:
        stone = self.outgoing.tombstone(rid)
        if stone is None:
            if rid is None and "error" in msg:
                error = msg["error"]
                detail = f"peer reported error {error['code']} with id null: {error['message']}"
                events.append(ProtocolViolation(Violation.NULL_ID_ERROR, detail))
            else:
                events.append(
                    ProtocolViolation(
                        Violation.UNKNOWN_RESPONSE_ID, f"response for unknown request {rid!r}", rid
                    )
                )
        elif stone.outcome is Outcome.ABANDONED:
            self.outgoing.settle(rid)
            events.append(Quiet(Ignored.LATE_RESPONSE, rid, stone.method))
        else:
            ended = stone.outcome.value if stone.outcome is not None else "ended"
            detail = f"second response for request {rid!r} ({stone.method}), already {ended}"
            events.append(ProtocolViolation(Violation.DUPLICATE_RESPONSE, detail, rid))

    # ------------------------------------------------------------------ violations

    def _invalid(
        self,
        echo: RequestId,
        detail: str,
        events: list[Event],
        batch: Batch | None,
        line: bytes | str | None = None,
    ) -> None:
        replied = self._reply_error(
            echo, ErrorCode.INVALID_REQUEST, "Invalid request", batch, {"detail": detail}
        )
        quoted = _quote(line) if line is not None else None
        events.append(ProtocolViolation(Violation.INVALID_MESSAGE, detail, echo, replied, quoted))

    def _reply_error(self, id: RequestId, code: int, message: str, batch: Batch | None, data: Any) -> bool:
        """An error reply that answers no ledger entry (the message was never a valid request).

        Returns whether it was queued: not once closed, nor past ``max_error_replies`` in a row.
        """
        if self.closed or self._garbage_run >= self.max_error_replies:
            return False
        self._garbage_run += 1
        obj = {"jsonrpc": "2.0", "id": id, "error": {"code": int(code), "message": message, "data": data}}
        try:
            encoded = self._encode_answer(obj)
        except TypeError:  # the detail quotes the peer's text that is not Unicode: drop it
            encoded = self._encode_answer(
                {"jsonrpc": "2.0", "id": id, "error": {"code": int(code), "message": message}}
            )
        if batch is None:
            self._emit(encoded)
        else:
            batch.replies.append(encoded[:-1])  # without the newline: it joins the batch's array
        return True
