"""``connect(url)``: an agent reached over a network, behind the same ``AgentHandle`` API as ``launch``.

There is no process on the host's side: the agent's connection is carried by a client
transport (``net``: WebSocket or Streamable HTTP), and the ``NetworkPeer`` maps what the ladder
and the handle would do to a process onto the connection:

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

import contextlib
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..aio import Clock, Connection
from ..core import LadderPolicy, Tracer
from ..trace import TraceTarget, follow_connection, open_trace, wire_tracer
from ._errors import AgentDisconnectedError, AgentStartError
from ._services import ClientServices

if TYPE_CHECKING:
    from ..net import ClientTransport
    from ._agent import AgentHandle

logger = logging.getLogger("acp_driver.remote")


class NetworkPeer:
    """One network connection to an agent (see the module docstring); implements ``driver.Peer``."""

    remote = True
    returncode = None

    def __init__(self, transport: ClientTransport, close_grace: float) -> None:
        self.transport = transport
        self.url = transport.url
        self.close_grace = close_grace
        """How long a graceful close (the TERMINATE rung, ``shutdown``) may take before the abort."""
        self._agent: AgentHandle | None = None

    @property
    def where(self) -> str:
        return self.url

    def attach(self, agent: AgentHandle) -> None:
        self._agent = agent
        agent.connection.on_peer_gone = self._on_peer_gone

    # ------------------------------------------------------------------ the ladder's rungs

    def close_input(self) -> None:
        self.terminate()

    def terminate(self) -> None:
        assert self._agent is not None
        self._agent.spawn(self.transport.aclose(self.close_grace), "close the connection")

    def kill(self) -> None:
        self.transport.abort("the host aborted the connection (cancel ladder)")

    # ------------------------------------------------------------------ ending

    async def shutdown(self, grace: float, term_grace: float) -> tuple[int, str]:
        await self.transport.aclose(grace)  # no signal to send: aborted at the end of the grace
        return 0, "the host closed the connection"

    async def kill_now(self) -> tuple[int, str]:
        self.transport.abort()
        return 0, "the host aborted the connection"

    def final_reason(self, reason: str) -> str:
        return f"connection to {self.url} ended: {self.transport.end_reason or reason}"

    async def release(self) -> None:
        with contextlib.suppress(Exception):
            await self.transport.aclose(self.close_grace)

    def error(self, message: str) -> AgentDisconnectedError:
        return AgentDisconnectedError(
            message if self.url in message else f"connection to {self.url}: {message}"
        )

    def _on_peer_gone(self, how: str) -> None:
        agent = self._agent
        assert agent is not None
        agent.spawn(agent.finalize(self.transport.end_reason or "the connection ended"), "connection gone")


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
    on_connect: Callable[[AgentHandle], object] | None = None,
    protocol: Any = "auto",
) -> AgentHandle:
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
    their values). Needs the ``remote`` extra.
    """
    from ..net import open_transport
    from ._agent import AgentHandle, _check_protocol

    label = name or url
    sink, owned = open_trace(trace, role="host", agent=[url], headers=dict(headers or {}))
    connection = Connection(name=label, tracer=wire_tracer(tracer, sink), clock=clock)
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
    policy = ladder or LadderPolicy()
    peer = NetworkPeer(transport, max(policy.budget * (1 - policy.terminate_at), 0.5))
    agent = AgentHandle(
        connection,
        peer,
        services=services or ClientServices(),
        ladder_policy=policy,
        request_timeout=request_timeout,
        name=label,
        clock=clock,
    )
    agent.trace = sink
    agent.protocol = _check_protocol(protocol)
    await agent.start(init_timeout, on_connect, f"agent at {url}", agent.kill)
    return agent
