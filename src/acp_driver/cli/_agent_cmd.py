"""``acp-driver agent``: the bundled reference agent on stdio."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence

from ._signals import handled


def _options(argv: list[str]) -> tuple[str, int, tuple[int, ...]]:
    """``(behavior, verbosity, versions)`` from the command line."""
    import argparse

    from ..reference_agent import BEHAVIORS, __doc__
    from ._options import HelpFormatter

    parser = argparse.ArgumentParser(
        prog="acp-driver agent",
        description="Run the bundled reference ACP agent on stdin/stdout.",
        epilog=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--behavior",
        choices=BEHAVIORS,
        default="polite",
        metavar="NAME",
        help="misbehave like real agents do (the names are listed below)",
    )
    parser.add_argument(
        "--protocol",
        choices=("auto", "1", "2"),
        default="auto",
        help="the ACP versions it speaks: both (auto, the default), or only 1 or only 2",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr (-vv for debug)")
    opts = parser.parse_args(argv)
    versions = (1, 2) if opts.protocol == "auto" else (int(opts.protocol),)
    return opts.behavior, opts.verbose, versions


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def agent_main(argv: Sequence[str]) -> int:
    # Hosts start it without options: then no parser, which is a tenth of the agent's start-up
    # (argparse's help formatter imports shutil and, through it, the compression modules).
    behavior, verbose, versions = _options(list(argv)) if argv else ("polite", 0, (1, 2))
    for fd, name, role in ((0, "stdin", "reads its messages"), (1, "stdout", "writes its messages")):
        if _closed(fd):  # ``<&-`` / ``>&-``: an ACP agent has no other channel
            if not _closed(2):
                os.write(
                    2, f"acp-driver agent: error: {name} is closed: an ACP agent {role} on {name}\n".encode()
                )
            return 1
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO,
            format="agent %(levelname)s %(name)s: %(message)s",
        )
    from ..reference_agent import main

    # Ctrl-C (only when run by hand: hosts start agents in a session of their own) ends the agent
    # the Unix way, killed by SIGINT: a KeyboardInterrupt would surface inside one of the event
    # loop's tasks and print its traceback. Inherited ignored, it stays ignored (``_signals``).
    for sig in handled((signal.SIGINT,)):
        signal.signal(sig, signal.SIG_DFL)
    main(behavior, versions)
    return 0
