"""The server: ACP agents behind one ``/acp`` endpoint, over WebSocket and Streamable HTTP.

``RemoteServer`` is a raw ASGI application served by hypercorn on one port: HTTP/1.1, HTTP/2
(cleartext ``h2c`` with prior knowledge, or TLS with ALPN when a certificate is given) and
WebSocket. Every connection gets its own agent from a ``BackendFactory`` (``_backend``): a
subprocess per connection (``serve_command``) or an ``Agent`` served in-process
(``serve_agent``). The front-ends (``_websocket``, ``_http``) only see ``ServedConnection``
(``_served``), which runs the cancel ladder when a connection ends.

Checked on every request, in this order: the path (404), the Host (403; DNS rebinding), the
bearer token (401), the Origin (403), then per profile the RFD's rules; limits: ``max_message_bytes`` (413 / close 1009),
``max_connections`` (503, also for upgrades), ``idle_timeout`` (a connection with no traffic,
nothing in flight on a WebSocket and no open stream on HTTP, is ended through the ladder;
WebSocket close 1008; so is one whose client read none of the agent's output for that long).
Flow control: an outlet (``_outlet``) past its high-water mark pauses the agent's output. The agent's command is fixed when the server starts: nothing a client
sends reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import ssl
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent
from ..aio import Clock, LoopClock, Timer
from ..core import LadderPolicy
from ..net import ENDPOINT_PATH, WS_GOING_AWAY, WS_POLICY
from ..trace import bind, open_trace
from ._asgi import Receive, Refused, Scope, Send, header, respond_error
from ._backend import BackendFactory
from ._defaults import (
    DEFAULT_CANCEL_BUDGET,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PORT,
)
from ._guard import HostPolicy, OriginPolicy, bearer_ok, is_loopback
from ._http import HttpConnection, serve_http
from ._inprocess import make_in_process
from ._relay import SubprocessBackend
from ._served import ServedConnection
from ._websocket import deny_upgrade, serve_websocket

logger = logging.getLogger("acp_driver.remote.server")

AFFINITY_COOKIE = "acp_affinity"
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ConfigError(ValueError):
    """A server setting that cannot work (the CLI exits 2 with it)."""


@dataclass
class ServerSettings:
    """How a ``RemoteServer`` listens and what it allows (see the module docstring)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    allow_origins: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    """Names a request's ``Host`` may carry besides the bound address's (``*``: any; see ``_guard``)."""
    instance: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """This server's name in the affinity cookie (a reverse proxy maps it to this instance)."""
    certfile: str | None = None
    keyfile: str | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    cancel_budget: float = DEFAULT_CANCEL_BUDGET
    """Seconds from a connection's end to SIGKILL of its agent (the ladder's budget)."""
    keepalive: float = 15.0
    """Seconds of silence on an SSE stream before a keepalive comment."""
    max_buffered_bytes: int = 64 * 1024 * 1024
    """Bytes of messages waiting for one stream (or WebSocket), or for the agent to read its
    input, before the connection is ended."""
    initialize_timeout: float = 30.0
    protocol: int | None = None
    """The highest ACP version a connection may speak (``--protocol``; None: what the client
    and the agent agree on). A client asking for more is relayed as asking for this one."""

    def check(self) -> None:
        """Raise ``ConfigError`` for a setting that cannot work."""
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(
                f"refusing to listen on {self.host!r} without --token: anyone who can reach it "
                "could run the agent (bind 127.0.0.1, or give a token)"
            )
        if self.token is not None and (not self.token or any(c.isspace() for c in self.token)):
            raise ConfigError("the token must be non-empty and contain no whitespace")
        if not _INSTANCE_NAME.match(self.instance):
            raise ConfigError(f"--instance {self.instance!r}: use 1-64 of A-Z a-z 0-9 . _ -")
        if (self.certfile is None) != (self.keyfile is None):
            raise ConfigError("--certfile and --keyfile go together")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range")
        for name in ("max_message_bytes", "max_connections", "max_buffered_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be at least 1")
        for name in ("idle_timeout", "keepalive", "initialize_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name.replace('_', '-')} must be positive")
        try:
            LadderPolicy(self.cancel_budget)
            OriginPolicy(self.allow_origins)
            HostPolicy(self.host, self.allow_hosts)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


