"""What both ends of the remote transport agree on: names, routing keys and SSE framing.

ACP's remote transport (the RFD "Streamable HTTP & WebSocket Transport") has one endpoint,
``/acp``: POST carries client->server messages (``initialize`` answered ``200`` with its JSON and
an ``Acp-Connection-Id``; the rest ``202``), GET opens server-sent-event streams (one
connection-scoped, one per session with ``Acp-Session-Id``), DELETE ends the connection, and a
GET with ``Upgrade: websocket`` is the full-duplex alternative (one JSON-RPC message per text
frame).

Pure: no I/O, no asyncio. Imported by the server and the client, never by the stdio path.
"""

from __future__ import annotations

from typing import Any, Final

from .. import protocol as p

ENDPOINT_PATH: Final = "/acp"
CONNECTION_ID_HEADER: Final = "Acp-Connection-Id"
SESSION_ID_HEADER: Final = "Acp-Session-Id"
CONTENT_TYPE_JSON: Final = "application/json"
CONTENT_TYPE_SSE: Final = "text/event-stream"

SESSION_SCOPED_METHODS: Final = frozenset(
    {
        p.SESSION_PROMPT,
        p.SESSION_CANCEL,
        p.SESSION_SET_MODE,
        p.SESSION_SET_CONFIG_OPTION,
        p.SESSION_CLOSE,
    }
)
"""Client->agent methods on an established session: their POST carries ``Acp-Session-Id`` and
their answers come on that session's stream. ``session/new``/``load``/``resume`` are not among
them: they mint or attach a session, and their answers come on the connection-scoped stream (the
client has no session stream yet). The official SDKs draw the same line."""

SESSION_ATTACH_METHODS: Final = frozenset({p.SESSION_LOAD, p.SESSION_RESUME})
"""Requests that attach the ``sessionId`` of their params (their answer may not repeat it)."""

# WebSocket close codes (RFC 6455 section 7.4.1).
WS_NORMAL: Final = 1000
WS_GOING_AWAY: Final = 1001
WS_POLICY: Final = 1008
"""Policy violation: an Origin or token refused after the upgrade, an idle connection ended."""
WS_TOO_BIG: Final = 1009
WS_TRY_AGAIN: Final = 1013
"""Try again later: the server holds its maximum number of connections."""


def session_id_of(message: dict[str, Any]) -> str | None:
    """The ``sessionId`` a message is about: its params' (requests, notifications) or its
    result's (the answer to ``session/new``), else None."""
    for key in ("params", "result"):
        part = message.get(key)
        if isinstance(part, dict):
            sid = part.get("sessionId")
            if isinstance(sid, str):
                return sid
    return None


def id_key(message_id: Any) -> str | None:
    """A JSON-RPC id as a routing key (``1`` and ``"1"`` are different ids on the wire, but a
    routing table only needs to tell in-flight requests apart), None for a missing id."""
    if message_id is None:
        return None
    return f"{type(message_id).__name__}:{message_id}"


def encode_sse(message: bytes) -> bytes:
    """One JSON text (no newline inside: orjson and our encoder never emit one) as an SSE event."""
    return b"data: " + message.rstrip(b"\n") + b"\n\n"


SSE_KEEPALIVE: Final = b": keepalive\n\n"
"""An SSE comment: keeps idle-timeout intermediaries from closing a quiet stream."""


class SseDecoder:
    """Incremental SSE parser (the ``data`` field only: ``event``, ``id`` and ``retry`` are not
    used by ACP v1). ``feed(chunk)`` returns the payloads completed by ``chunk``, each as bytes;
    comments are skipped; several ``data`` lines of one event are joined with ``\\n``.

    ``max_event_bytes`` bounds the buffered event: a longer one is reported as ``None`` in
    its place (and its bytes dropped) instead of growing memory without limit.
    """

    __slots__ = ("_buffer", "_data", "_dropping", "_size", "max_event_bytes")

    def __init__(self, max_event_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_event_bytes = max_event_bytes
        self._buffer = b""
        self._data: list[bytes] = []
        self._size = 0
        self._dropping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        buffer = self._buffer + chunk if self._buffer else chunk
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._dropping:
                    out.append(None)
                elif self._data:
                    out.append(b"\n".join(self._data))
                self._data = []
                self._size = 0
                self._dropping = False
            elif line.startswith(b":"):
                continue
            else:
                name, _, value = line.partition(b":")
                if name != b"data":
                    continue
                if value.startswith(b" "):
                    value = value[1:]
                self._size += len(value) + 1
                if self._size > self.max_event_bytes:
                    self._dropping = True
                    self._data = []
                elif not self._dropping:
                    self._data.append(value)
        rest = buffer[start:]
        if len(rest) > self.max_event_bytes:
            self._dropping = True  # one endless line: drop it as it comes
            self._data = []
            rest = b""
        self._buffer = rest
        return out

    def end(self) -> list[bytes | None]:
        """The stream ended: a last event without its blank line still counts."""
        out = self.feed(b"\n\n") if self._buffer or self._data or self._dropping else []
        self._buffer = b""
        return out


HTTP_STATUS_KEY: Final = "httpStatus"
"""In the ``data`` of the error a client transport answers a refused POST with: the HTTP status."""


def refused_status(error: BaseException | None) -> int | None:
    """The HTTP status with which the server refused the connection behind ``error`` (a failed
    start: the WebSocket handshake's status, or the one a POST was answered with), following the
    causes; None when no HTTP status is behind it."""
    seen = 0
    while error is not None and seen < 16:
        status = getattr(error, "http_status", None)
        if isinstance(status, int):
            return status
        data = getattr(error, "data", None)
        if isinstance(data, dict) and isinstance(data.get(HTTP_STATUS_KEY), int):
            return int(data[HTTP_STATUS_KEY])
        error = error.__cause__
        seen += 1
    return None
