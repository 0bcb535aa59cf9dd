"""``acp-driver trace FILE [--html OUT] [--chrome OUT.json]``: read a ``--trace`` recording back.

Prints the summary (``trace._summary``); ``--html OUT`` also writes the timeline page, one
self-contained file (``trace._html``); ``--chrome OUT.json`` the Trace Event Format that
Perfetto and ``chrome://tracing`` open (``trace._chrome``). Reads only the file: no agent, no event loop. Exit 0, 1
if the file cannot be read or is not a trace, 2 for usage.
"""

from __future__ import annotations

import argparse
import sys

from ._options import HelpFormatter

TRACE_EPILOG = """\
examples:
  acp-driver run --trace turn.ndjson "/stream 50 100"     record a turn (Ctrl-C cancels it)
  acp-driver trace turn.ndjson                            the summary
  acp-driver trace turn.ndjson --html turn.html           and the timeline page
  acp-driver trace turn.ndjson --chrome turn.json         for Perfetto (ui.perfetto.dev) or chrome://tracing

The file is NDJSON, one event a line: first a header (kind "trace", v: the schema version, role,
the agent's command), then per line an id, t (seconds since the start) and a kind: wire (a
message, dir in/out), spawn, signal, timeout, cancel, rung, resolved, exit, connection_start,
connection_end, verdict, truncated. Secrets are redacted before they are written.
"""


def build_trace_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-driver trace",
        description="Summarize a trace recorded with --trace (per turn: duration, updates, permissions, "
        "the cancel and the rung that resolved it, late updates), or draw it as an HTML timeline.",
        epilog=TRACE_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="a trace written by --trace (NDJSON)")
    parser.add_argument("--html", metavar="OUT", default=None, help="write the timeline page to OUT")
    parser.add_argument(
        "--chrome",
        metavar="OUT",
        default=None,
        help="write the trace in the Trace Event Format (JSON for Perfetto or chrome://tracing) to OUT",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary (with --html or --chrome)")
    return parser


def trace_main(argv: list[str]) -> int:
    opts = build_trace_parser().parse_args(argv)
    from ..trace import TraceFormatError, read_trace, summarize

    try:
        trace = read_trace(opts.file)
    except OSError as exc:
        sys.stderr.write(f"acp-driver trace: cannot read {opts.file!r}: {exc.strerror or exc}\n")
        return 1
    except TraceFormatError as exc:
        sys.stderr.write(f"acp-driver trace: {opts.file!r}: {exc}\n")
        return 1
    if opts.html is not None:
        from ..trace import render_html

        try:
            with open(opts.html, "w", encoding="utf-8") as out:
                out.write(render_html(trace))
        except OSError as exc:
            sys.stderr.write(f"acp-driver trace: cannot write {opts.html!r}: {exc.strerror or exc}\n")
            return 1
    if opts.chrome is not None:
        import orjson

        from ..trace import chrome_trace

        try:
            with open(opts.chrome, "wb") as out_json:
                out_json.write(orjson.dumps(chrome_trace(trace)))
        except OSError as exc:
            sys.stderr.write(f"acp-driver trace: cannot write {opts.chrome!r}: {exc.strerror or exc}\n")
            return 1
    if not opts.quiet:
        sys.stdout.write(summarize(trace))
    if opts.html is not None:
        sys.stderr.write(f"acp-driver trace: timeline written to {opts.html}\n")
    if opts.chrome is not None:
        sys.stderr.write(f"acp-driver trace: Trace Event Format written to {opts.chrome}\n")
    return 0