class RemoteServer:
    """A running server (``url``, ``port``; ``async with`` or ``aclose()``); see the module docstring."""

    def __init__(
        self,
        factory: BackendFactory,
        settings: ServerSettings,
        clock: Clock | None = None,
        *,
        trace: Any = None,
    ) -> None:
        settings.check()
        self.trace, self._owns_trace = open_trace(trace, role="server")
        """Where every connection's messages and ladder are recorded (each event names its
        ``conn``), if anywhere: a file path or a ``trace.TraceSink``."""
        self.settings = settings
        self.clock: Clock = clock if clock is not None else LoopClock()
        """What every connection's ladder and the idle sweep measure time on (a fake one in tests)."""
        self.factory = factory
        self.policy = LadderPolicy(settings.cancel_budget)
        self.origins = OriginPolicy(settings.allow_origins)
        self.hosts = HostPolicy(settings.host, settings.allow_hosts)
        self._token = settings.token.encode() if settings.token else None
        self.connections: dict[str, ServedConnection] = {}
        """Every connection until its agent is reaped."""
        self.http_connections: dict[str, HttpConnection] = {}
        """Streamable HTTP connections until they end."""
        self._starting = 0
        self._closing = False
        self._shutdown = asyncio.Event()
        self._serve_task: asyncio.Task[None] | None = None
        self._sweeper: Timer | None = None
        self._socket: socket.socket | None = None
        self.port = settings.port
        self.host = settings.host

    # ------------------------------------------------------------------ lifecycle

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def scheme(self) -> str:
        return "https" if self.settings.certfile else "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{ENDPOINT_PATH}"

    async def start(self) -> None:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.settings.port))
            sock.listen(1024)
        except BaseException:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = Config()
        bind = f"fd://{sock.detach()}"
        config.bind = [bind]
        config.accesslog = None
        config.errorlog = logging.getLogger("acp_driver.remote.hypercorn")
        config.websocket_max_message_size = self.settings.max_message_bytes
        config.graceful_timeout = 1.0
        config.backlog = 1024
        if self.settings.certfile:
            config.certfile = self.settings.certfile
            config.keyfile = self.settings.keyfile
            try:
                config.create_ssl_context()
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot use the certificate: {exc}") from None
        loop = asyncio.get_running_loop()
        self._serve_task = loop.create_task(
            serve(self, config, shutdown_trigger=self._shutdown.wait),  # type: ignore[arg-type]
            name="acp-serve",
        )
        self._schedule_sweep()
        logger.info("listening on %s (instance %s)", self.url, self.settings.instance)

    async def aclose(self) -> None:
        """End every connection through the ladder, reap every agent, stop listening."""
        if self._closing:
            if self._serve_task is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self._serve_task)
            return
        self._closing = True
        while self.connections or self._starting:
            for conn in list(self.connections.values()):
                conn.end("the server is shutting down", WS_GOING_AWAY)
            await asyncio.gather(*(c.wait_ended() for c in list(self.connections.values())))
            if self._starting:
                await asyncio.sleep(0.01)  # an agent still starting: it is ended as soon as it is up
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._shutdown.set()
        if self._serve_task is not None:
            with _quiet_cancelled_streams():
                with contextlib.suppress(Exception):
                    await self._serve_task
                for _ in range(3):  # the streams' done-callbacks run on the next iterations
                    await asyncio.sleep(0)
        if self.trace is not None and self._owns_trace:
            self.trace.close()

    async def __aenter__(self) -> RemoteServer:
        if self._serve_task is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def wait_closed(self) -> None:
        if self._serve_task is not None:
            await asyncio.shield(self._serve_task)

    # ------------------------------------------------------------------ connections

    async def open_connection(self, kind: str) -> ServedConnection:
        """A new connection with its own agent (raises ``Refused`` with the HTTP status)."""
        if self._closing:
            raise Refused(503, "the server is shutting down")
        if len(self.connections) + self._starting >= self.settings.max_connections:
            raise Refused(503, f"the server holds its maximum of {self.settings.max_connections} connections")
        connection_id = uuid.uuid4().hex
        self._starting += 1
        try:
            backend = await self.factory(connection_id)
        except Exception as exc:
            logger.error("%s: the agent cannot start: %s", connection_id, exc)
            raise Refused(500, f"the agent cannot start: {exc}") from None
        finally:
            self._starting -= 1
        trace = bind(self.trace, conn=connection_id) if self.trace is not None else None
        conn = ServedConnection(
            connection_id,
            backend,
            self.policy,
            kind,
            self.settings.max_buffered_bytes,
            self.clock,
            trace=trace,
        )
        conn.protocol_cap = self.settings.protocol
        self.connections[connection_id] = conn
        conn.on_end.append(lambda _reason, _code: self.http_connections.pop(connection_id, None))
        conn.on_reaped.append(lambda: self.connections.pop(connection_id, None))
        logger.info("%s: new %s connection, agent pid %s", connection_id, kind, backend.pid)
        if self.closing:  # shut down while the agent started
            conn.end("the server is shutting down", WS_GOING_AWAY)
        return conn

    def _schedule_sweep(self) -> None:
        interval = min(max(self.settings.idle_timeout / 4, 0.02), 1.0)
        self._sweeper = self.clock.call_at(self.clock.now() + interval, self._sweep_idle)

    def _sweep_idle(self) -> None:
        """End the connections idle for ``idle_timeout`` (see the module docstring); then the
        next sweep, a quarter of the timeout later (at most 1 s)."""
        if self._closing:
            return
        idle = self.settings.idle_timeout
        now = self.clock.now()
        for conn in list(self.connections.values()):
            if conn.ending:
                continue
            if conn.paused_since is not None and now - conn.paused_since >= idle:
                conn.end(f"the client read none of the agent's output for {idle:g} s", WS_POLICY)
                continue
            if now - conn.last_activity < idle or conn.inflight.initializing:
                continue
            if conn.kind == "http" and conn.streams_open:
                continue
            if conn.kind == "websocket" and conn.inflight.busy:
                continue
            conn.end(f"idle for {idle:g} s", WS_POLICY)
        self._schedule_sweep()

    def affinity_cookie(self) -> tuple[bytes, bytes]:
        value = f"{AFFINITY_COOKIE}={self.settings.instance}; Path=/; HttpOnly; SameSite=Lax"
        return (b"set-cookie", value.encode())

    # ------------------------------------------------------------------ ASGI

    def refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """Why a request is refused (status, message, headers), or None: Host, token, then Origin."""
        host = header(scope, b"host")
        if not self.hosts.admits(host):
            shown = "no Host header" if host is None else f"Host {host.decode('latin-1')[:100]!r}"
            return 403, f"{shown} does not name this server (see --allow-host)", []
        if self._token is not None and not bearer_ok(header(scope, b"authorization"), self._token):
            return 401, "missing or wrong bearer token", [(b"www-authenticate", b'Bearer realm="acp"')]
        if not self.origins.admits(header(scope, b"origin"), host, scope.get("scheme", "http")):
            return 403, "cross-origin request refused (see --allow-origin)", []
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if scope.get("path") != ENDPOINT_PATH:
            if kind == "websocket":
                await deny_upgrade(scope, send, 404, f"the endpoint is {ENDPOINT_PATH}", [])
            else:
                await respond_error(send, 404, f"the endpoint is {ENDPOINT_PATH}")
            return
        if kind == "websocket":
            await serve_websocket(self, scope, receive, send)
            return
        if kind != "http":
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            status, message, headers = refusal
            # The body was not read: the connection cannot carry another request safely (a
            # client reusing it races the server closing it), so say it closes.
            await respond_error(send, status, message, [*headers, (b"connection", b"close")])
            return
        await serve_http(self, scope, receive, send)


