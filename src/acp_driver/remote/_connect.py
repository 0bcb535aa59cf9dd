"""``connect(url)``: a remote agent behind the same ``RemoteAgent`` API as ``launch``.

There is no process on the host's side: the agent's connection is carried by a client
transport (``_client_ws`` or ``_client_http``), and the ``NetworkAgent`` owning it maps what a
``RemoteAgent`` does to a process onto the connection:

- the cancel ladder's TERMINATE rung closes the connection gracefully (WebSocket close / HTTP
  ``DELETE``; aborted if that does not finish before the KILL rung), KILL aborts it; the server
  then cancels the agent's work and ends its process (that is its part of the bargain);
- a connection that ends -- closed by the host, dropped by the server or the network -- ends
  every request in flight and every turn at once: turns resolve ``disconnected``, requests fail
  with ``AgentDisconnectedError`` naming the URL and what happened;
- ``shutdown`` closes gracefully; ``kill`` aborts; ``returncode`` is None (no process here).

Reconnecting is a new ``connect`` (pass the same ``cookies`` jar to reach the same server
behind a cookie-affine balancer); the sessions of the old connection come back with
``load_session`` / ``resume_session`` where the agent supports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from ..aio import Clock, Connection
from ..core import LadderPolicy, Tracer
from ..driver._errors import AgentDisconnectedError, AgentStartError
from ..driver._remote_agent import RemoteAgent
from ..driver._services import ClientServices
from ..trace import TraceTarget, follow_connection, open_trace, wire_tracer
from ._client_base import ClientTransport

logger = logging.getLogger("acp_driver.remote")

SCHEMES = ("ws://", "wss://", "http://", "https://")


def is_url(target: str) -> bool:
    """Whether an agent given on a command line is a URL (``ws://``, ``wss://``, ``http(s)://``)."""
    return target.lower().startswith(SCHEMES)


class NetworkAgent(RemoteAgent):
    """A ``RemoteAgent`` reached over a network (see the module docstring)."""

    remote = True

    def __init__(
        self,
        transport: ClientTransport,
        connection: Connection,
        *,
        services: ClientServices,
        ladder_policy: LadderPolicy,
        request_timeout: float,
        name: str,
        clock: Clock | None = None,
    ) -> None:
        self.transport = transport
        self.url = transport.url
        self._setup(connection, services, ladder_policy, request_timeout, name, clock)
        self.close_grace = max(ladder_policy.budget * (1 - ladder_policy.terminate_at), 0.5)
        """How long a graceful close (the TERMINATE rung, ``shutdown``) may take before the abort."""

    # ------------------------------------------------------------------ what a process would do

    @property
    def returncode(self) -> int | None:
        return None

    @property
    def where(self) -> str:
        return self.url

    def terminate_peer(self) -> None:
        self.signalled = True
        self.spawn(self.transport.aclose(self.close_grace), "close the connection")

    def kill_peer(self) -> None:
        self.signalled = True
        self.transport.abort("the host aborted the connection (cancel ladder)")

    async def shutdown(self, grace: float = 2.0) -> int:
        """Close the connection (every request still pending fails); returns 0."""
        conn = self.connection
        if not conn.closed:
            await conn.aclose("host closed the connection")
        await self.transport.aclose(grace)
        await self._finalize("the host closed the connection")
        return 0

    async def kill(self) -> int:
        """Abort the connection now (the server ends the agent's work); returns 0."""
        self.signalled = True
        self.transport.abort()
        await self._finalize("the host aborted the connection")
        return 0

    # ------------------------------------------------------------------ the connection's end

    def _on_peer_gone(self, how: str) -> None:
        self.spawn(self._finalize(self.transport.end_reason or "the connection ended"), "connection gone")

    def _on_exit(self, code: int) -> None:  # pragma: no cover - no process to exit
        pass

    async def _finalize(self, reason: str) -> None:
        if self._finalizing is None:
            self._exit_reason = f"connection to {self.url} ended: {self.transport.end_reason or reason}"
            self._finalizing = asyncio.get_running_loop().create_task(self._do_finalize(self._exit_reason))
        await asyncio.shield(self._finalizing)

    async def _do_finalize(self, reason: str) -> None:
        await self.connection.aclose(reason)
        with contextlib.suppress(Exception):
            await self.transport.aclose(self.close_grace)
        terminals = self.services.terminals
        if terminals is not None:
            for session in list(self.sessions.values()):
                with contextlib.suppress(Exception):
                    await terminals.release_owner(session)
        for task in list(self._background):
            if task is not asyncio.current_task() and task is not self._finalizing:
                task.cancel()

    def _exited_error(self, message: str) -> AgentDisconnectedError:
        return AgentDisconnectedError(self._exit_reason or f"connection to {self.url}: {message}")

    def closed_error(self) -> AgentDisconnectedError:
        return AgentDisconnectedError(
            self._exit_reason or self.connection.close_reason or f"connection to {self.url} closed"
        )


def _jar(cookies: Any) -> http.cookiejar.CookieJar:
    if cookies is None:
        return http.cookiejar.CookieJar()
    if isinstance(cookies, http.cookiejar.CookieJar):
        return cookies
    jar = getattr(cookies, "jar", None)  # httpx.Cookies
    if isinstance(jar, http.cookiejar.CookieJar):
        return jar
    raise TypeError("cookies must be an http.cookiejar.CookieJar or an httpx.Cookies")


async def open_transport(
    url: str,
    connection: Connection,
    *,
    headers: Mapping[str, str] | None = None,
    cookies: Any = None,
    open_timeout: float = 30.0,
    http2_prior_knowledge: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> ClientTransport:
    """Attach ``connection`` to the agent at ``url`` (WebSocket or Streamable HTTP by scheme).

    Raises ``ValueError`` for a URL of another scheme, ``OSError`` (or ``TimeoutError``) when the
    server cannot be reached or refuses the WebSocket handshake. ``acp-driver check`` uses it.
    """
    lowered = url.lower()
    sent = dict(headers or {})
    jar = _jar(cookies)
    if lowered.startswith(("ws://", "wss://")):
        from ._client_ws import open_websocket

        return await open_websocket(
            url, connection, headers=sent, jar=jar, open_timeout=open_timeout, ssl_context=ssl_context
        )
    if lowered.startswith(("http://", "https://")):
        from ._client_http import open_http

        return open_http(
            url,
            connection,
            headers=sent,
            jar=jar,
            http2_prior_knowledge=http2_prior_knowledge,
            ssl_context=ssl_context,
        )
    raise ValueError(f"not an ACP URL (ws://, wss://, http:// or https://): {url!r}")


async def connect(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    services: ClientServices | None = None,
    ladder: LadderPolicy | None = None,
    request_timeout: float = 30.0,
    init_timeout: float = 30.0,
    name: str | None = None,
    tracer: Tracer | None = None,
    trace: TraceTarget = None,
    clock: Clock | None = None,
    cookies: Any = None,
    http2_prior_knowledge: bool = False,
    ssl_context: ssl.SSLContext | None = None,
    on_connect: Callable[[RemoteAgent], object] | None = None,
) -> RemoteAgent:
    """Connect to the ACP agent at ``url`` and complete ``initialize``.

    ``ws://``/``wss://``: WebSocket; ``http://``/``https://``: Streamable HTTP (HTTP/2 over TLS
    by ALPN; cleartext is HTTP/1.1 unless ``http2_prior_knowledge``). ``headers`` go on every
    request and on the WebSocket handshake (e.g. ``{"Authorization": "Bearer ..."}``).
    ``cookies`` is a caller-owned ``http.cookiejar.CookieJar`` (or ``httpx.Cookies``) that keeps
    the server's cookies across reconnects; by default a fresh jar lives as long as the
    connection. ``ssl_context`` verifies ``wss://``/``https://`` servers (default: the system's
    trust store), e.g. ``ssl.create_default_context(cafile="internal-ca.pem")``.
    ``on_connect(agent)`` is called once the connection exists, before ``initialize``. The other
    options are ``launch``'s (``trace``: the header records the names of ``headers``, never
    their values).
    """
    label = name or url
    sink, owned = open_trace(trace, role="host", agent=[url], headers=dict(headers or {}))
    connection = Connection(name=label, tracer=wire_tracer(tracer, sink))
    if sink is not None:
        follow_connection(connection, sink, owned)
    try:
        transport = await open_transport(
            url,
            connection,
            headers=headers,
            cookies=cookies,
            open_timeout=init_timeout,
            http2_prior_knowledge=http2_prior_knowledge,
            ssl_context=ssl_context,
        )
    except ValueError as exc:
        if sink is not None and owned:
            sink.close()
        raise AgentStartError(str(exc)) from exc
    except (OSError, TimeoutError) as exc:
        if sink is not None and owned:
            sink.close()
        what = exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)
        raise AgentStartError(f"cannot connect to {url}: {what or type(exc).__name__}") from exc
    agent = NetworkAgent(
        transport,
        connection,
        services=services or ClientServices(),
        ladder_policy=ladder or LadderPolicy(),
        request_timeout=request_timeout,
        name=label,
        clock=clock,
    )
    agent.trace = sink
    await agent._start(init_timeout, on_connect, f"agent at {url}", agent.kill)
    return agent
