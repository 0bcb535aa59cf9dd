"""The Streamable HTTP profile: POST, GET (server-sent events) and DELETE on ``/acp``.

The RFD's routing table, as served here:

    POST    Content-Type not application/json -> 415; body over the limit -> 413; not JSON or
            not an object -> 400; a JSON array (batch) -> 501
            initialize without Acp-Connection-Id -> a new connection (its own agent), 200 with
            the agent's answer as JSON, Acp-Connection-Id and the affinity cookie
            (503: too many connections; 504: no answer in time; 502: the agent failed)
            other without Acp-Connection-Id -> 400; unknown connection -> 404
            a session-scoped method without Acp-Session-Id -> 400; an Acp-Session-Id the
            connection does not know -> 404; else forwarded, 202
    GET     Accept without text/event-stream -> 406; no Acp-Connection-Id -> 400; unknown
            connection or session -> 404; that stream already open -> 409; else 200 SSE:
            Acp-Session-Id selects the session's stream, none the connection's
    DELETE  no Acp-Connection-Id -> 400; unknown -> 404; else the connection ends (ladder), 202

What the agent sends waits (bounded, ``Outlet``) for its stream's GET: the answers to
``session/new``/``load``/``resume`` and connection-level traffic on the connection stream,
each session's traffic on its own (``_relay_ledger`` decides). An idle stream carries a keepalive
comment every ``keepalive`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING

from ..aio import timeout_on
from ..core import parse_json
from ..net import (
    CONNECTION_ID_HEADER,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    SESSION_ID_HEADER,
    SESSION_SCOPED_METHODS,
    SSE_KEEPALIVE,
    WS_POLICY,
    encode_sse,
)
from ._asgi import ClientGone, Receive, Refused, Scope, Send, header_text, read_body, respond, respond_error
from ._outlet import Outlet
from ._relay_ledger import CONNECTION, INITIALIZE_REPLY
from ._served import ServedConnection

if TYPE_CHECKING:
    from ._server import RemoteServer

logger = logging.getLogger("acp_driver.remote.server")

_CONN = CONNECTION_ID_HEADER.lower().encode()
_SESSION = SESSION_ID_HEADER.lower().encode()


class HttpConnection:
    """The Streamable HTTP side of one served connection: its streams' outlets."""

    def __init__(self, conn: ServedConnection, max_buffered: int) -> None:
        self.conn = conn
        self.max_buffered = max_buffered
        self.outlets: dict[str | None, Outlet] = {}
        self.outlet(None)
        self.attached: set[str | None] = set()
        self.initialized: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        conn.on_message = self._on_message
        conn.on_end.append(self._on_end)

    def outlet(self, key: str | None) -> Outlet:
        outlet = self.outlets.get(key)
        if outlet is None:
            outlet = self.outlets[key] = Outlet(
                self.max_buffered, functools.partial(self.conn.output_pressure, ("http", key))
            )
        return outlet

    def _on_message(self, text: bytes, route: str) -> None:
        if route == INITIALIZE_REPLY and not self.initialized.done():
            self.initialized.set_result(text)
            return
        key = None if route in (CONNECTION, INITIALIZE_REPLY) else route
        if not self.outlet(key).put(text):
            stream = "the connection stream" if key is None else f"the stream of session {key}"
            self.conn.end(f"{stream} is not read (over {self.max_buffered} bytes waiting)", WS_POLICY)

    def _on_end(self, reason: str, code: int) -> None:
        for outlet in self.outlets.values():
            outlet.close()
        if not self.initialized.done():
            self.initialized.set_exception(ConnectionError(reason))
            self.initialized.exception()  # retrieved: nobody may be waiting


async def serve_http(server: RemoteServer, scope: Scope, receive: Receive, send: Send) -> None:
    method = scope["method"]
    if method == "POST":
        await _post(server, scope, receive, send)
    elif method == "GET":
        await _get(server, scope, receive, send)
    elif method == "DELETE":
        await _delete(server, scope, send)
    else:
        await respond_error(
            send, 405, f"{method} is not served on this endpoint", [(b"allow", b"GET, POST, DELETE")]
        )


def _media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


