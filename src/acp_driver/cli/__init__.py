"""The ``acp-driver`` command line. Subcommands import what they need, when they need it."""

from __future__ import annotations

import collections.abc
import sys

__all__ = ["main"]


def main(argv: collections.abc.Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "agent":
            # The fast path: the reference agent must start quickly, so no other CLI code is loaded.
            from ._agent_cmd import agent_main

            return agent_main(args[1:])
        if args and args[0] == "serve":
            from ._serve import serve_cli  # its own parser: nothing of it loads for other commands

            return serve_cli(args[1:])
        if args and args[0] == "proxy":
            from ._proxy import proxy_cli  # stdio relay: no network extra, no driver

            return proxy_cli(args[1:])
        if args and args[0] == "trace":
            from ._trace_cmd import trace_main  # reads a trace file: no driver, no asyncio

            return trace_main(args[1:])
        from ._main import cli_main

        return cli_main(args)
    except KeyboardInterrupt:
        # Ctrl-C outside the commands' own handling (reading a prompt, starting up): no traceback.
        return 130
