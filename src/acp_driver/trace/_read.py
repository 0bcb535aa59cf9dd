"""Reading a trace file back: bounded, checked, redacted (docs/trace.md, "Reading a trace").

- The first line must be the header of a schema version this reader knows: anything else is
  refused at once, after reading that line only.
- The read is bounded whatever the file (``/dev/zero``, ``/dev/urandom``): a line is read up to
  ``MAX_LINE_BYTES`` (a longer one is not an event), the file up to ``max_bytes`` (a bigger one
  is refused).
- After the header, a line that is not a JSON object with an ``id``, a ``t`` and a ``kind`` is
  counted and skipped (a last line cut mid-way by a crash is one).
- Each event is redacted again as it is read (``_redact``, the recorder's rule): what the summary
  and the page show holds no secret, whoever wrote the file.

The events are then analysed by ``_model``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import orjson

from ._model import Trace, analyse
from ._recorder import SCHEMA_VERSION
from ._redact import Redactor, needs_scan

MAX_READ_BYTES = 1024 * 1024 * 1024
"""The most ``read_trace`` reads by default: a bigger file is refused (a trace stops at
``DEFAULT_MAX_BYTES``, 256 MiB, unless recorded with a bigger cap)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is not an event (the recorder keeps a message's skeleton over 64 KiB)."""


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
    redactor = Redactor()
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
        ):
            if not events:
                raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
            bad += 1
            continue
        if not events:
            _check_header(event)
        events.append(redactor.event(event) if redactor.pending or needs_scan(line) else event)
    if not events:
        raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
    return analyse(events, bad)


def _check_header(event: dict[str, Any]) -> None:
    """The first event must be the header of a schema version this reader knows; its ``agent``
    (the command line or URL) is kept as a list of words."""
    if event["kind"] != "trace":
        raise TraceFormatError("not an acp-driver trace: the first line is not a trace header")
    version = event.get("v")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise TraceFormatError(
            f"trace schema version {orjson.dumps(version, default=str).decode()[:20]} is not "
            f"one this reader knows ({SCHEMA_VERSION}): a newer acp-driver reads it"
        )
    agent = event.get("agent")
    if agent is not None and not isinstance(agent, list):
        event["agent"] = [agent if isinstance(agent, str) else orjson.dumps(agent, default=str).decode()]
