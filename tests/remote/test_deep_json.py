"""JSON nested deeper than any parser's stack (``[`` x 100 000) is a parse error everywhere a
message is read -- ``serve`` (WebSocket and Streamable HTTP) and both network clients -- never a
``RecursionError`` that ends a read loop; what comes next is read as usual.

Everything is real: ``serve`` with the reference agent; the clients' peers are a WebSocket
server (the ``websockets`` library) and a Streamable HTTP server written out by hand
(``handmade.py``), each in this process on a loopback socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection, serve

from acp_driver.aio import Connection
from acp_driver.net import open_transport

from ..waiting import eventually
from . import serving
from .handmade import http_peer
from .serving import INIT_PARAMS, HttpClient, WsClient

DEEP = b"[" * 100_000
LIMIT = 60
make_server = serving.make_server  # the fixture
PING = {"jsonrpc": "2.0", "id": "p", "method": "_test/ping", "params": {}}


async def test_serve_answers_a_deep_frame_with_a_parse_error_and_goes_on(make_server: Any) -> None:
    server = await make_server()
    async with asyncio.timeout(LIMIT), WsClient.connect(server.url) as client:
        await client.ws.send(DEEP.decode())
        error = await client.next()
        assert error["error"]["code"] == -32700
        answer = await client.call("initialize", INIT_PARAMS)
        assert answer["result"]["protocolVersion"] == 1


async def test_serve_answers_a_deep_post_400_and_goes_on(make_server: Any) -> None:
    server = await make_server()
    async with asyncio.timeout(LIMIT), HttpClient.connect(server.url) as http:
        response = await http.client.post(
            http.url, content=DEEP, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400
        assert "body is not JSON" in response.text
        await http.initialize()


async def test_the_websocket_client_answers_a_deep_frame_with_a_parse_error() -> None:
    received: list[Any] = []

    async def handler(ws: ServerConnection) -> None:
        await ws.send(DEEP.decode())
        await ws.send(json.dumps(PING))
        async for frame in ws:
            received.append(orjson.loads(frame))

    async with asyncio.timeout(LIMIT), serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        conn = Connection(name="deep")
        conn.on_request("_test/ping", _pong)
        transport = await open_transport(f"ws://127.0.0.1:{port}/acp", conn)
        try:
            await eventually(lambda: len(received) == 2, "the client's two answers")
            error, pong = received
            assert error["id"] is None
            assert error["error"]["code"] == -32700
            assert pong == {"jsonrpc": "2.0", "id": "p", "result": {"pong": True}}
        finally:
            await conn.aclose()
            await transport.wait_closed()


async def test_the_http_client_answers_a_deep_event_with_a_parse_error() -> None:
    async with asyncio.timeout(LIMIT), http_peer([DEEP, orjson.dumps(PING)]) as peer:
        conn = Connection(name="deep")
        conn.on_request("_test/ping", _pong)
        transport = await open_transport(peer.url, conn)
        try:
            init = await conn.request("initialize", INIT_PARAMS)
            assert init["protocolVersion"] == 1
            await eventually(lambda: len(peer.posted) == 2, "the client's two answers")
            error, pong = peer.posted
            assert error["id"] is None
            assert error["error"]["code"] == -32700
            assert pong == {"jsonrpc": "2.0", "id": "p", "result": {"pong": True}}
        finally:
            peer.done.set()
            await conn.aclose()
            await transport.wait_closed()


async def _pong(params: Any) -> Any:
    return {"pong": True}


async def test_serve_ends_a_connection_whose_message_is_too_deep_to_relay(make_server: Any) -> None:
    """A pretty-printed message is encoded again on one line for the agent; one nested deeper
    than that encoding goes (1000 levels) ends the connection with a reason, never an exception."""
    server = await make_server()
    deep = b"[" * 1000 + b"]" * 1000
    async with asyncio.timeout(LIMIT), WsClient.connect(server.url) as client:
        await client.ws.send((b'{"jsonrpc": "2.0",\n "method": "_x", "params": %s}' % deep).decode())
        await eventually(lambda: not server.connections or next(iter(server.connections.values())).ending)
        with contextlib.suppress(Exception):
            await client.next()
        assert client.ws.close_code == 1007
