"""Reading a trace file back: bounded, checked, redacted (docs/trace.md, "Reading a trace").

- The first line must be the header of a schema version this reader knows: anything else is
  refused at once, after reading that line only.
- The read is bounded whatever the file (``/dev/zero``, ``/dev/urandom``): a line is read up to
  ``MAX_LINE_BYTES`` (a longer one is not an event), the file up to ``max_bytes`` (a bigger one
  is refused).
- After the header, a line that is not a JSON object with an ``id``, a ``t`` and a ``kind``, or
  is nested deeper than ``MAX_EVENT_DEPTH``, is counted and skipped (a last line cut mid-way by a
  crash is one).
- Each event is redacted as it is read (``_redact``, the recorder's rule), unless the header says
  the file was written redacted by these rules (``redaction``): what the summary and the page
  show holds no secret, whoever wrote the file (an older version, another tool, by hand).

The events are then analysed by ``_model``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import orjson

from ._model import Trace, analyse
from ._recorder import SCHEMA_VERSION
from ._redact import REDACTION_VERSION, Redactor, needs_scan

MAX_READ_BYTES = 1024 * 1024 * 1024
"""The most ``read_trace`` reads by default: a bigger file is refused (a trace stops at
``DEFAULT_MAX_BYTES``, 256 MiB, unless recorded with a bigger cap)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is not an event (the recorder keeps a message's skeleton over 64 KiB)."""
MAX_EVENT_DEPTH = 128
"""An event nested deeper is not one (no message of the protocol comes near; the page and the
summary could not show it)."""


class TraceFormatError(ValueError):
    """The file is not a trace this reader can read: no header line, a schema version it does not
    know, or more than it reads."""


def read_trace(path: str | os.PathLike[str], *, max_bytes: int = MAX_READ_BYTES) -> Trace:
    """Read and analyse a trace file (raises ``OSError``, or ``TraceFormatError`` for a file
    that is not a trace, of a version this reader does not know, or over ``max_bytes``)."""
    with open(path, "rb") as f:
        return parse_trace(_bounded_lines(f, max_bytes))


def _bounded_lines(f: BinaryIO, max_bytes: int) -> Iterator[bytes]:
    """The file's lines, each at most ``MAX_LINE_BYTES`` (a longer one comes as its first
    ``MAX_LINE_BYTES``, without its newline), ``max_bytes`` in all."""
    left = max_bytes
    while True:
        line = f.readline(min(MAX_LINE_BYTES, left + 1))
        if not line:
            return
        left -= len(line)
        if left < 0:
            raise TraceFormatError(f"over {max_bytes} bytes, more than this reader reads")
        if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
            yield line  # not an event (no newline): the rest of the line is read and dropped
            while len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
                line = f.readline(min(MAX_LINE_BYTES, left + 1))
                left -= len(line)
                if left < 0:
                    raise TraceFormatError(f"over {max_bytes} bytes, more than this reader reads")
            continue
        yield line


def parse_trace(lines: Iterable[bytes]) -> Trace:
    events: list[dict[str, Any]] = []
    bad = 0
    redactor: Redactor | None = Redactor()
    for line in lines:
        if not line.strip():
            continue
        try:
            event = orjson.loads(line) if len(line) < MAX_LINE_BYTES or line.endswith(b"\n") else None
        except orjson.JSONDecodeError:
            event = None
        if (
            not isinstance(event, dict)
            or not isinstance(event.get("id"), int)
            or not isinstance(event.get("t"), (int, float))
            or not isinstance(event.get("kind"), str)
            or (line.count(b"{") + line.count(b"[") > MAX_EVENT_DEPTH and _deeper(event, MAX_EVENT_DEPTH))
        ):
            if not events:
                raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
            bad += 1
            continue
        if not events:
            _check_header(event)
            if _redacted_by_these_rules(event):
                redactor = None  # written by a recorder that applied them: nothing to do again
        if redactor is not None and (redactor.pending or needs_scan(line)):
            event = redactor.event(event)
        events.append(event)
    if not events:
        raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
    return analyse(events, bad)


def _deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (without recursing)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _redacted_by_these_rules(header: dict[str, Any]) -> bool:
    """Whether the file says it was redacted by these rules (or later ones) as it was written:
    its header's ``redaction``."""
    version = header.get("redaction")
    return type(version) is int and version >= REDACTION_VERSION


def _check_header(event: dict[str, Any]) -> None:
    """The first event must be the header of a schema version this reader knows; its ``agent``
    (the command line or URL) is kept as a list of words."""
    if event["kind"] != "trace":
        raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
    version = event.get("v")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise TraceFormatError(
            f"trace schema version {orjson.dumps(version, default=str).decode()[:20]} is not "
            f"one this reader knows ({SCHEMA_VERSION})"
        )
    agent = event.get("agent")
    if agent is not None and not isinstance(agent, list):
        event["agent"] = [agent if isinstance(agent, str) else orjson.dumps(agent, default=str).decode()]
