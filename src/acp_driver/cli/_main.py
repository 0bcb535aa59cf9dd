"""``acp-driver`` subcommands other than ``agent`` (which has its own fast path)."""

from __future__ import annotations

import argparse
import io
import math
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from .. import __version__
from ._codes import EXIT_ERROR, EXIT_USAGE
from ._options import HelpFormatter, add_common, as_text, seconds, setup_logging, writable_trace
from ._remote_options import (
    AGENT_TOKEN_ENV,
    RemoteExtraMissing,
    agent_url,
    check_url,
    parse_cacert,
    parse_headers,
    require_remote_extra,
)

MAIN_EPILOG = """\
examples:
  acp-driver run "hello"                          one turn with the bundled reference agent
  acp-driver run "/stream 20 100"                 watch chunks stream; Ctrl-C cancels the turn
  acp-driver run --agent "npx @agentclientprotocol/claude-agent-acp" "explain main.py"
  acp-driver run --json --turn-timeout 5 "/sleep 60000"   JSON events; cancelled after 5 s
  acp-driver chat                                 a multi-turn conversation
  acp-driver check -- my-agent --acp              audit an agent's cancellation
  acp-driver agent --behavior ignore-cancel       a misbehaving agent to test hosts against

exit codes: 0 the turn ended on its own; 124 --turn-timeout cancelled it; 130 Ctrl-C cancelled it;
  128+N signal N (SIGTERM 143, SIGHUP 129) ended the command, like Ctrl-C;
  1 the agent failed to start or a protocol error; 2 usage; 3 the agent exited mid-turn;
  4 the agent answered with an error; 5 check: a MUST rule failed;
  6 check: inconclusive (a MUST rule was skipped, nothing failed);
  7 a remote agent's connection was lost mid-turn.

remote agents: --agent ws://HOST:PORT/acp (WebSocket) or http(s)://HOST:PORT/acp (Streamable HTTP);
  --token-file FILE (or $ACP_DRIVER_AGENT_TOKEN) sends 'Authorization: Bearer TOKEN', the token
  kept off the command line; --header 'NAME: VALUE' (repeatable) is sent on every request;
  --cacert FILE trusts a private CA (or a self-signed server) for wss:// and https://.
"""


CHAT_EPILOG = """\
/help lists the chat's own commands (answered here, never sent to the agent) and the agent's
advertised commands; a line starting with // is sent with one / less (//help sends /help to the
agent); any other line is sent as a prompt.
"""


def _agent_argv(command: str | None, parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The agent's argv from ``--agent`` (None: the bundled reference agent); a command that is
    empty or that a shell could not split is a usage error (exit 2)."""
    if command is None:
        from ..driver import reference_agent_argv

        return reference_agent_argv()
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # an unclosed quote, a trailing backslash
        _usage(parser, f"--agent {command!r}: {exc}")
    if not argv:
        _usage(parser, "--agent is empty (leave it out to run the bundled reference agent)")
    return argv


def _usage(parser: argparse.ArgumentParser | None, message: str) -> NoReturn:
    if parser is not None:
        parser.error(message)
    sys.stderr.write(f"acp-driver: error: {message}\n")
    raise SystemExit(EXIT_USAGE)


def _utf8_path(parser: argparse.ArgumentParser, option: str, path: str) -> str:
    """A directory the session is opened in: ACP sends it as JSON text, so it must be UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        what = f"{option} {as_text(path)!r}" if option else f"the current directory {as_text(path)!r}"
        hint = "" if option else " (pass --cwd)"
        parser.error(f"{what} is not valid UTF-8; ACP can only send UTF-8 paths{hint}")
    return path


def _add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="CMD",
        help="the agent's command line, split like a shell would, or the URL of a remote agent "
        "(ws://, wss://, http://, https://) (default: the bundled reference agent)",
    )
    _add_header(parser)
    parser.add_argument(
        "--cwd", metavar="DIR", default=None, help="the session's working directory (default: .)"
    )
    parser.add_argument(
        "--session",
        metavar="ID",
        default=None,
        help="continue this session (its id is printed when a session starts) instead of opening a "
        "new one: session/resume, or session/load, whichever the agent advertises",
    )
    parser.add_argument(
        "--cancel-budget",
        "--cancel-grace",  # its former name (a request's own grace is another thing: cancel_grace=)
        dest="cancel_budget",
        metavar="SEC",
        type=seconds,
        default=None,
        help="the cancel ladder's whole budget, from cancel to SIGKILL (default: 6); "
        "--cancel-grace is the same option's former name",
    )
    decide = parser.add_mutually_exclusive_group()
    decide.add_argument(
        "--yes", action="store_true", help="allow every permission request (when not on a TTY)"
    )
    decide.add_argument(
        "--deny", action="store_true", help="deny every permission request (the default off a TTY)"
    )
    _add_auth(parser)
    _add_mode(parser)
    _add_protocol(parser)
    _add_trace(parser)
    parser.add_argument("--no-fs", action="store_true", help="do not offer file access to the agent")
    parser.add_argument("--no-terminal", action="store_true", help="do not offer terminals to the agent")


