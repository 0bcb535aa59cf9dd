"""``acp-driver agent``: the bundled reference agent on stdio."""

from __future__ import annotations

import argparse
import logging
import signal
from collections.abc import Sequence


def agent_main(argv: Sequence[str]) -> int:
    from ..reference_agent import BEHAVIORS, __doc__

    parser = argparse.ArgumentParser(
        prog="acp-driver agent",
        description="Run the bundled reference ACP agent on stdin/stdout.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--behavior", choices=BEHAVIORS, default="polite", help="misbehave like real agents do"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr (-vv for debug)")
    opts = parser.parse_args(list(argv))
    if opts.verbose:
        logging.basicConfig(
            level=logging.DEBUG if opts.verbose > 1 else logging.INFO,
            format="agent %(levelname)s %(name)s: %(message)s",
        )
    from ..reference_agent import main

    # Ctrl-C (only when run by hand: hosts start agents in a session of their own) ends the agent
    # the Unix way, killed by SIGINT: a KeyboardInterrupt would surface inside one of the event
    # loop's tasks and print its traceback.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    main(opts.behavior)
    return 0
