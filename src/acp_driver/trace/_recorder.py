"""The trace file: NDJSON, one event a line, written as it happens (docs/trace.md has the schema).

- The first line is the header (``kind: "trace"``, ``v``: the schema version, the role, the
  wall-clock start, the monotonic origin). Every line has ``id`` (0, 1, 2... in file order: a
  stable reference to one moment) and ``t`` (seconds since the header, monotonic).
- Append-only and flushed per event: each line is one ``write`` to a file opened ``O_APPEND``
  (no buffer in this process), so a crash -- SIGKILL included -- keeps every line written.
- Bounded: a message over ``max_message_bytes`` keeps its skeleton (id, method, session,
  update kind, stop reason) and says how big it was; a line that is not JSON keeps its first
  ``max_message_bytes``; the file stops at ``max_bytes`` with a ``truncated`` line saying so.
- Redacted before it is written (``_redact``): credentials, environments, header values.
- A trace never breaks what it watches: a write that fails (disk full) ends the recording
  with a warning; a message that is not JSON is recorded as text.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from .. import __version__
from ._redact import Redactor, needs_scan, redact_fields, redact_text

logger = logging.getLogger("acp_driver.trace")

SCHEMA_VERSION = 1
"""The trace file's schema version (the header's ``v``); docs/trace.md describes each."""

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_TRACED_BYTES = 64 * 1024
_NOTE_ROOM = 512
"""Bytes kept free below ``max_bytes`` for the ``truncated`` line."""
_SECRET_ROOM = 4096
"""Bytes past the bound a line that is not JSON is redacted with, before it is cut: a secret the
bound cuts through is still recognised (and replaced) whole."""


class TraceRecorder:
    """Writes a trace file (see the module docstring); a ``TraceSink``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_message_bytes: int = DEFAULT_MAX_TRACED_BYTES,
        clock: Callable[[], float] = time.monotonic,
        **header: Any,
    ) -> None:
        if max_bytes < 2 * _NOTE_ROOM:
            raise ValueError(f"max_bytes must be at least {2 * _NOTE_ROOM}")
        self.path = os.fspath(path)
        self.max_bytes = max_bytes
        self.max_message_bytes = max_message_bytes
        self._clock = clock
        self.origin = clock()
        """The monotonic time of ``t = 0`` (the header's ``mono``)."""
        self._next_id = 0
        self._written = 0
        self.cut = False
        """The size cap was reached: later events are dropped."""
        self.dropped = 0
        self.failed = False
        self._redactor = Redactor()
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        self.event(
            "trace",
            v=SCHEMA_VERSION,
            tool=f"acp-driver {__version__}",
            started=datetime.now(UTC).isoformat(timespec="milliseconds"),
            mono=self.origin,
            pid=os.getpid(),
            **header,
        )

    # ------------------------------------------------------------------ TraceSink

    def wire(self, direction: str, data: bytes, **fields: Any) -> None:
        body = data.rstrip(b"\r\n")
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            head = body[: self.max_message_bytes + _SECRET_ROOM]  # a secret at the bound is seen whole
            text = head.decode("utf-8", "replace")
            if needs_scan(head):
                text = redact_text(text)
            raw = _cut(text, self.max_message_bytes)
            self._write_event("wire", {"dir": direction, **fields, "raw": raw, "size": len(body)}, None)
            return
        redactor = self._redactor
        if redactor.pending or needs_scan(body):
            message = redactor.message(direction, message)
            body = orjson.dumps(message)
        if len(body) > self.max_message_bytes:
            self._write_event(
                "wire", {"dir": direction, **fields, "msg": _skeleton(message), "cut": len(body)}, None
            )
            return
        if b"\n" in body or b"\r" in body:
            body = orjson.dumps(message)  # whitespace between tokens: one line per event
        self._write_event("wire", {"dir": direction, **fields}, body)

    def event(self, kind: str, **fields: Any) -> int | None:
        return self._write_event(kind, redact_fields(fields), None)

    def meta(self, session_id: str) -> dict[str, str] | None:
        return None

    def close(self) -> None:
        """Close the file. An event recorded later (a process exit after the connection
        closed) reopens it to append: nothing is lost, no descriptor is held in between."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def now(self) -> float:
        """Seconds since the header, as the next event's ``t``."""
        return self._clock() - self.origin

    def at(self, monotonic: float) -> float:
        """A ``time.monotonic()`` reading as a trace time (when the recorder runs on that clock)."""
        return round(monotonic - self.origin, 6)

    def __enter__(self) -> TraceRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def _write_event(self, kind: str, fields: dict[str, Any], body: bytes | None) -> int | None:
        if self.failed:
            return None
        if self.cut:
            self.dropped += 1
            return None
        eid = self._next_id
        t = round(self._clock() - self.origin, 6)
        if body is None:
            head = {"id": eid, "t": t, "kind": kind, **fields}
            line = orjson.dumps(head, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        else:  # a message: its text spliced in as it is (the hot path when tracing)
            extra = orjson.dumps(fields, default=str)[1:-1] if fields else b""
            line = b'{"id":%d,"t":%r,"kind":"wire",%s,"msg":%s}\n' % (eid, t, extra, body)
        if self._written + len(line) > self.max_bytes - _NOTE_ROOM:
            self.cut = True
            self.dropped += 1
            note = {
                "id": eid,
                "t": t,
                "kind": "truncated",
                "max_bytes": self.max_bytes,
                "note": "the trace reached its size cap: later events are not recorded",
            }
            self._append(orjson.dumps(note) + b"\n")
            return None
        self._next_id = eid + 1
        self._append(line)
        return eid

    def _append(self, line: bytes) -> None:
        fd = self._fd
        reopened = False
        try:
            if fd is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
                reopened = True
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            self._written += len(line)
        except OSError as exc:
            self.failed = True
            logger.warning("trace %s: writing failed (%s); the recording stops here", self.path, exc)
        finally:
            if reopened and fd is not None:
                os.close(fd)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (never mid-character)."""
    data = text.encode("utf-8", "surrogatepass")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def _skeleton(message: Any) -> Any:
    """What the summary needs of a message too big to record whole."""
    if not isinstance(message, dict):
        return {"batch": len(message)} if isinstance(message, list) else None
    out = {k: message[k] for k in ("jsonrpc", "id", "method") if k in message}
    params = message.get("params")
    if isinstance(params, dict):
        kept: dict[str, Any] = {k: params[k] for k in ("sessionId", "requestId") if k in params}
        update = params.get("update")
        if isinstance(update, dict) and "sessionUpdate" in update:
            kept["update"] = {"sessionUpdate": update["sessionUpdate"]}
        out["params"] = kept
    result = message.get("result")
    if isinstance(result, dict) and "stopReason" in result:
        out["result"] = {"stopReason": result["stopReason"]}
    elif isinstance(result, dict) and isinstance(result.get("outcome"), dict):
        out["result"] = {"outcome": result["outcome"]}
    if isinstance(message.get("error"), dict):
        error = message["error"]
        out["error"] = {"code": error.get("code"), "message": str(error.get("message"))[:200]}
    return out