def _add_header(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--header",
        metavar="'NAME: VALUE'",
        action="append",
        default=None,
        help="an HTTP header for a remote agent, sent on every request and on the WebSocket handshake "
        "(e.g. 'Authorization: Bearer TOKEN'); repeatable",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        default=None,
        help="send 'Authorization: Bearer TOKEN' to a remote agent, TOKEN being the file's first line "
        f"(off the command line, where every local user can read it; or set ${AGENT_TOKEN_ENV})",
    )
    parser.add_argument(
        "--cacert",
        metavar="FILE",
        default=None,
        help="trust this PEM certificate (a private CA, a self-signed server) for a wss:// or https:// "
        "agent, besides the system's authorities",
    )


PROTOCOL_ENV = "ACP_DRIVER_PROTOCOL"


def _add_protocol(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get(PROTOCOL_ENV, "auto")
    parser.add_argument(
        "--protocol",
        choices=("auto", "1", "2"),
        default=default if default in ("auto", "1", "2") else "auto",
        help="the ACP version to speak: the newest the agent speaks (auto; v1's field names are "
        f"sent too, so a v1 agent answers 1), or insist on 1 or 2 (default: ${PROTOCOL_ENV}, else auto)",
    )


def _add_trace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="record every message and the cancel's lifecycle to FILE (NDJSON, secrets redacted); "
        "read it with: acp-driver trace FILE [--html OUT]",
    )


def _add_turn_timeout(parser: argparse.ArgumentParser, what: str = "the turn") -> None:
    parser.add_argument(
        "--turn-timeout",
        metavar="SEC",
        type=seconds,
        default=None,
        help=f"cancel {what} after SEC (the time you take to answer a permission question does not count)",
    )


def _add_auth(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--auth",
        metavar="METHOD_ID",
        default=None,
        help="authenticate with this of the agent's authMethods before the session "
        "(an agent that answers 'Authentication required' names the methods it offers)",
    )


