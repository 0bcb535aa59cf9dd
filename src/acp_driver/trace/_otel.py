"""OpenTelemetry spans from the same observations as the trace file (the ``otel`` extra).

``OtelSink`` is a ``TraceSink``: give it as ``trace=`` to ``launch``/``connect``/``serve_*`` (the
host's role) or to ``serve_stdio``/``run_agent`` (the agent's), alone or in a ``Tee`` with a
``TraceRecorder``. It makes, in either role:

- a span per request, named by its method: ``CLIENT`` for a request this side sent, ``SERVER``
  for one it received, ended by its answer (an error answer sets the status; ``-32800`` is
  ``acp.cancelled``);
- a span per prompt turn (``acp.turn``), parent of its ``session/prompt`` span and of the
  requests the turn makes, with events: ``cancel sent`` / ``cancel received``
  (``session/cancel``), ``cancel_request sent`` / ``received``, ``cancel requested`` (the host's
  cancel, with its scope), ``ladder rung`` (each rung, when due), ``permission answered
  cancelled``, ``signal`` and ``exit`` of the agent's process; attributes ``acp.stop_reason``,
  ``acp.resolution``, ``acp.resolved_by``, ``acp.updates``, ``acp.protocol_version``,
  ``acp.session_id``;
- trace context across the wire: the host puts the turn span's W3C ``traceparent`` (and
  ``tracestate``) in the ``session/prompt``'s ``_meta`` (spec: extensibility.mdx reserves these
  keys there; every ACP type carries ``_meta``, so every peer accepts it), and an agent's sink
  continues the trace from it.

What reaches a span is redacted first, by the trace file's rule (``_redact``): a message (so an
error status never carries a token) and an event's fields.

The ``opentelemetry`` package is imported here only, when an ``OtelSink`` is made: nothing of
it loads on any other path. Spans go wherever the application's ``TracerProvider`` sends them.
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import __version__
from .. import protocol as p
from ._redact import Redactor, redact_fields

_SESSION_KEYS = ("sessionId",)


class OtelSink:
    """OpenTelemetry spans for what a connection does (see the module docstring)."""

    def __init__(self, tracer_provider: Any = None, *, role: str = "host") -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._api = trace
        self._propagator = TraceContextTextMapPropagator()
        self._tracer = trace.get_tracer("acp_driver", __version__, tracer_provider=tracer_provider)
        self.role = role
        self.protocol_version: Any = None
        self._requests: dict[tuple[str, Any], tuple[Any, str, Any]] = {}
        """(direction it was sent in, id) -> (span, method, session id)."""
        self._turns: dict[Any, Any] = {}
        """Session id -> its turn span while the turn runs (and until it resolves)."""
        self._prepared: dict[Any, Any] = {}
        """Session id -> a turn span started by ``meta`` for a prompt about to be sent."""
        self._updates: dict[Any, int] = {}
        self._redactor = Redactor()

    # ------------------------------------------------------------------ TraceSink

    def meta(self, session_id: str) -> dict[str, str] | None:
        span = self._start_turn(session_id, None)
        self._prepared[session_id] = span
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=self._api.set_span_in_context(span))
        return carrier or None

    def wire(self, direction: str, data: bytes, **fields: Any) -> None:
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        message = self._redactor.wire(direction, data, message)
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict):
                self._message(direction, item)

    def event(self, kind: str, **fields: Any) -> int | None:
        fields = redact_fields(fields)
        session = fields.get("session")
        turn = self._turns.get(session)
        attributes = {f"acp.{k}": _attr(v) for k, v in fields.items() if v is not None and k != "schedule"}
        if kind == "cancel" and turn is not None:
            turn.add_event("cancel requested", attributes)
        elif kind == "rung" and turn is not None:
            turn.add_event("ladder rung", attributes)
        elif kind == "resolved" and turn is not None:
            for key in ("resolution", "stop_reason", "by", "cancelled_by"):
                if fields.get(key) is not None:
                    name = "acp.resolved_by" if key == "by" else f"acp.{key}"
                    turn.set_attribute(name, str(fields[key]))
            self._end_turn(session)
        elif kind in ("signal", "exit"):
            for span in list(self._turns.values()):
                span.add_event(kind, attributes)
        return None

    def close(self) -> None:
        """End whatever is still open (a connection that closed mid-turn)."""
        for session in list(self._turns):
            self._end_turn(session)
        for span in self._prepared.values():
            span.end()
        self._prepared.clear()
        for span, _method, _sid in self._requests.values():
            span.set_attribute("acp.unanswered", True)
            span.end()
        self._requests.clear()

    # ------------------------------------------------------------------ messages

    def _message(self, direction: str, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        session = params.get("sessionId")
        if isinstance(method, str) and "id" in message:
            self._request(direction, message["id"], method, params, session)
        elif isinstance(method, str):
            self._notification(direction, method, params, session)
        elif "id" in message:
            self._answer(direction, message)

    def _request(self, direction: str, rid: Any, method: str, params: dict[str, Any], session: Any) -> None:
        kind = self._api.SpanKind.CLIENT if direction == "out" else self._api.SpanKind.SERVER
        if method == p.SESSION_PROMPT:
            turn = self._prepared.pop(session, None)
            if turn is None:
                meta = params.get("_meta")
                parent = (
                    self._propagator.extract(meta) if direction == "in" and isinstance(meta, dict) else None
                )
                turn = self._start_turn(session, parent)
            self._turns[session] = turn
            self._updates[session] = 0
        parent_span = self._turns.get(session)
        context = self._api.set_span_in_context(parent_span) if parent_span is not None else None
        span = self._tracer.start_span(
            method, context=context, kind=kind, attributes=self._attributes(method, rid, session)
        )
        self._requests[(direction, rid)] = (span, method, session)

    def _notification(self, direction: str, method: str, params: dict[str, Any], session: Any) -> None:
        way = "sent" if direction == "out" else "received"
        if method == p.SESSION_UPDATE:
            if session in self._updates:
                self._updates[session] += 1
        elif method == p.SESSION_CANCEL:
            turn = self._turns.get(session)
            if turn is not None:
                turn.add_event(f"cancel {way}", {"acp.method": method})
        elif method == p.CANCEL_REQUEST:
            target = self._requests.get((direction, params.get("requestId")))
            if target is not None:
                span, target_method, target_session = target
                span.add_event(f"cancel_request {way}")
                turn = self._turns.get(target_session)
                if turn is not None and turn is not span:
                    turn.add_event(f"cancel_request {way}", {"acp.method": target_method})

    def _answer(self, direction: str, message: dict[str, Any]) -> None:
        asked = "in" if direction == "out" else "out"
        found = self._requests.pop((asked, message.get("id")), None)
        if found is None:
            return
        span, method, session = found
        result = message.get("result")
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            span.set_attribute("rpc.jsonrpc.error_code", _attr(code))
            if code == -32800:
                span.set_attribute("acp.cancelled", True)
            else:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))))
        elif isinstance(result, dict):
            if method == p.INITIALIZE and "protocolVersion" in result:
                self.protocol_version = result["protocolVersion"]
                span.set_attribute("acp.protocol_version", _attr(self.protocol_version))
            elif method == p.SESSION_PROMPT and "stopReason" in result:
                span.set_attribute("acp.stop_reason", str(result["stopReason"]))
            elif method == p.SESSION_REQUEST_PERMISSION:
                outcome = result.get("outcome")
                if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
                    span.set_attribute("acp.permission.outcome", "cancelled")
                    turn = self._turns.get(session)
                    if turn is not None:
                        turn.add_event(
                            "permission answered cancelled", {"rpc.jsonrpc.request_id": str(message["id"])}
                        )
        span.end()
        if method == p.SESSION_PROMPT:
            turn = self._turns.get(session)
            if turn is not None:
                stop = result.get("stopReason") if isinstance(result, dict) else None
                if stop is not None:
                    turn.set_attribute("acp.stop_reason", str(stop))
                if isinstance(error, dict):
                    turn.set_attribute("rpc.jsonrpc.error_code", _attr(error.get("code")))
                if self.role != "host":
                    self._end_turn(session)  # a host's turn ends at its resolution (a lifecycle event)

    # ------------------------------------------------------------------ spans

    def _start_turn(self, session: Any, parent: Any) -> Any:
        kind = self._api.SpanKind.CLIENT if self.role == "host" else self._api.SpanKind.SERVER
        attributes = {"acp.role": self.role, "acp.session_id": str(session)}
        if self.protocol_version is not None:
            attributes["acp.protocol_version"] = _attr(self.protocol_version)
        return self._tracer.start_span("acp.turn", context=parent, kind=kind, attributes=attributes)

    def _end_turn(self, session: Any) -> None:
        turn = self._turns.pop(session, None)
        if turn is not None:
            turn.set_attribute("acp.updates", self._updates.pop(session, 0))
            turn.end()

    def _attributes(self, method: str, rid: Any, session: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "rpc.method": method,
            "rpc.jsonrpc.request_id": str(rid),
            "acp.role": self.role,
        }
        if session is not None:
            attributes["acp.session_id"] = str(session)
        if self.protocol_version is not None:
            attributes["acp.protocol_version"] = _attr(self.protocol_version)
        return attributes


def _attr(value: Any) -> Any:
    """An OpenTelemetry attribute value: str, bool, int, float; anything else as text."""
    return value if isinstance(value, (str, bool, int, float)) else str(value)
