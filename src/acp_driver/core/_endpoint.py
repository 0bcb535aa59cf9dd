"""The sans-IO JSON-RPC 2.0 connection: messages in -> events out; calls in -> messages out.

It works on messages (one JSON text each) so that any transport can carry them: NDJSON lines
over pipes (``receive_data``/``data_to_send`` do that framing here, for convenience and
tests), WebSocket text frames, HTTP bodies and SSE events (``receive_messages`` /
``messages_to_send``).

Two halves, one concept each: what the peer sends becomes events in ``_receiving`` (parsing,
validation, which error replies, batches, tombstones of late answers); what we send is here.
Rules enforced here (and nowhere else):

- Framing of NDJSON: see ``_framing``. Each line is one JSON value.
- Sending stays strict: a string that is not valid Unicode cannot be encoded (the caller gets
  the error at once), except the peer's own ids, echoed as they came.
- Two ledgers, incoming and outgoing: separate id namespaces. The only way to put a response on
  the wire is ``send_result``/``send_error``, which close the incoming entry; answering twice
  raises ``LocalProtocolError``. The requests of a batch are answered together, in one array.

The core never touches I/O or clocks. Outgoing messages accumulate until ``messages_to_send()``
(or ``data_to_send()``, the same as NDJSON bytes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

from ._errors import ErrorCode, LocalProtocolError
from ._events import RequestId
from ._framing import DEFAULT_MAX_LINE_BYTES, LineFramer
from ._json import encode_json as _dumps_own
from ._ledger import DEFAULT_TOMBSTONES, InFlight, Ledger, Outcome
from ._receiving import CANCEL_REQUEST_METHOD, Batch, Receiving, Tracer

_dumps = orjson.dumps

DEFAULT_MAX_ERROR_REPLIES = 32
"""Error replies to malformed input in a row (no valid message between them) before we stop
answering it (it is still reported)."""


class Endpoint(Receiving):
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
        self.run_methods: frozenset[str] = frozenset()
        """Notifications taken a run at a time: consecutive ones of such a method come as one
        ``NotificationRun`` event (a stream's updates), the others as a ``Notification`` each."""

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
        if self.closed or (type(params) is not dict and params is not None and type(params) is not list):
            self._check_open(params)
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        # ``_encode``, ``Ledger.open`` (for an id of ours, never reused, without a parent) and
        # ``_emit``, inlined: each call costs ~0.6 % of a request's instructions (host only,
        # 1000 concurrent, ``benchmarks/instructions.py``), over the 0.5 % an inline copy must
        # save to stay (docs/benchmarks.md).
        try:
            data = _dumps(message, default=self._default) + b"\n"
        except TypeError:  # not JSON: raises again, nothing recorded; a lone surrogate: U+FFFD
            data = _dumps_own(message, self._default) + b"\n"
        self._next_id = rid + 1
        outgoing = self.outgoing
        if parent is None and rid not in outgoing._in_flight:
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
        batch: Batch | None = entry.batch
        if batch is None:
            self._emit(data)
            return
        batch.replies.append(data[:-1])  # without the newline: it joins the batch's array
        batch.pending -= 1
        if batch.pending == 0:
            self._finish_batch(batch)

    def _finish_batch(self, batch: Batch) -> None:
        if batch.replies:
            self._emit(b"[" + b",".join(batch.replies) + b"]\n")
            batch.replies = []

    def close(self) -> None:
        """Our side is done; every later send raises. Call after answering what can be answered."""
        self.closed = True
