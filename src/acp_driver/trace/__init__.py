"""Seeing a cancellation: a wire trace, its summary and timeline page, OpenTelemetry spans.

``launch(trace=...)``, ``connect(trace=...)``, ``serve_command(trace=...)`` and the CLI's
``--trace FILE`` record every message and the lifecycle the wire does not show (docs/trace.md);
``acp-driver trace FILE`` summarizes a recording, ``--html OUT`` draws it, ``--chrome OUT``
exports it in the Trace Event Format (Perfetto, ``chrome://tracing``). ``OtelSink`` (the
``otel`` extra) turns the same observations into OpenTelemetry spans. Nothing here imports
asyncio; names are exported lazily, so the OpenTelemetry bridge loads only when used.
"""

import typing

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from .._lazy import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "._sink": (
            "Bound",
            "Tee",
            "TraceSink",
            "TraceTarget",
            "bind",
            "follow_connection",
            "open_trace",
            "wire_tracer",
        ),
        "._recorder": ("DEFAULT_MAX_BYTES", "DEFAULT_MAX_TRACED_BYTES", "SCHEMA_VERSION", "TraceRecorder"),
        "._redact": ("REDACTED", "redact_argv", "redact_message"),
        "._model": ("Trace",),
        "._read": ("TraceFormatError", "read_trace"),
        "._summary": ("summarize",),
        "._html": ("render_html",),
        "._chrome": ("chrome_trace",),
        "._otel": ("OtelSink",),
    },
)

if typing.TYPE_CHECKING:
    from ._chrome import chrome_trace as chrome_trace
    from ._html import render_html as render_html
    from ._model import Trace as Trace
    from ._otel import OtelSink as OtelSink
    from ._read import TraceFormatError as TraceFormatError
    from ._read import read_trace as read_trace
    from ._recorder import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
    from ._recorder import DEFAULT_MAX_TRACED_BYTES as DEFAULT_MAX_TRACED_BYTES
    from ._recorder import SCHEMA_VERSION as SCHEMA_VERSION
    from ._recorder import TraceRecorder as TraceRecorder
    from ._redact import REDACTED as REDACTED
    from ._redact import redact_argv as redact_argv
    from ._redact import redact_message as redact_message
    from ._sink import Bound as Bound
    from ._sink import Tee as Tee
    from ._sink import TraceSink as TraceSink
    from ._sink import TraceTarget as TraceTarget
    from ._sink import bind as bind
    from ._sink import follow_connection as follow_connection
    from ._sink import open_trace as open_trace
    from ._sink import wire_tracer as wire_tracer
    from ._summary import summarize as summarize