async def _post(server: RemoteServer, scope: Scope, receive: Receive, send: Send) -> None:
    if _media_type(header_text(scope, b"content-type")) != CONTENT_TYPE_JSON:
        await respond_error(send, 415, "Content-Type must be application/json")
        return
    limit = server.settings.max_message_bytes
    try:
        body = await read_body(receive, limit)
    except ClientGone:
        return
    if body is None:
        await respond_error(send, 413, f"message larger than {limit} bytes")
        return
    try:
        message = parse_json(body)
    except ValueError as exc:
        await respond_error(send, 400, f"body is not JSON: {exc}")
        return
    if isinstance(message, list):
        await respond_error(send, 501, "batch requests are not supported")
        return
    if not isinstance(message, dict):
        await respond_error(send, 400, "body is not a JSON-RPC message (an object)")
        return
    connection_id = header_text(scope, _CONN)
    rpc_method = message.get("method")
    if connection_id is None:
        if rpc_method == "initialize" and "id" in message:
            await _initialize(server, body, message, send)
        else:
            await respond_error(send, 400, f"missing {CONNECTION_ID_HEADER} (only initialize may omit it)")
        return
    http = server.http_connections.get(connection_id)
    if http is None:
        await respond_error(send, 404, f"unknown {CONNECTION_ID_HEADER}")
        return
    session_id = header_text(scope, _SESSION)
    if rpc_method in SESSION_SCOPED_METHODS and session_id is None:
        await respond_error(send, 400, f"{rpc_method} needs the {SESSION_ID_HEADER} header")
        return
    if session_id is not None and session_id not in http.conn.inflight.sessions:
        await respond_error(send, 404, f"unknown {SESSION_ID_HEADER} for this connection")
        return
    http.conn.from_client(body, message)
    await respond(send, 202)


async def _initialize(server: RemoteServer, body: bytes, message: dict[str, object], send: Send) -> None:
    try:
        conn = await server.open_connection("http")
    except Refused as exc:
        await respond_error(send, exc.status, exc.message)
        return
    http = HttpConnection(conn, server.settings.max_buffered_bytes)
    server.http_connections[conn.id] = http
    conn.start()
    conn.from_client(body, message)
    try:
        async with timeout_on(server.clock, server.settings.initialize_timeout):
            answer = await asyncio.shield(http.initialized)
    except TimeoutError:
        conn.end("the agent did not answer initialize in time")
        await respond_error(send, 504, "the agent did not answer initialize in time")
        return
    except ConnectionError as exc:
        await respond_error(send, 502, f"the agent failed: {exc}")
        return
    except BaseException:
        conn.end("the client went away during initialize")
        raise
    headers = [(_CONN, conn.id.encode()), server.affinity_cookie()]
    await respond(send, 200, answer, headers, CONTENT_TYPE_JSON.encode())


async def _get(server: RemoteServer, scope: Scope, receive: Receive, send: Send) -> None:
    if CONTENT_TYPE_SSE not in (header_text(scope, b"accept") or "").lower():
        await respond_error(send, 406, f"Accept must include {CONTENT_TYPE_SSE} (or upgrade to a WebSocket)")
        return
    connection_id = header_text(scope, _CONN)
    if connection_id is None:
        await respond_error(send, 400, f"missing {CONNECTION_ID_HEADER}")
        return
    http = server.http_connections.get(connection_id)
    if http is None:
        await respond_error(send, 404, f"unknown {CONNECTION_ID_HEADER}")
        return
    key = header_text(scope, _SESSION)
    if key is not None and key not in http.conn.inflight.sessions:
        await respond_error(send, 404, f"unknown {SESSION_ID_HEADER} for this connection")
        return
    if key in http.attached:
        await respond_error(send, 409, "that stream is already open")
        return
    await _stream(server, http, key, receive, send)


async def _stream(
    server: RemoteServer, http: HttpConnection, key: str | None, receive: Receive, send: Send
) -> None:
    conn = http.conn
    outlet = http.outlet(key)
    http.attached.add(key)
    conn.streams_open += 1
    loop = asyncio.get_running_loop()

    async def client_gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = loop.create_task(client_gone())
    try:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", CONTENT_TYPE_SSE.encode()),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
                ],
            }
        )
        keepalive = server.settings.keepalive
        while not gone.done():
            ready = loop.create_task(outlet.wait())
            done, _ = await asyncio.wait(
                {ready, gone}, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
            )
            if ready not in done:
                ready.cancel()
                if not done:
                    await send({"type": "http.response.body", "body": SSE_KEEPALIVE, "more_body": True})
                continue
            items = outlet.take_all()
            if items:
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"".join(map(encode_sse, items)),
                        "more_body": True,
                    }
                )
            if outlet.closed:
                break
        if not gone.done():
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        gone.cancel()
        with contextlib.suppress(BaseException):
            await gone
        http.attached.discard(key)
        conn.streams_open -= 1
        conn.last_activity = conn.clock.now()  # the idle sweep's clock


async def _delete(server: RemoteServer, scope: Scope, send: Send) -> None:
    connection_id = header_text(scope, _CONN)
    if connection_id is None:
        await respond_error(send, 400, f"missing {CONNECTION_ID_HEADER}")
        return
    http = server.http_connections.get(connection_id)
    if http is None:
        await respond_error(send, 404, f"unknown {CONNECTION_ID_HEADER}")
        return
    http.conn.end("the client ended the connection (DELETE)")
    await respond(send, 202)
