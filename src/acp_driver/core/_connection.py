"""The sans-IO JSON-RPC 2.0 connection: messages in -> events out; calls in -> messages out.

It works on messages (one JSON text each) so that any transport can carry them: NDJSON lines
over pipes (``receive_data``/``data_to_send`` do that framing here, for convenience and
tests), WebSocket text frames, HTTP bodies and SSE events (``receive_messages`` /
``messages_to_send``).

Rules enforced here (and nowhere else):

- Framing of NDJSON: see ``_framing``. Each line is one JSON value.
- Parsing: orjson first; only a line it rejects is parsed again by the standard library, which
  also accepts lone-surrogate escapes (``"\\ud83d"``: valid JSON text per RFC 8259, emitted by
  JavaScript's ``JSON.stringify``). NaN/Infinity stay invalid. Sending stays strict: a string
  that is not valid Unicode cannot be encoded (the caller gets the error at once).
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
- Two ledgers, incoming and outgoing: separate id namespaces. The only way to put a response on
  the wire is ``send_result``/``send_error``, which close the incoming entry; answering twice
  raises ``LocalProtocolError``. Ended requests are tombstoned so late replies and late cancels
  are recognised (``Quiet`` events), not misrouted.
- Nothing a peer sends raises: violations become ``ProtocolViolation`` events.

The core never touches I/O or clocks. Outgoing messages accumulate until ``messages_to_send()``
(or ``data_to_send()``, the same as NDJSON bytes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ._errors import ErrorCode, LocalProtocolError
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
)
from ._framing import DEFAULT_MAX_LINE_BYTES, LineFramer, OversizedLine
from ._json import encode_json as _dumps_own
from ._json import loads_lenient as _loads_lenient
from ._ledger import DEFAULT_TOMBSTONES, InFlight, Ledger, Outcome

CANCEL_REQUEST_METHOD = "$/cancel_request"

_dumps = orjson.dumps
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_MISSING: Any = object()

DEFAULT_MAX_ERROR_REPLIES = 32
"""Error replies to malformed input in a row (no valid message between them) before we stop
answering it (it is still reported)."""

QUOTE_BYTES = 160
"""How much of a malformed line a violation quotes."""


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


Tracer = Callable[[str, bytes], None]
"""Called with ("in", message) for every incoming message (its JSON text) and ("out", message)
for every outgoing one (its JSON text and the ``\n`` terminator)."""

Received = bytes | str | OversizedLine
"""What a transport hands the core: one message's JSON text, or the report of a message it
dropped for its size."""


def is_request_id(value: object) -> bool:
    """Whether ``value`` may be a JSON-RPC request id (int, str or null; bools and floats are not)."""
    t = type(value)
    return t is int or t is str or value is None


class _Batch:
    """Replies to one incoming batch, held until all its requests are answered."""

    __slots__ = ("pending", "replies")

    def __init__(self) -> None:
        self.pending = 0
        self.replies: list[bytes] = []


class Connection:
    """One end of a JSON-RPC 2.0 connection, without I/O.

    Feed messages with ``receive_messages`` (``receive_eof`` at end of input) -- or NDJSON bytes
    with ``receive_data`` -- and act on the returned events; call the ``send_*`` methods and
    send what ``messages_to_send`` (or ``data_to_send``) returns, in order.
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_tombstones: int = DEFAULT_TOMBSTONES,
        first_id: int = 1,
        default: Callable[[Any], Any] | None = None,
        tracer: Tracer | None = None,
        max_error_replies: int = DEFAULT_MAX_ERROR_REPLIES,
    ) -> None:
        self._framer = LineFramer(max_line_bytes)
        self.incoming = Ledger("incoming", max_tombstones)
        """Requests the peer sent us that we have not answered yet."""
        self.outgoing = Ledger("outgoing", max_tombstones, reused_ids=False)
        """Requests we sent that the peer has not answered yet."""
        self._next_id = first_id
        self._out: list[bytes] = []
        self._default = default
        self._tracer = tracer
        self.their_eof = False
        """The peer's output has ended."""
        self.closed = False
        """We closed the connection: nothing more can be sent."""
        self.max_error_replies = max_error_replies
        self._garbage_run = 0
        """Error replies to malformed input since the last valid message."""
        self.heard_valid = False
        """A valid message (request, notification, answer to one of ours) was received."""

    # ------------------------------------------------------------------ output buffer

    def messages_to_send(self) -> list[bytes]:
        """Every message queued since the last call, in order.

        Each is its JSON text followed by ``\n``: the NDJSON terminator, so the common
        transport sends them as they are, joined; a message-oriented transport drops the last
        byte. (The copy that appends it also right-sizes orjson's output buffer, which is
        allocated with KiBs of spare room: bare buffers queued by the thousand cost more in
        allocation than the copy.)"""
        out = self._out
        if not out:
            return out
        self._out = []
        return out

    def data_to_send(self) -> bytes:
        """Everything queued since the last call as NDJSON bytes (one line per message)."""
        out = self.messages_to_send()
        return out[0] if len(out) == 1 else b"".join(out)

    @property
    def has_data_to_send(self) -> bool:
        return bool(self._out)

    @property
    def pending_messages(self) -> int:
        """How many messages wait in the output buffer."""
        return len(self._out)

    def _emit(self, data: bytes) -> None:
        self._out.append(data)
        if self._tracer is not None:
            self._tracer("out", data)

    def _encode(self, message: Any) -> bytes:
        try:
            return _dumps(message, default=self._default) + b"\n"
        except TypeError:  # a lone surrogate in a string: U+FFFD instead (core/_json.py)
            return _dumps_own(message, self._default) + b"\n"

    def _encode_answer(self, message: dict[str, Any]) -> bytes:
        """Encode an answer to the peer: like ``_encode``, except that the id is the peer's own
        and is echoed as it came -- lone surrogates (escaped: valid JSON) and integers beyond
        64 bits included: the peer wrote it so. Everything else stays strict."""
        try:
            return _dumps(message, default=self._default) + b"\n"
        except TypeError:
            rid = message["id"]
            if type(rid) is not str and type(rid) is not int:
                return _dumps_own(message, self._default) + b"\n"
            data = _dumps_own({**message, "id": None}, self._default)  # ours for the rest
            escaped = json.dumps(rid).encode("ascii")
            return data.replace(b'"id":null', b'"id":' + escaped, 1) + b"\n"

    # ------------------------------------------------------------------ sending

    def _check_open(self, params: Any = None) -> None:
        if self.closed:
            raise LocalProtocolError("the connection is closed")
        if isinstance(params, (str, bytes, int, float)):  # bool is an int
            raise LocalProtocolError(f"params must be an object or an array, not {type(params).__name__}")

    def send_request(self, method: str, params: Any = None, parent: RequestId = None) -> int:
        """Queue a request; return its id. ``parent`` is the incoming request it serves, if any."""
        # The hot path: _check_open, _encode and _emit inlined.
        if self.closed or (type(params) is not dict and params is not None and type(params) is not list):
            self._check_open(params)
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            data = _dumps(message, default=self._default) + b"\n"
        except TypeError:  # not JSON: raises again, nothing recorded; a lone surrogate: U+FFFD
            data = _dumps_own(message, self._default) + b"\n"
        self._next_id = rid + 1
        outgoing = self.outgoing
        if parent is None and rid not in outgoing._in_flight:
            # Ledger.open, inlined: our ids never repeat, so there is no tombstone to forget.
            outgoing._in_flight[rid] = InFlight(rid, method)
        else:
            outgoing.open(rid, method, parent)
        self._out.append(data)
        if self._tracer is not None:
            self._tracer("out", data)
        return rid

    def send_notification(self, method: str, params: Any = None) -> None:
        self._check_open(params)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._emit(self._encode(message))

    def send_cancel_request(self, id: RequestId) -> bool:
        """Ask the peer to cancel our request ``id``. Sent once: True only the first time."""
        if self.closed or not self.outgoing.request_cancel(id):
            return False
        self._emit(
            self._encode({"jsonrpc": "2.0", "method": CANCEL_REQUEST_METHOD, "params": {"requestId": id}})
        )
        return True

    def abandon(self, id: RequestId) -> bool:
        """Stop waiting for our request ``id``; a later reply will be recognised and dropped."""
        if id not in self.outgoing:
            return False
        self.outgoing.close(id, Outcome.ABANDONED)
        return True

    def send_result(self, id: RequestId, result: Any) -> None:
        """Answer the peer's request ``id`` with ``result``."""
        entry = self._answerable(id)
        data = self._encode_answer({"jsonrpc": "2.0", "id": id, "result": result})
        self.incoming.close(id, Outcome.RESULT)
        self._deliver(entry, data)

    def send_error(self, id: RequestId, code: int, message: str, data: Any = None) -> None:
        """Answer the peer's request ``id`` with an error (``-32800`` records it as cancelled).

        Never fails for want of encoding: data that cannot be encoded is dropped, and text that
        is not Unicode is escaped (the request must get its answer)."""
        entry = self._answerable(id)
        error: dict[str, Any] = {"code": int(code), "message": message}
        if data is not None:
            error["data"] = data
        try:
            encoded = self._encode_answer({"jsonrpc": "2.0", "id": id, "error": error})
        except TypeError:
            # The data is not JSON, or the message quotes text that is not Unicode (a method
            # name with lone surrogates): the request still gets its error, without the data.
            safe = message.encode("utf-8", "backslashreplace").decode("utf-8")
            error = {"code": int(code), "message": safe}
            encoded = self._encode_answer({"jsonrpc": "2.0", "id": id, "error": error})
        self.incoming.close(id, Outcome.CANCELLED if code == ErrorCode.REQUEST_CANCELLED else Outcome.ERROR)
        self._deliver(entry, encoded)

    def send_cancelled(self, id: RequestId, message: str = "Request cancelled", data: Any = None) -> None:
        """Answer the peer's request ``id`` with ``-32800``."""
        self.send_error(id, ErrorCode.REQUEST_CANCELLED, message, data)

    def abandon_incoming(self, id: RequestId) -> bool:
        """Close the peer's request ``id`` without an answer (the transport is gone)."""
        if id not in self.incoming:
            return False
        entry = self.incoming.close(id, Outcome.ABANDONED)
        batch = entry.batch
        if batch is not None:
            batch.pending -= 1
            if batch.pending == 0:
                self._finish_batch(batch)
        return True

    def _answerable(self, id: RequestId) -> InFlight:
        entry = self.incoming.get(id)
        if entry is None:
            self.incoming.close(id, Outcome.ERROR)  # raises the precise LocalProtocolError
            raise AssertionError("unreachable")
        if self.closed:
            raise LocalProtocolError("the connection is closed")
        return entry

    def _deliver(self, entry: InFlight, data: bytes) -> None:
        batch: _Batch | None = entry.batch
        if batch is None:
            self._emit(data)
            return
        batch.replies.append(data[:-1])  # without the newline: it joins the batch's array
        batch.pending -= 1
        if batch.pending == 0:
            self._finish_batch(batch)

    def _finish_batch(self, batch: _Batch) -> None:
        if batch.replies:
            self._emit(b"[" + b",".join(batch.replies) + b"]\n")
            batch.replies = []

    def close(self) -> None:
        """Our side is done; every later send raises. Call after answering what can be answered."""
        self.closed = True

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed NDJSON bytes from the peer (``b""`` at end of input); return the resulting events."""
        events = self.receive_messages(self._framer.feed(data))
        if not data:
            events.extend(self.receive_eof())
        return events

    def receive_messages(self, messages: Sequence[Received]) -> list[Event]:
        """Feed messages from the peer, in order; return the resulting events."""
        events: list[Event] = []
        close_if_open = self.outgoing.close_if_open
        untraced = self._tracer is None
        for item in messages:
            if type(item) is bytes or type(item) is str:
                if untraced:
                    # The hot path of _receive_line, inlined: a message that parses to an object.
                    try:
                        message = _loads(item)
                    except _JSONDecodeError:
                        self._receive_line(item, events)
                        continue
                    if type(message) is not dict:
                        self._receive_parsed(message, item, events)
                    elif "result" in message and "method" not in message:
                        # The hot path of _receive_response, inlined: a valid result for one of
                        # our requests in flight. Anything else takes the full checks there.
                        rid = message.get("id")
                        if (
                            (type(rid) is int or type(rid) is str)
                            and "error" not in message
                            and message.get("jsonrpc") == "2.0"
                            and close_if_open(rid, Outcome.RESULT) is not None
                        ):
                            if self._garbage_run:
                                self._garbage_run = 0
                            if not self.heard_valid:
                                self.heard_valid = True
                            events.append(Response(rid, message["result"]))
                        else:
                            self._receive_response(message, events, None)  # as _receive_message would
                    elif "id" not in message:
                        # The hot path of _receive_message, inlined: a valid notification (an
                        # update stream). $/cancel_request and anything invalid take the checks there.
                        method = message.get("method")
                        params = message.get("params")
                        if (
                            type(method) is str
                            and (type(params) is dict or params is None or type(params) is list)
                            and message.get("jsonrpc") == "2.0"
                            and method != CANCEL_REQUEST_METHOD
                        ):
                            if self._garbage_run:
                                self._garbage_run = 0
                            if not self.heard_valid:
                                self.heard_valid = True
                            events.append(Notification(method, params))
                        else:
                            self._receive_message(message, events, None)
                    else:
                        self._receive_message(message, events, None)
                else:
                    self._receive_line(item, events)
            else:
                assert isinstance(item, OversizedLine)
                detail = f"message of {item.size} bytes exceeds the limit of {item.limit} bytes; discarded"
                replied = self._reply_error(
                    None, ErrorCode.INVALID_REQUEST, "Message too large", None, {"detail": detail}
                )
                events.append(ProtocolViolation(Violation.OVERSIZED_LINE, detail, None, replied))
        return events

    def receive_eof(self) -> list[Event]:
        """The peer's output ended (once; later calls return nothing)."""
        if self.their_eof:
            return []
        self.their_eof = True
        return [EndOfInput()]

    def _receive_line(self, line: bytes | str, events: list[Event]) -> None:
        if self._tracer is not None:
            self._tracer("in", line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass"))
        try:
            message = _loads(line)
        except _JSONDecodeError as exc:
            try:
                message = _loads_lenient(line)  # e.g. lone-surrogate escapes
            except (ValueError, RecursionError):
                replied = self._reply_error(
                    None, ErrorCode.PARSE_ERROR, "Parse error", None, {"detail": str(exc)}
                )
                events.append(ProtocolViolation(Violation.PARSE_ERROR, str(exc), None, replied, _quote(line)))
                return
        if type(message) is dict:
            self._receive_message(message, events, None)
        else:
            self._receive_parsed(message, line, events)

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
        batch = _Batch()
        batch.pending = 1  # held while the items are read, so the batch cannot finish early
        for item in items:
            if type(item) is dict:
                self._receive_message(item, events, batch)
            else:
                self._invalid(None, f"a message must be an object, got {type(item).__name__}", events, batch)
        batch.pending -= 1
        if batch.pending == 0:
            self._finish_batch(batch)

    def _receive_message(self, msg: dict[str, Any], events: list[Event], batch: _Batch | None) -> None:
        method = msg.get("method", _MISSING)
        if method is _MISSING and ("result" in msg or "error" in msg):
            self._receive_response(msg, events, batch)
            return
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
        if self._garbage_run:
            self._garbage_run = 0
        if not self.heard_valid:
            self.heard_valid = True
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

    def _receive_response(self, msg: dict[str, Any], events: list[Event], batch: _Batch | None) -> None:
        """A response: never answered (see the module docstring)."""
        rid = msg.get("id", _MISSING)
        if (
            "result" in msg
            and (type(rid) is int or type(rid) is str)
            and msg.get("jsonrpc") == "2.0"
            and "error" not in msg
        ):
            # The hot path: a valid result. The answer to one of our requests in flight is
            # taken here; anything else goes through the checks below.
            entry = self.outgoing.close_if_open(rid, Outcome.RESULT)
            if entry is not None:
                if self._garbage_run:
                    self._garbage_run = 0
                if not self.heard_valid:
                    self.heard_valid = True
                events.append(Response(rid, msg["result"]))
                return
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
        if problem is None:
            entry = self.outgoing.get(rid)
            if entry is not None:
                if self._garbage_run:
                    self._garbage_run = 0
                if not self.heard_valid:
                    self.heard_valid = True
                if "result" in msg:
                    self.outgoing.close(rid, Outcome.RESULT)
                    events.append(Response(rid, msg["result"]))
                    return
                error = msg["error"]
                code = error["code"]
                outcome = Outcome.CANCELLED if code == ErrorCode.REQUEST_CANCELLED else Outcome.ERROR
                self.outgoing.close(rid, outcome)
                events.append(ErrorResponse(rid, code, error["message"], error.get("data")))
                return
        # Not an answer to a request of ours in flight: report it, never answer it.
        failed: RequestId = None
        if rid is not _MISSING and is_request_id(rid) and rid in self.outgoing:
            failed = rid  # a broken answer to our request: fail it rather than wait forever
        elif rid is not _MISSING and rid is not None:
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

    def _invalid(
        self,
        echo: RequestId,
        detail: str,
        events: list[Event],
        batch: _Batch | None,
        line: bytes | str | None = None,
    ) -> None:
        replied = self._reply_error(
            echo, ErrorCode.INVALID_REQUEST, "Invalid request", batch, {"detail": detail}
        )
        quoted = _quote(line) if line is not None else None
        events.append(ProtocolViolation(Violation.INVALID_MESSAGE, detail, echo, replied, quoted))

    def _reply_error(self, id: RequestId, code: int, message: str, batch: _Batch | None, data: Any) -> bool:
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