@contextlib.contextmanager
def _quiet_cancelled_streams() -> Iterator[None]:
    """While hypercorn shuts down: a connection still open at its graceful timeout (a WebSocket
    client that never answers the close frame) has its task cancelled, and Python 3.11's
    ``StreamReaderProtocol`` done-callback calls ``task.exception()`` on it, which raises
    ``CancelledError`` into the loop's exception handler: a traceback for a normal shutdown
    (fixed in 3.12). Only that report is dropped (logged at debug); the rest goes through."""
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()

    def handler(the_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError) and "StreamReaderProtocol" in str(
            context.get("message", "")
        ):
            logger.debug("a connection was cancelled at shutdown: %s", context.get("message"))
            return
        if previous is not None:
            previous(the_loop, context)
        else:
            the_loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    try:
        yield
    finally:
        if loop.get_exception_handler() is handler:
            loop.set_exception_handler(previous)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _settings(
    settings: ServerSettings | None, host: str, port: int, token: str | None, options: dict[str, Any]
) -> ServerSettings:
    if settings is None:
        return ServerSettings(host=host, port=port, token=token, **options)
    if options or (host, port, token) != ("127.0.0.1", DEFAULT_PORT, None):
        raise TypeError("give either settings or keyword options, not both")
    return settings


async def serve_command(
    argv: Sequence[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    settings: ServerSettings | None = None,
    clock: Clock | None = None,
    trace: Any = None,
    **options: Any,
) -> RemoteServer:
    """Serve a stdio agent: one ``argv`` process per connection (default: the bundled reference
    agent). ``options`` are the other ``ServerSettings`` fields (``allow_origins``,
    ``cancel_budget``, ``idle_timeout``, ...), or pass a whole ``settings``; ``clock`` is what the
    ladders, the idle sweep, ``initialize``'s timeout and the agents' release run on (the loop's
    by default); ``trace``: a file path or a
    ``trace.TraceSink`` recording every connection (docs/trace.md). Returns the started server;
    ``ConfigError`` for settings that cannot work, ``OSError`` if it cannot listen."""
    import sys

    command = list(argv) if argv else [sys.executable, "-m", "acp_driver", "agent"]
    resolved = _settings(settings, host, port, token, options)
    limit = resolved.max_message_bytes

    async def spawn(name: str) -> SubprocessBackend:
        return await SubprocessBackend.spawn(command, name, max_message_bytes=limit, clock=clock)

    server = RemoteServer(spawn, resolved, clock, trace=trace)
    await server.start()
    return server


async def serve_agent(
    factory: Callable[[], Agent],
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    settings: ServerSettings | None = None,
    cancel_timeout: float = 2.0,
    clock: Clock | None = None,
    trace: Any = None,
    **options: Any,
) -> RemoteServer:
    """Serve ``factory()`` in-process: a fresh ``Agent`` (on its own ``AgentRuntime``) per
    connection; ``cancel_timeout`` is the runtime's (how long a cancelled turn may take to
    unwind). Other arguments as for ``serve_command``. Returns the started server."""
    resolved = _settings(settings, host, port, token, options)
    backend_factory = make_in_process(
        factory, max_message_bytes=resolved.max_message_bytes, cancel_timeout=cancel_timeout, clock=clock
    )
    server = RemoteServer(backend_factory, resolved, clock, trace=trace)
    await server.start()
    return server
