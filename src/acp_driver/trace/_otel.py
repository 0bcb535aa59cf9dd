"""OpenTelemetry spans and a metric from the same observations as the trace file (the ``otel`` extra).

``OtelSink`` is a ``TraceSink``: give it as ``trace=`` to ``launch``/``connect``/``serve_*`` (the
host's role) or to ``serve_stdio``/``run_agent`` (the agent's), alone or in a ``Tee`` with a
``TraceRecorder``. It makes, in either role, on the conventions people query (OpenTelemetry's
GenAI agent spans, JSON-RPC spans, process attributes):

- one root span per connection (``acp.connection``), from the first thing seen to ``close()``:
  ``initialize``, ``session/new`` and the turns are its children, one trace per agent lifetime;
- a span per request, named by its method: ``CLIENT`` for a request this side sent, ``SERVER``
  for one it received, ended by its answer, with ``rpc.system``, ``rpc.method``,
  ``rpc.jsonrpc.version``, ``rpc.jsonrpc.request_id``; an error answer sets the status and
  ``rpc.jsonrpc.error_code``/``error_message`` (redacted as the file is); ``-32800`` is
  ``acp.cancelled``, not an error;
- a span per prompt turn, ``invoke_agent {gen_ai.agent.name}`` (``gen_ai.operation.name`` =
  ``invoke_agent``, ``gen_ai.agent.name``/``id``/``version`` from ``initialize``,
  ``gen_ai.conversation.id`` = the session id, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens`` from ``usage_update``), parent of its ``session/prompt`` span and
  of the requests the turn makes; it spans the turn's work: in v1 to the prompt's answer, in v2
  to the idle ``state_update`` that ends it (the answer only says the prompt was inserted); the
  host's ends when the host's turn resolved (its ladder included). Events: ``acp.cancel.sent`` /
  ``acp.cancel.received`` (``session/cancel``), ``acp.cancel_request.sent`` / ``.received``,
  ``acp.cancel.requested`` (the host's cancel, with its scope), ``acp.ladder.rung`` (each rung,
  when due), ``acp.permission.cancelled``, ``acp.process.signal`` and ``acp.process.exit``
  (``process.pid``, ``process.exit.code``); attributes ``acp.stop_reason``, ``acp.resolution``,
  ``acp.resolved_by``, ``acp.cancelled_by`` (no convention has these: they are the product),
  ``acp.updates``, ``acp.protocol_version``, ``acp.session_id``, ``acp.role``;
- the histogram ``acp.cancel.duration`` (seconds): from a cancel to its turn's resolution, with
  ``acp.resolved_by`` (the host: the rung that took effect, or ``ignored``) or ``acp.stop_reason``
  (the agent: the stop reason its turn ended with after ``session/cancel``);
- trace context across the wire: the host puts the turn span's W3C ``traceparent`` (and
  ``tracestate``) in the ``session/prompt``'s ``_meta`` (spec: extensibility.mdx reserves these
  keys there; every ACP type carries ``_meta``, so every peer accepts it), and an agent's sink
  continues the trace from it (its turn span then links to its own connection span).

What reaches a span is redacted first, by the trace file's rule (``_redact``): a message (so an
error status never carries a token) and an event's fields.

The ``opentelemetry`` package is imported here only, when an ``OtelSink`` is made: nothing of
it loads on any other path. Spans and the metric go wherever the application's providers send
them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import __version__
from .. import protocol as p
from ..core import PROFILES, profile_for
from ._redact import Redactor, redact_fields, redact_value

INVOKE_AGENT = "invoke_agent"
CANCEL_DURATION = "acp.cancel.duration"


@dataclass
class _Turn:
    """One turn span and what it collects until it ends."""

    span: Any
    session: Any
    updates: int = 0
    cancelled_at: float | None = None
    """When its cancel was asked (host) or received (agent), on the sink's clock."""
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class OtelSink:
    """OpenTelemetry spans and a metric for what a connection does (see the module docstring)."""

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        role: str = "host",
        meter_provider: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from opentelemetry import metrics, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._api = trace
        self._propagator = TraceContextTextMapPropagator()
        self._tracer = trace.get_tracer("acp_driver", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("acp_driver", __version__, meter_provider=meter_provider)
        self._cancel_duration = meter.create_histogram(
            CANCEL_DURATION, unit="s", description="From a cancel to the resolution of its turn"
        )
        self._clock = clock
        self.role = role
        self.protocol_version: Any = None
        self._profile = profile_for(1)
        """The version's facts, once ``initialize`` was answered (before: v1's)."""
        self._agent: dict[str, str] = {}
        """``gen_ai.agent.*`` attributes, from the ``initialize`` answer."""
        self._root: Any = None
        self._requests: dict[tuple[str, Any], tuple[Any, str, Any]] = {}
        """(direction it was sent in, id) -> (span, method, session id)."""
        self._turns: dict[Any, list[_Turn]] = {}
        """Session id -> its turns not yet ended, oldest first (v2: the running one, then the
        prompts held behind it)."""
        self._prompts: dict[tuple[str, Any], _Turn] = {}
        """The ``session/prompt`` requests -> their turn."""
        self._prepared: dict[Any, Any] = {}
        """Session id -> a turn span started by ``meta`` for a prompt about to be sent."""
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
        turns = self._turns.get(session, [])
        turn = turns[0] if turns else None
        attributes = {f"acp.{k}": _attr(v) for k, v in fields.items() if v is not None and k != "schedule"}
        if kind == "cancel":
            # a session's cancel concerns its turns; an agent's, every turn
            targets = turns if session is not None else [t for ts in self._turns.values() for t in ts]
            for target in targets:
                target.span.add_event("acp.cancel.requested", attributes)
                if target.cancelled_at is None:
                    target.cancelled_at = self._clock()
        elif kind == "rung" and turn is not None:
            turn.span.add_event("acp.ladder.rung", attributes)
        elif kind == "resolved" and turn is not None:
            for key in ("resolution", "stop_reason", "by", "cancelled_by"):
                if fields.get(key) is not None:
                    name = "acp.resolved_by" if key == "by" else f"acp.{key}"
                    turn.span.set_attribute(name, str(fields[key]))
            if isinstance(fields.get("stop_reason"), str):
                turn.stop_reason = fields["stop_reason"]
            self._end_turn(turn, {"acp.resolved_by": str(fields.get("by") or "none")})
        elif kind in ("spawn", "signal", "exit"):
            self._process(kind, fields)
        return None

    def close(self) -> None:
        """End whatever is still open (a connection that closed mid-turn), then the root span."""
        for turns in list(self._turns.values()):
            for turn in list(turns):
                self._end_turn(turn, None)
        for span in self._prepared.values():
            span.end()
        self._prepared.clear()
        for span, _method, _sid in self._requests.values():
            span.set_attribute("acp.unanswered", True)
            span.end()
        self._requests.clear()
        if self._root is not None:
            self._root.end()
            self._root = None

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
        turn: _Turn | None = None
        if method == p.SESSION_PROMPT:
            span = self._prepared.pop(session, None)
            if span is None:
                meta = params.get("_meta")
                parent = (
                    self._propagator.extract(meta) if direction == "in" and isinstance(meta, dict) else None
                )
                span = self._start_turn(session, parent)
            turn = _Turn(span, session)
            self._turns.setdefault(session, []).append(turn)
            self._prompts[(direction, _key(rid))] = turn
        else:
            turns = self._turns.get(session)
            turn = turns[0] if turns else None
        parent_span = turn.span if turn is not None else self._root_span()
        span = self._tracer.start_span(
            method,
            context=self._api.set_span_in_context(parent_span),
            kind=kind,
            attributes=self._attributes(method, rid, session),
        )
        self._requests[(direction, _key(rid))] = (span, method, session)

    def _notification(self, direction: str, method: str, params: dict[str, Any], session: Any) -> None:
        way = "sent" if direction == "out" else "received"
        turns = self._turns.get(session, [])
        if method == p.SESSION_UPDATE:
            update = params.get("update")
            if isinstance(update, dict):
                self._update(turns, update)
        elif method == p.SESSION_CANCEL:
            for turn in turns:
                turn.span.add_event(f"acp.cancel.{way}", {"rpc.method": method})
                if direction == "in" and turn.cancelled_at is None:
                    turn.cancelled_at = self._clock()
        elif method == p.CANCEL_REQUEST:
            target = self._requests.get((direction, _key(params.get("requestId"))))
            if target is not None:
                span, target_method, target_session = target
                span.add_event(f"acp.cancel_request.{way}")
                for turn in self._turns.get(target_session, [])[:1]:
                    if turn.span is not span:
                        turn.span.add_event(f"acp.cancel_request.{way}", {"rpc.method": target_method})

    def _update(self, turns: list[_Turn], update: dict[str, Any]) -> None:
        if not turns:
            return
        turn = turns[0]
        kind = update.get("sessionUpdate")
        if kind == "state_update" and update.get("state") == "idle":
            if self._profile.answer_ends_turn:
                return
            reason = self._profile.idle_stop_reason(update)
            if reason is not None:
                turn.stop_reason = reason
                turn.span.set_attribute("acp.stop_reason", reason)
            if self.role != "host":
                self._end_turn(turn, None)  # the agent's turn is its work, up to the idle
            return
        turn.updates += 1
        if kind == "usage_update":
            used, size, cost = update.get("used"), update.get("size"), update.get("cost")
            if isinstance(used, int):
                turn.usage["gen_ai.usage.input_tokens"] = used
            if isinstance(size, int):
                turn.usage["acp.usage.context_size"] = size
            if isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)):
                turn.usage["acp.usage.cost.amount"] = float(cost["amount"])
                turn.usage["acp.usage.cost.currency"] = str(cost.get("currency"))

    def _answer(self, direction: str, message: dict[str, Any]) -> None:
        asked = "in" if direction == "out" else "out"
        key = (asked, _key(message.get("id")))
        found = self._requests.pop(key, None)
        if found is None:
            return
        span, method, _session = found
        result = message.get("result")
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            span.set_attribute("rpc.jsonrpc.error_code", _attr(code))
            text = str(redact_value(str(error.get("message", ""))))
            span.set_attribute("rpc.jsonrpc.error_message", text)
            if code == -32800:
                span.set_attribute("acp.cancelled", True)
            else:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, text))
        elif isinstance(result, dict):
            if method == p.INITIALIZE:
                self._initialized(span, result)
            elif method == p.SESSION_PROMPT and "stopReason" in result:
                span.set_attribute("acp.stop_reason", str(result["stopReason"]))
            elif method == p.SESSION_REQUEST_PERMISSION:
                outcome = result.get("outcome")
                if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
                    span.set_attribute("acp.permission.outcome", "cancelled")
                    turns = self._turns.get(_session)
                    if turns:
                        turns[0].span.add_event(
                            "acp.permission.cancelled", {"rpc.jsonrpc.request_id": str(message["id"])}
                        )
        span.end()
        turn = self._prompts.pop(key, None) if method == p.SESSION_PROMPT else None
        if turn is not None:
            self._prompt_answered(turn, result, error)

    def _prompt_answered(self, turn: _Turn, result: Any, error: Any) -> None:
        stop = result.get("stopReason") if isinstance(result, dict) else None
        if isinstance(stop, str):
            turn.stop_reason = stop
            turn.span.set_attribute("acp.stop_reason", stop)
        usage = result.get("usage") if isinstance(result, dict) else None
        if isinstance(usage, dict):  # an extension some agents send on the answer
            for theirs, ours in (
                ("inputTokens", "gen_ai.usage.input_tokens"),
                ("outputTokens", "gen_ai.usage.output_tokens"),
                ("cachedReadTokens", "gen_ai.usage.cache_read.input_tokens"),
            ):
                if isinstance(usage.get(theirs), int):
                    turn.usage[ours] = usage[theirs]
        if isinstance(error, dict):
            turn.span.set_attribute("rpc.jsonrpc.error_code", _attr(error.get("code")))
        if self.role == "host":
            return  # a host's turn ends at its resolution (a lifecycle event)
        if self._profile.answer_ends_turn or not isinstance(result, dict):
            self._end_turn(turn, None)  # v2: an answer that is not an insertion refused the prompt

    def _initialized(self, span: Any, result: dict[str, Any]) -> None:
        version = result.get("protocolVersion")
        if version is None:
            return
        self.protocol_version = version
        span.set_attribute("acp.protocol_version", _attr(version))
        profile = PROFILES.get(version) if isinstance(version, int) else None
        if profile is not None:
            self._profile = profile
        info = result.get("agentInfo") or result.get("info")  # v1's name, v2's
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            self._agent["gen_ai.agent.id"] = info["name"]
            title = info.get("title")
            self._agent["gen_ai.agent.name"] = title if isinstance(title, str) and title else info["name"]
            if isinstance(info.get("version"), str):
                self._agent["gen_ai.agent.version"] = info["version"]
        root = self._root_span()
        root.set_attribute("acp.protocol_version", _attr(version))
        root.set_attributes(self._agent)

    def _process(self, kind: str, fields: dict[str, Any]) -> None:
        root = self._root_span()
        attributes: dict[str, Any] = {}
        if isinstance(fields.get("pid"), int):
            attributes["process.pid"] = fields["pid"]
        if kind == "spawn":
            root.set_attributes(attributes)
            return
        if kind == "exit" and isinstance(fields.get("status"), int):
            attributes["process.exit.code"] = fields["status"]
            root.set_attribute("process.exit.code", fields["status"])
        if kind == "signal":
            attributes["acp.signal"] = str(fields.get("name"))
            attributes["acp.to"] = str(fields.get("to"))
        name = f"acp.process.{kind}"
        root.add_event(name, attributes)
        for turns in self._turns.values():
            for turn in turns:
                turn.span.add_event(name, attributes)

    # ------------------------------------------------------------------ spans

    def _root_span(self) -> Any:
        if self._root is None:
            kind = self._api.SpanKind.CLIENT if self.role == "host" else self._api.SpanKind.SERVER
            attributes: dict[str, Any] = {"acp.role": self.role, "rpc.system": "jsonrpc"}
            if self.role == "agent":
                attributes["process.pid"] = os.getpid()  # a host's is its agent's, from the spawn
            self._root = self._tracer.start_span("acp.connection", kind=kind, attributes=attributes)
        return self._root

    def _start_turn(self, session: Any, parent: Any) -> Any:
        kind = self._api.SpanKind.CLIENT if self.role == "host" else self._api.SpanKind.SERVER
        root = self._root_span()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": INVOKE_AGENT,
            "gen_ai.conversation.id": str(session),
            **self._agent,
            "acp.role": self.role,
            "acp.session_id": str(session),
        }
        if self.protocol_version is not None:
            attributes["acp.protocol_version"] = _attr(self.protocol_version)
        links: list[Any] = []
        if parent is None:
            parent = self._api.set_span_in_context(root)
        else:  # the host's trace continues here; the agent's lifetime is linked
            links.append(self._api.Link(root.get_span_context()))
        name = f"{INVOKE_AGENT} {self._agent['gen_ai.agent.name']}" if self._agent else INVOKE_AGENT
        return self._tracer.start_span(name, context=parent, kind=kind, attributes=attributes, links=links)

    def _end_turn(self, turn: _Turn, metric: dict[str, str] | None) -> None:
        turns = self._turns.get(turn.session, [])
        if turn not in turns:
            return
        turns.remove(turn)
        if not turns:
            self._turns.pop(turn.session, None)
        for key, value in list(self._prompts.items()):
            if value is turn:
                del self._prompts[key]
        span = turn.span
        span.set_attribute("acp.updates", turn.updates)
        if turn.stop_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [turn.stop_reason])
        if turn.usage:
            span.set_attributes(turn.usage)
        if turn.cancelled_at is not None:
            attributes = {"acp.role": self.role, **(metric or {})}
            if metric is None:
                attributes["acp.stop_reason"] = turn.stop_reason or "none"
            self._cancel_duration.record(max(0.0, self._clock() - turn.cancelled_at), attributes)
        span.end()

    def _attributes(self, method: str, rid: Any, session: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "rpc.method": method,
            "rpc.jsonrpc.version": "2.0",
            "rpc.jsonrpc.request_id": str(rid),
            "acp.role": self.role,
        }
        if session is not None:
            attributes["acp.session_id"] = str(session)
        if self.protocol_version is not None:
            attributes["acp.protocol_version"] = _attr(self.protocol_version)
        return attributes


def _key(rid: Any) -> Any:
    """A request id as a dict key (an id that is an object or an array: its JSON text)."""
    return rid if isinstance(rid, (str, int, float, type(None))) else orjson.dumps(rid)


def _attr(value: Any) -> Any:
    """An OpenTelemetry attribute value: str, bool, int, float; anything else as text."""
    return value if isinstance(value, (str, bool, int, float)) else str(value)
