"""``acp-driver serve``: expose a stdio agent over the network (WebSocket and Streamable HTTP).

One agent process per connection; when a connection ends its turns are cancelled through the
ladder and its agent is reaped. Ready: one line on stderr, ``acp-driver serve: listening on
URL``. SIGINT/SIGTERM end every connection the same way, then the command exits 0 (one of them
inherited ignored stays ignored: ``_signals``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

SERVE_EPILOG = """\
examples:
  acp-driver serve                               the reference agent on ws://127.0.0.1:8765/acp
  acp-driver serve --port 9000 -- npx @agentclientprotocol/claude-agent-acp
  acp-driver serve --host 0.0.0.0 --token-file ~/.acp-token \\
      --certfile cert.pem --keyfile key.pem -- my-agent

Clients connect to ws://HOST:PORT/acp (WebSocket) or http://HOST:PORT/acp (Streamable HTTP; HTTP/1.1
or HTTP/2, TLS with --certfile/--keyfile). With a token they send 'Authorization: Bearer TOKEN'.
A listen address other than loopback needs a token: prefer --token-file or the environment variable
ACP_DRIVER_SERVE_TOKEN (removed from the agent's environment) to --token, which every local user can
read from the process list. Every request's Host must name this server (DNS rebinding); add the
names clients use with --allow-host. The agent's command is fixed here: no client can choose what runs.
"""


TOKEN_ENV = "ACP_DRIVER_SERVE_TOKEN"


def build_serve_parser() -> argparse.ArgumentParser:
    from ..remote import (
        DEFAULT_CANCEL_BUDGET,
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_MAX_MESSAGE_BYTES,
        DEFAULT_PORT,
    )
    from ._options import HelpFormatter, add_common, seconds

    serve = argparse.ArgumentParser(
        prog="acp-driver serve",
        description="Serve a stdio agent on one /acp endpoint over WebSocket and Streamable HTTP "
        "(the ACP remote transport). Each connection gets its own agent process; when a connection "
        "ends, its turns are cancelled through the ladder and the agent is reaped.",
        epilog=SERVE_EPILOG,
        formatter_class=HelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT}; 0: any free port)"
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every request, TOKEN being the file's first "
        f"line (a token is required off loopback; or set {TOKEN_ENV})",
    )
    serve.add_argument(
        "--token",
        default=None,
        help="the same, TOKEN on the command line (readable by every local user: prefer --token-file)",
    )
    serve.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="also admit requests whose Host is NAME (.DOMAIN: and its subdomains; '*': any). By "
        "default only loopback names and addresses for a loopback bind, the bound address otherwise",
    )
    serve.add_argument(
        "--allow-origin",
        metavar="URL",
        action="append",
        default=[],
        help="admit requests from this browser Origin (repeatable; by default only same-origin)",
    )
    serve.add_argument(
        "--instance",
        metavar="NAME",
        default=None,
        help="this server's name in the acp_affinity cookie, for a reverse proxy's affinity "
        "(default: unique per process)",
    )
    serve.add_argument(
        "--certfile", metavar="PEM", default=None, help="TLS certificate (HTTPS, HTTP/2 via ALPN)"
    )
    serve.add_argument("--keyfile", metavar="PEM", default=None, help="TLS private key")
    serve.add_argument(
        "--max-message-bytes",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help="largest message accepted (HTTP 413 / WebSocket close 1009)",
    )
    serve.add_argument(
        "--max-connections",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        help=f"connections (agents) at once; more get 503 (default: {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--idle-timeout",
        metavar="SEC",
        type=seconds,
        default=DEFAULT_IDLE_TIMEOUT,
        help="end a connection with no traffic (and no open stream) after SEC "
        f"(default: {DEFAULT_IDLE_TIMEOUT:g})",
    )
    serve.add_argument(
        "--cancel-budget",
        metavar="SEC",
        type=seconds,
        default=DEFAULT_CANCEL_BUDGET,
        help="seconds from a connection's end to SIGKILL of its agent: session/cancel at once, "
        f"$/cancel_request at half, SIGTERM at 3/4 (default: {DEFAULT_CANCEL_BUDGET:g})",
    )
    serve.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="record every connection's messages, ladder and agent process to FILE (NDJSON, "
        "secrets redacted; each event names its connection); read it with: acp-driver trace FILE",
    )
    serve.add_argument(
        "--protocol",
        choices=("auto", "1", "2"),
        default="auto",
        help="the highest ACP version a connection may speak (auto: what the client and the agent "
        "agree on; 1: a client asking for 2 is relayed as asking for 1)",
    )
    serve.add_argument(
        "agent_command",
        nargs=argparse.REMAINDER,
        help="-- AGENT_CMD... (default: the bundled reference agent)",
    )
    add_common(serve)
    return serve


def serve_cli(argv: list[str]) -> int:
    """``acp-driver serve ...``."""
    parser = build_serve_parser()
    opts = parser.parse_args(argv)
    from ._options import setup_logging, writable_trace
    from ._remote_options import SERVER_MODULES, RemoteExtraMissing, require_remote_extra

    if opts.trace is not None:
        writable_trace(parser, opts.trace)

    setup_logging(opts.verbose, opts.quiet)
    try:
        require_remote_extra("serve", SERVER_MODULES)
    except RemoteExtraMissing as exc:
        sys.stderr.write(f"acp-driver serve: error: {exc}\n")
        return 1
    return serve_main(opts)


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range (0-65535): {port}")
    return port


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {number}")
    return number


def _refuse(message: str) -> int:
    sys.stderr.write(f"acp-driver serve: error: {message}\n")
    return 2


def read_token(opts: argparse.Namespace) -> str | None:
    """The bearer token from exactly one of --token-file, $ACP_DRIVER_SERVE_TOKEN, --token (None:
    no token). The variable is removed from the environment so the agent does not inherit it.
    ``ValueError`` with the reason when it cannot be read or more than one is given."""
    from_env = os.environ.pop(TOKEN_ENV, None)
    given = [
        name
        for name, value in (("--token-file", opts.token_file), (TOKEN_ENV, from_env), ("--token", opts.token))
        if value is not None
    ]
    if len(given) > 1:
        raise ValueError(f"give the token once: {' and '.join(given)} are both set")
    if opts.token_file is not None:
        from ._remote_options import read_token_file

        return read_token_file(opts.token_file, "acp-driver serve")
    if from_env is not None:
        return from_env.strip()
    if opts.token is not None:
        sys.stderr.write(
            "acp-driver serve: warning: --token is visible to every local user (the process list); "
            f"prefer --token-file or {TOKEN_ENV}\n"
        )
    return opts.token  # type: ignore[no-any-return]


def serve_main(opts: argparse.Namespace) -> int:
    from ..remote import ConfigError, ServerSettings

    try:
        token = read_token(opts)
    except ValueError as exc:
        return _refuse(str(exc))
    command = list(opts.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    options: dict[str, Any] = {
        "host": opts.host,
        "port": opts.port,
        "token": token,
        "allow_origins": opts.allow_origin,
        "allow_hosts": opts.allow_host,
        "certfile": opts.certfile,
        "keyfile": opts.keyfile,
        "max_message_bytes": opts.max_message_bytes,
        "max_connections": opts.max_connections,
        "idle_timeout": opts.idle_timeout,
        "cancel_budget": opts.cancel_budget,
        "protocol": None if opts.protocol == "auto" else int(opts.protocol),
    }
    if opts.instance is not None:
        options["instance"] = opts.instance
    settings = ServerSettings(**options)
    try:
        settings.check()
    except ConfigError as exc:
        return _refuse(str(exc))
    try:
        return asyncio.run(_serve(command or None, settings, opts.trace))
    except ConfigError as exc:
        return _refuse(str(exc))
    except OSError as exc:
        sys.stderr.write(f"acp-driver serve: cannot listen on {settings.host}:{settings.port}: {exc}\n")
        return 1


async def _serve(command: list[str] | None, settings: Any, trace: str | None = None) -> int:
    from ..remote import serve_command
    from ._signals import Routed

    server = await serve_command(command, settings=settings, trace=trace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        stop.set()

    # One inherited ignored stays ignored; the others stay handled until every agent is closed (a
    # second one changes nothing), then ignored: a late one never kills serve half-way through,
    # which would leave its agents running. SIGHUP too: a terminal closed on a foreground serve.
    routed = Routed(loop, on_signal, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    sys.stderr.write(f"acp-driver serve: listening on {server.url}\n")
    sys.stderr.flush()
    try:
        await stop.wait()
    finally:
        try:
            await server.aclose()
        finally:
            routed.ignore()
    return 0
