"""The observer interface the rest of the library talks to: ``TraceSink``.

Two kinds of calls reach a sink:

- ``wire(direction, data)``: one JSON-RPC message as it crosses the connection (``"out"``: sent
  by this side, ``"in"``: received), its JSON text. Its signature is the core's ``Tracer``, so a
  sink's ``wire`` is what a ``Connection(tracer=...)`` calls; nothing else is on the hot path.
- ``event(kind, **fields)``: a lifecycle moment the wire does not show (a cancel requested, a
  ladder rung taken, a signal, a process exit, the connection's end). The call sites are one
  line each; docs/trace.md lists them and the kinds.

A sink is a file recorder (``TraceRecorder``), the OpenTelemetry bridge (``OtelSink``), several
at once (``Tee``), or the same sink with fields added to everything (``bind``: a served
connection's id, a check's name). ``meta(session_id)`` is the one question a sink is asked: the
``_meta`` trace context to put in a ``session/prompt`` (None: nothing to add).

No asyncio here: sinks are called synchronously from wherever the moment happens.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable


@runtime_checkable
class TraceSink(Protocol):
    """What a trace observer offers (see the module docstring)."""

    def wire(self, direction: str, data: bytes, **fields: Any) -> None:
        """One message's JSON text crossing the connection (``"in"``/``"out"``)."""

    def event(self, kind: str, **fields: Any) -> int | None:
        """A lifecycle moment; returns the event's id in the trace file, if it has one."""

    def meta(self, session_id: str) -> dict[str, str] | None:
        """``_meta`` fields (W3C trace context) for a ``session/prompt`` of ``session_id``."""

    def close(self) -> None:
        """No more events are expected (a sink may still accept late ones)."""


class Bound:
    """``sink`` with ``fields`` added to every wire message and event (``bind``)."""

    __slots__ = ("fields", "sink")

    def __init__(self, sink: TraceSink, fields: dict[str, Any]) -> None:
        self.sink = sink
        self.fields = fields

    def wire(self, direction: str, data: bytes, **fields: Any) -> None:
        self.sink.wire(direction, data, **self.fields, **fields)

    def event(self, kind: str, **fields: Any) -> int | None:
        return self.sink.event(kind, **{**self.fields, **fields})

    def meta(self, session_id: str) -> dict[str, str] | None:
        return self.sink.meta(session_id)

    def close(self) -> None:
        pass  # the sink it is bound to belongs to someone else


def bind(sink: TraceSink, **fields: Any) -> TraceSink:
    """``sink`` with ``fields`` (``conn=...``, ``check=...``) on everything it records."""
    if isinstance(sink, Bound):
        return Bound(sink.sink, {**sink.fields, **fields})
    return Bound(sink, fields)


class Tee:
    """Several sinks as one: each gets every call, in order."""

    __slots__ = ("sinks",)

    def __init__(self, *sinks: TraceSink) -> None:
        self.sinks = sinks

    def wire(self, direction: str, data: bytes, **fields: Any) -> None:
        for sink in self.sinks:
            sink.wire(direction, data, **fields)

    def event(self, kind: str, **fields: Any) -> int | None:
        found: int | None = None
        for sink in self.sinks:
            eid = sink.event(kind, **fields)
            if found is None:
                found = eid
        return found

    def meta(self, session_id: str) -> dict[str, str] | None:
        merged: dict[str, str] = {}
        for sink in self.sinks:
            merged.update(sink.meta(session_id) or {})
        return merged or None

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


TraceTarget: TypeAlias = "str | os.PathLike[str] | TraceSink | None"
"""What ``trace=`` accepts: a file path (a ``TraceRecorder`` owned by the callee), a sink
(owned by the caller), or None."""


def open_trace(target: Any, **header: Any) -> tuple[TraceSink | None, bool]:
    """``trace=`` as a sink, and whether the callee owns it (opened a file, must close it).

    ``header`` goes into the file's first line (``role``, ``command``...)."""
    if target is None:
        return None, False
    if isinstance(target, (str, os.PathLike)):
        from ._recorder import TraceRecorder

        return TraceRecorder(target, **header), True
    if isinstance(target, TraceSink):
        return target, False
    raise TypeError(f"trace= takes a file path or a TraceSink, not {type(target).__name__}")


def wire_tracer(
    tracer: Callable[[str, bytes], None] | None, sink: TraceSink | None
) -> Callable[[str, bytes], None] | None:
    """The ``Connection(tracer=...)`` for an optional tracer and an optional sink (None: none,
    so the connection keeps its untraced path)."""
    if sink is None:
        return tracer
    if tracer is None:
        return sink.wire
    wire = sink.wire

    def both(direction: str, data: bytes) -> None:
        wire(direction, data)
        tracer(direction, data)

    return both


def follow_connection(connection: Any, sink: TraceSink, owned: bool) -> None:
    """Record ``connection_end`` when ``connection`` (an ``aio.Connection``) closes, and close
    ``sink`` then if the callee owns it (later events reopen the file: none is lost)."""

    def closed(reason: str) -> None:
        sink.event("connection_end", reason=reason)
        if owned:
            sink.close()

    connection.on_close.append(closed)