def _add_mode(parser: argparse.ArgumentParser, when: str = "after session/new") -> None:
    parser.add_argument(
        "--mode",
        metavar="MODE_ID",
        default=None,
        help=f"session/set_mode to this mode {when} (v2: the mode config option; some agents run "
        "tools unasked in their default mode)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-driver",
        description="Drive Agent Client Protocol agents, where cancellation always lands.",
        epilog=MAIN_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"acp-driver {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run one prompt turn and render it live",
        description="Run one prompt turn against an agent and render it live. First Ctrl-C cancels the "
        "turn (the cancel ladder starts); a second Ctrl-C kills the agent.",
        epilog=MAIN_EPILOG,
        formatter_class=HelpFormatter,
    )
    run.add_argument("prompt", nargs="?", help="the prompt (default: read stdin when it is not a TTY)")
    _add_session_options(run)
    _add_turn_timeout(run)
    run.add_argument("--json", action="store_true", help="one JSON object per line for every event")
    add_common(run)

    chat = sub.add_parser(
        "chat",
        help="a multi-turn conversation",
        description="A multi-turn conversation. Ctrl-C cancels the running turn (twice: kills the "
        "agent); Ctrl-D ends the chat.",
        epilog=CHAT_EPILOG,
        formatter_class=HelpFormatter,
    )
    _add_session_options(chat)
    _add_turn_timeout(chat, "each turn")
    add_common(chat)

    sub.add_parser("agent", help="run the bundled reference agent on stdio (see: acp-driver agent --help)")
    sub.add_parser("serve", help="serve an agent over WebSocket and HTTP (see: acp-driver serve --help)")
    sub.add_parser(
        "proxy",
        help="run an agent behind acp-driver's guarantees, for an editor (see: acp-driver proxy --help)",
    )
    sub.add_parser("trace", help="summarize a --trace file, or draw it (see: acp-driver trace --help)")

    check = sub.add_parser(
        "check",
        help="audit an agent's cancellation",
        description="Audit an agent's cancellation behaviour, rule by rule, each tagged "
        "MUST/SHOULD/MAY (INFO: informational) with its id and evidence. Exit 0 iff every MUST "
        "that applies passes (with --strict: every MUST, SHOULD and MAY); 5 if one failed; 6 "
        "(inconclusive) if none failed but one was skipped; 1 if the agent cannot start or "
        "initialize. A rule that does not apply to the agent (n/a) never counts.",
        epilog="example:\n  acp-driver check --busy-prompt 'write a long essay' -- npx my-agent --acp\n"
        "  acp-driver check   (no command: audits the bundled reference agent)\n\n"
        "Sessions run in a throw-away directory unless --cwd is given.",
        formatter_class=HelpFormatter,
    )
    check.add_argument("--json", action="store_true", help="results as JSON (each with its rule id)")
    check.add_argument(
        "--junit",
        metavar="FILE",
        default=None,
        help="also write the results as JUnit XML to FILE (one test case per rule, for CI)",
    )
    check.add_argument(
        "--jobs",
        metavar="N",
        type=int,
        default=4,
        help="how many checks run at once, each on its own agent (default: 4; 1: one after another)",
    )
    check.add_argument(
        "--busy-prompt",
        metavar="TEXT",
        default="/stream 600 50",
        help="a prompt that keeps the agent busy far longer than --timeout (default suits the "
        "reference agent)",
    )
    check.add_argument(
        "--busy-after",
        metavar="SEC",
        type=seconds,
        default=None,
        help="cancel SEC after the prompt even without turn activity (for agents silent while "
        "working; default: wait for the first chunk, tool call or plan, up to --timeout)",
    )
    check.add_argument(
        "--quick-prompt", metavar="TEXT", default="hello", help="a prompt the agent answers quickly"
    )
    check.add_argument(
        "--permission-prompt",
        metavar="TEXT",
        default="/permission",
        help="a prompt that makes the agent ask for permission",
    )
    check.add_argument(
        "--timeout",
        metavar="SEC",
        type=seconds,
        default=10.0,
        help="how long each rule waits for the agent to react: an answer, a cancel to land (default: 10)",
    )
    check.add_argument(
        "--start-timeout",
        metavar="SEC",
        type=seconds,
        default=None,
        help="how long each step of starting a fresh agent may take: connect (a remote agent), "
        "initialize, authenticate, the first session/new (default: 30, or --timeout if longer)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="exit nonzero when any MUST, SHOULD or MAY rule fails (not only MUST)",
    )
    check.add_argument(
        "--cwd",
        metavar="DIR",
        default=None,
        help="the sessions' working directory (default: a throw-away directory, so that tools the "
        "agent runs do not touch the current one)",
    )
    _add_auth(check)
    _add_header(check)
    _add_mode(check, "before each probe")
    check.add_argument(
        "--terminal",
        action="store_true",
        help="offer the agent real terminals (clientCapabilities.terminal): the commands it runs "
        "run here, in the sessions' directory, and are killed with their probe; some agents only "
        "ask permission when a terminal is offered (default: no terminal)",
    )
    _add_protocol(check)
    _add_trace(check)
    check.add_argument(
        "agent_command",
        nargs=argparse.REMAINDER,
        help="-- AGENT_CMD... or -- URL of a remote agent (default: reference agent)",
    )
    add_common(check)
    return parser


