"""``acp-driver proxy -- AGENT ARGV...``: what an editor launches in place of an agent.

Plain ACP on stdin/stdout to the editor, the real agent supervised behind serve's relay, every
message forwarded unchanged, and the proxy's guarantees added (docs/proxy.md). One stderr line
per event an editor's log should show (``acp-driver proxy: ...``), and a summary line at exit.
Exit codes: 0 the editor ended and the agent was reaped; 1 the agent ended first (or was killed
by the ladder) and may not be restarted (``--max-respawns``); 2 usage; 127 the agent could not be
started.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

PROXY_EPILOG = """\
examples:
  acp-driver proxy -- npx @zed-industries/claude-code-acp
  acp-driver proxy --cancel-budget 3 --trace /tmp/agent.trace -- my-agent --stdio

An editor runs this command where it would run the agent (see docs/proxy.md for Zed's
agent_servers entry). Everything is forwarded unchanged; the proxy adds: one answer to every
request both ways, a cancel that lands within --cancel-budget, permissions never left open,
late output of a cancelled turn kept out of the next, and no process of the agent left behind.
"""


def build_proxy_parser() -> argparse.ArgumentParser:
    from ..proxy import GuardSettings, ProxySettings
    from ._options import add_common, seconds

    defaults = GuardSettings()
    parser = argparse.ArgumentParser(
        prog="acp-driver proxy",
        description="Run an ACP agent behind acp-driver's guarantees: an editor launches this in "
        "place of the agent; plain ACP on stdin/stdout, everything forwarded.",
        epilog=PROXY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cancel-budget",
        metavar="SEC",
        type=seconds,
        default=defaults.cancel_budget,
        help="seconds from the editor's session/cancel to SIGKILL of the agent (and the editor's "
        f"'cancelled'): $/cancel_request at half, SIGTERM at 3/4 (default: {defaults.cancel_budget:g})",
    )
    parser.add_argument(
        "--permission-grace",
        metavar="SEC",
        type=seconds,
        default=defaults.permission_grace,
        help="after the editor's session/cancel, a permission request still open this long is "
        f"answered cancelled and withdrawn from the editor (default: {defaults.permission_grace:g})",
    )
    parser.add_argument(
        "--answer-grace",
        metavar="SEC",
        type=seconds,
        default=defaults.answer_grace,
        help="after a $/cancel_request, a request the other side has not answered this long is "
        f"answered -32800 by the proxy (default: {defaults.answer_grace:g})",
    )
    parser.add_argument(
        "--silence-timeout",
        metavar="SEC",
        type=seconds,
        default=None,
        help="cancel a turn from which nothing came for SEC (a tool that hangs; default: never)",
    )
    parser.add_argument(
        "--max-respawns",
        metavar="N",
        type=int,
        default=ProxySettings().max_respawns,
        help="restart an agent that ended while the editor is connected at most N times, replaying "
        "initialize and resuming its sessions where it can (0: never; the proxy then exits 1; "
        f"default: {ProxySettings().max_respawns})",
    )
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="record both sides and the ladder to FILE (NDJSON; read it with: acp-driver trace FILE)",
    )
    parser.add_argument(
        "agent_command",
        nargs=argparse.REMAINDER,
        help="-- AGENT ARGV... (none: a component of a conductor's chain, whose successor is reached "
        "through _proxy/successor)",
    )
    add_common(parser)
    return parser


def proxy_cli(argv: list[str]) -> int:
    """``acp-driver proxy ...``."""
    parser = build_proxy_parser()
    opts = parser.parse_args(argv)
    command = list(opts.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    for name in ("cancel_budget", "permission_grace", "answer_grace"):
        if getattr(opts, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be at least 0 seconds")
    if opts.max_respawns < 0:
        parser.error("--max-respawns must be 0 or more")
    if opts.silence_timeout is not None and opts.silence_timeout <= 0:
        parser.error("--silence-timeout must be a positive number of seconds")
    from ._options import writable_trace

    if opts.trace is not None:
        writable_trace(parser, opts.trace)
    _setup_logging(opts.verbose, opts.quiet)
    return asyncio.run(_proxy(command, opts))


def _setup_logging(verbose: int, quiet: bool) -> None:
    from ._options import setup_logging

    setup_logging(verbose, quiet)
    own = logging.getLogger("acp_driver.proxy")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("acp-driver proxy: %(message)s"))
    own.addHandler(handler)
    own.propagate = False
    own.setLevel(logging.DEBUG if verbose > 1 else logging.WARNING if quiet else logging.INFO)
    if verbose == 0:
        # The proxy's own lines say what the relay's would (the agent's end, the ladder).
        logging.getLogger("acp_driver.remote").setLevel(logging.ERROR)


async def _proxy(command: list[str], opts: argparse.Namespace) -> int:
    from ..proxy import GuardSettings, Proxy, ProxySettings, run_proxy
    from ..trace import open_trace
    from ._signals import Routed

    settings = ProxySettings(
        GuardSettings(
            cancel_budget=opts.cancel_budget,
            permission_grace=opts.permission_grace,
            answer_grace=opts.answer_grace,
            silence_timeout=opts.silence_timeout,
        ),
        max_respawns=opts.max_respawns,
    )
    trace, owned = open_trace(opts.trace, role="proxy", command=command)
    loop = asyncio.get_running_loop()
    started: asyncio.Future[Proxy] = loop.create_future()

    def on_signal(signum: int) -> None:
        if started.done():
            started.result().stop(f"{signal.Signals(signum).name} received")

    routed = Routed(loop, on_signal, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    try:
        return await run_proxy(command, settings, trace=trace, started=started)
    finally:
        routed.ignore()
        if owned and trace is not None:
            trace.close()
