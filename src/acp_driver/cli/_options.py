"""What every command's parser shares: option types, ``-v``/``-q`` and the logging they set, and
how command-line text becomes text that can be sent."""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import textwrap

from ._text import ShownFormatter


def seconds(value: str) -> float:
    """An argparse ``type``: a finite number of seconds (``nan`` and ``inf`` are refused)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {value!r}")
    return number


def as_text(value: str) -> str:
    """Command-line (or stdin) text as Unicode that can be sent: bytes that are not UTF-8 (which
    Python keeps as lone surrogates) become U+FFFD, the way Python's own tools decode them."""
    return os.fsencode(value).decode("utf-8", "replace")


def writable_trace(parser: argparse.ArgumentParser, path: str) -> None:
    """``--trace FILE``: refuse at once (exit 2) a file that cannot be written."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # a trace is private
    except OSError as exc:
        parser.error(f"--trace {path!r}: cannot write it ({exc.strerror or exc})")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="only the agent's output and errors")


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING
    if quiet:
        level = logging.ERROR
    elif verbose == 1:
        level = logging.INFO
    elif verbose > 1:
        level = logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ShownFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if verbose == 0:
        # The console already shows each ladder step; keep the log for -v.
        logging.getLogger("acp_driver.driver").setLevel(logging.ERROR)


_LITERAL = re.compile(r"``(.+?)``", re.S)


def plain_help(text: str) -> str:
    """Docstring text for a terminal: reST literals (````--protocol 2````) lose their markup."""
    return _LITERAL.sub(r"\1", text)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` for a terminal: a paragraph of prose (no line of it indented) is filled to the
    terminal's width (at most 100 columns); an indented block (examples, tables) is kept as
    written; reST literals lose their markup (the agent's epilog is a docstring)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        width = min(width, 100)
        blocks = []
        for block in re.split(r"\n\s*\n", plain_help(text).strip("\n")):
            lines = block.split("\n")
            if any(line[:1].isspace() for line in lines):
                blocks.append("\n".join(indent + line for line in lines))
            else:
                blocks.append(
                    textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(blocks) + "\n"

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_help(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain_help(super()._expand_help(action))