def cli_main(argv: Sequence[str]) -> int:
    parser = build_parser()
    opts = parser.parse_args(list(argv))
    if opts.command is None:
        parser.print_help()
        return EXIT_USAGE
    if opts.command in ("run", "chat", "check"):
        if isinstance(sys.stdout, io.TextIOWrapper):
            # A terminal whose encoding cannot write a character (a Latin-1 locale and "✓"):
            # a replacement, never an exception.
            sys.stdout.reconfigure(errors="replace")
        closed = _closed_std_streams()
        setup_logging(opts.verbose, opts.quiet)
        if 1 in closed:
            sys.stderr.write(
                f"acp-driver {opts.command}: error: stdout is closed: nothing could be shown "
                "(redirect it to a file or /dev/null instead)\n"
            )
            return EXIT_ERROR
        if opts.trace is not None:
            writable_trace(parser, opts.trace)
    try:
        if opts.command in ("run", "chat"):
            return _run_or_chat(parser, opts)
        if opts.command == "check":
            return _check(parser, opts)
    except RemoteExtraMissing as exc:
        sys.stderr.write(f"acp-driver {opts.command}: error: {exc}\n")
        return EXIT_ERROR
    parser.print_help()
    return EXIT_USAGE


def _closed_std_streams() -> list[int]:
    """Which of fds 0, 1, 2 were closed when the CLI started (``<&-``, ``>&-``, ``2>&-``).

    Each is opened on /dev/null: a pipe to the agent must never get fd 0, 1 or 2 (the CLI would
    then write into it, or read from it, as if it were a standard stream)."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: ``fd`` itself
        if opened != fd:  # pragma: no cover - a lower fd was closed meanwhile
            os.dup2(opened, fd)
            os.close(opened)
    if 2 in closed:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - for the process's life
    return closed


def _current_directory(parser: argparse.ArgumentParser) -> str:
    try:
        return os.getcwd()
    except OSError as exc:  # deleted while we were in it
        parser.error(
            f"the current directory is not there any more ({exc.strerror}): cd elsewhere or pass --cwd"
        )


def _run_or_chat(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> int:
    if getattr(opts, "turn_timeout", None) is not None and opts.turn_timeout <= 0:
        parser.error("--turn-timeout must be positive")
    if opts.cancel_budget is not None and opts.cancel_budget < 0:
        parser.error("--cancel-budget must be >= 0")
    if opts.cwd is not None:
        _utf8_path(parser, "--cwd", opts.cwd)
    if opts.cwd is not None and os.path.isabs(opts.cwd):
        cwd = _utf8_path(parser, "", os.path.normpath(opts.cwd))
    else:
        cwd = _utf8_path(parser, "", os.path.join(_current_directory(parser), opts.cwd or ""))
        cwd = os.path.normpath(cwd)
    if not os.path.isdir(cwd):
        parser.error(f"--cwd {opts.cwd!r} is not a directory")
    opts.agent_url = agent_url(opts.agent)
    check_url(parser, opts.agent_url, "--agent")
    opts.headers = parse_headers(parser, opts.header, opts.agent_url, opts.token_file)
    opts.ssl_context = parse_cacert(parser, opts.cacert, opts.agent_url)
    agent_argv = [opts.agent_url] if opts.agent_url is not None else _agent_argv(opts.agent, parser)
    for name in ("auth", "mode", "session"):
        if getattr(opts, name) is not None:
            setattr(opts, name, as_text(getattr(opts, name)))
    if opts.session is not None and not opts.session.strip():
        parser.error("--session is empty (leave it out to open a new session)")
    if opts.agent_url is not None:
        require_remote_extra("a remote agent (--agent URL)")
    from ._run import chat_command, run_command

    if opts.command == "run":
        prompt = opts.prompt
        if prompt is None:
            if sys.stdin is None or sys.stdin.isatty():
                parser.error("give a PROMPT (or pipe one on stdin)")
            prompt = sys.stdin.buffer.read().decode("utf-8", "replace")
        return run_command(opts, agent_argv, cwd, as_text(prompt))
    return chat_command(opts, agent_argv, cwd)


def _check(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> int:
    command = list(opts.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not (math.isfinite(opts.timeout) and opts.timeout > 0):
        parser.error("--timeout must be a positive number of seconds")
    if opts.busy_after is not None and not (math.isfinite(opts.busy_after) and opts.busy_after > 0):
        parser.error("--busy-after must be a positive number of seconds")
    if opts.start_timeout is not None and not (math.isfinite(opts.start_timeout) and opts.start_timeout > 0):
        parser.error("--start-timeout must be a positive number of seconds")
    if opts.jobs < 1:
        parser.error("--jobs must be at least 1")
    session_cwd: str | None = None
    if opts.cwd is not None:
        here = "" if os.path.isabs(opts.cwd) else _current_directory(parser)
        session_cwd = _utf8_path(parser, "--cwd", os.path.normpath(os.path.join(here, opts.cwd)))
        if not os.path.isdir(session_cwd):
            parser.error(f"--cwd {opts.cwd!r} is not a directory")
    for name in ("busy_prompt", "quick_prompt", "permission_prompt", "auth", "mode"):
        if getattr(opts, name) is not None:
            setattr(opts, name, as_text(getattr(opts, name)))
    url = agent_url(command[0]) if len(command) == 1 else None
    check_url(parser, url, "check --")
    opts.agent_url = url
    opts.headers = parse_headers(parser, opts.header, url, opts.token_file)
    opts.ssl_context = parse_cacert(parser, opts.cacert, url)
    if url is not None:
        require_remote_extra("a remote agent (check -- URL)")
    elif any(not os.path.isabs(arg) for arg in command):
        _current_directory(parser)  # relative paths in the command are made absolute from there
    return _check_obeying_signals(opts, command or _agent_argv(None), session_cwd)


def _check_obeying_signals(opts: argparse.Namespace, argv: list[str], cwd: str | None) -> int:
    """``check`` with SIGINT, SIGTERM and SIGHUP alike (``interrupt_audit``): the first cancels the
    audit (its ``finally`` reaps the agent under audit) and the command exits with 128 + the
    signal; once the audit is over they change nothing. One inherited ignored stays ignored
    (``_signals``)."""
    from ._check import audit_over, check_command, interrupt_audit
    from ._signals import handled
    from ._stdout import run_guarded

    received: list[int] = []

    def like_ctrl_c(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        interrupt_audit()

    # Installed before asyncio.run, which then installs no SIGINT handler of its own (and so
    # restores none at its end).
    for sig in handled((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
        signal.signal(sig, like_ctrl_c)
    try:
        code = run_guarded(lambda guard: check_command(opts, argv, cwd))
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    finally:
        # Every agent is reaped: a late signal must not replace the exit code by a death.
        audit_over()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    if received and code == 128 + signal.SIGINT:
        return 128 + received[0]  # the audit reports any interruption as a Ctrl-C
    return code
