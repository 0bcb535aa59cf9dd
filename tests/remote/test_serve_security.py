"""Who may connect and how much: the bearer token, Origin, the loopback rule and every limit,
each with its HTTP status or WebSocket close code."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import pytest
import websockets

from acp_driver.remote import ConfigError, ServerSettings

from ..waiting import eventually
from . import serving
from .serving import INIT_PARAMS, HttpClient, WsClient, pid_gone, ws_url

make_server = serving.make_server  # the fixture

INIT = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
JSON = {"Content-Type": "application/json"}


async def _ws_status(url: str, **kwargs: Any) -> int:
    """The HTTP status that refused a WebSocket upgrade."""
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(ws_url(url), **kwargs):
            pass
    status: int = refused.value.response.status_code
    return status


async def test_token_required_on_every_request(make_server: Any) -> None:
    server = await make_server(token="s3cret")
    async with HttpClient.connect(server.url) as http:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Basic s3cret"},
            {"Authorization": "Bearer"},
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, **headers})
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert server.connections == {}
        good = {**JSON, "Authorization": "Bearer s3cret"}
        response = await http.client.post(server.url, content=INIT, headers=good)
        assert response.status_code == 200
        # GET and DELETE too, even with a valid connection id.
        cid = response.headers["acp-connection-id"]
        get = await http.client.get(
            server.url, headers={"Accept": "text/event-stream", "Acp-Connection-Id": cid}
        )
        assert get.status_code == 401
        delete = await http.client.request("DELETE", server.url, headers={"Acp-Connection-Id": cid})
        assert delete.status_code == 401
        assert cid in server.connections
    assert await _ws_status(server.url) == 401
    assert await _ws_status(server.url, additional_headers={"Authorization": "Bearer wrong"}) == 401
    async with WsClient.connect(server.url, additional_headers={"Authorization": "Bearer s3cret"}) as client:
        assert (await client.call("initialize", INIT_PARAMS))["result"]["protocolVersion"] == 1


async def test_cross_origin_requests_are_refused_unless_allowed(make_server: Any) -> None:
    server = await make_server(allow_origins=["https://editor.example"])
    same = f"http://127.0.0.1:{server.port}"
    async with HttpClient.connect(server.url) as http:
        for origin, status in (
            ("https://evil.example", 403),
            ("null", 403),
            (same, 200),
            ("https://editor.example", 200),
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, "Origin": origin})
            assert response.status_code == status, origin
    assert await _ws_status(server.url, origin="https://evil.example") == 403
    async with WsClient.connect(server.url, origin="https://editor.example") as client:
        assert "result" in await client.call("initialize", INIT_PARAMS)


async def test_too_many_connections_get_503(make_server: Any) -> None:
    server = await make_server(max_connections=1)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        assert await _ws_status(server.url) == 503
        async with HttpClient.connect(server.url) as http:
            response = await http.client.post(server.url, content=INIT, headers=JSON)
            assert response.status_code == 503
        assert len(server.connections) == 1


async def test_a_frame_over_the_limit_closes_with_1009(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with WsClient.connect(server.url) as client:
        (conn,) = server.connections.values()
        await client.ws.send('{"jsonrpc":"2.0","method":"x","params":"' + "a" * 2000 + '"}')
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1009
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(conn.backend.pid)


async def test_the_limit_counts_bytes_not_characters(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with WsClient.connect(server.url) as client:
        # 600 characters, 1200 bytes of UTF-8: over the limit.
        await client.ws.send('{"jsonrpc":"2.0","method":"x","params":"' + "é" * 600 + '"}')
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1009


async def test_a_body_over_the_limit_gets_413(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with HttpClient.connect(server.url) as http:
        response = await http.client.post(server.url, content=b" " * 1001 + INIT, headers=JSON)
        assert response.status_code == 413
        assert server.connections == {}


async def test_an_idle_websocket_is_closed_1008_and_its_agent_reaped(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.3)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        (conn,) = server.connections.values()
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1008
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert "idle" in (conn.end_reason or "")
    assert pid_gone(conn.backend.pid)


async def test_a_busy_websocket_is_not_idle(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.2)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        # A request in flight (the agent sleeps silently for longer than the idle timeout).
        rid = await client.request("_acp_driver/sleep", {"ms": 800})
        answer, _ = await client.answer_of(rid)
        assert "result" in answer


async def test_an_idle_http_connection_without_streams_is_ended(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.3)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        (conn,) = server.connections.values()
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert "idle" in (conn.end_reason or "")
        assert (await http.delete()).status_code == 404


async def test_an_http_connection_awaiting_its_initialize_answer_is_not_idle(make_server: Any) -> None:
    # The agent takes longer to start than the idle timeout: its client waits on the initialize POST.
    slow_start = ["sh", "-c", 'sleep 1; exec "$0" "$@"', *serving.REFERENCE]
    server = await make_server(slow_start, idle_timeout=0.2)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()  # 200, not the connection ended as idle
        (conn,) = server.connections.values()
        assert not conn.ending


def test_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ConfigError, match="without --token"):
        ServerSettings(host="0.0.0.0").check()
    ServerSettings(host="0.0.0.0", token="t").check()
    ServerSettings(host="::1").check()
    for bad in (
        {"instance": "has space"},
        {"certfile": "c.pem"},
        {"max_connections": 0},
        {"idle_timeout": 0},
        {"cancel_budget": -1},
        {"allow_origins": ["not an origin"]},
        {"token": "has space"},
    ):
        with pytest.raises(ConfigError):
            ServerSettings(**bad).check()


async def test_cli_refuses_a_public_bind_without_a_token() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert b"without --token" in err


async def test_query_and_headers_never_reach_the_command(make_server: Any) -> None:
    """The agent's argv is fixed when the server starts: a client's query string or headers are
    not read for it (the connection serves the configured agent whatever the client sends)."""
    server = await make_server()
    url = server.url + "?cmd=/bin/false&agent=/bin/false"
    async with WsClient.connect(url, additional_headers={"X-Agent": "/bin/false"}) as client:
        init = await client.call("initialize", INIT_PARAMS)
        assert init["result"]["agentInfo"]["name"] == "acp-driver-reference-agent"
    await eventually(lambda: not server.connections, "the connection to end")
