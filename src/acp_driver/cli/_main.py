"""``acp-driver`` subcommands other than ``agent``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import __version__


def cli_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="acp-driver", description="Drive ACP agents; cancellation always lands."
    )
    parser.add_argument("--version", action="version", version=f"acp-driver {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("agent", help="run the bundled reference agent on stdio")
    opts = parser.parse_args(list(argv))
    if opts.command is None:
        parser.print_help()
        return 2
    return 0
