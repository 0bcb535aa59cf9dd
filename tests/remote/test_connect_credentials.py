"""What ``connect`` sends besides ACP: ``headers`` (credentials) and cookies, on both profiles;
and what happens when the server refuses a POST (Streamable HTTP): the request it carried fails
with a clear error, exactly once, and the connection goes on.

The server is the official SDK's app behind a small ASGI wrapper (``peers/sdk_server.py``) that
records the headers of every request (``Server.seen``), requires a bearer token with
``token=``, and with ``cookie=True`` sets an affinity cookie on ``initialize`` (and on the
WebSocket handshake) and refuses every later request that does not send it back.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import ssl
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import RpcError
from acp_driver.driver import AgentMessageChunk, AgentStartError, Resolution, connect

from ..waiting import eventually
from .conftest import PROFILES

LIMIT = 60


@pytest.mark.parametrize("profile", PROFILES)
async def test_headers_reach_the_server(sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = sdk_server(token="s3cret")
    with pytest.raises(AgentStartError) as refused:
        await connect(server.url(profile))
    assert "401" in str(refused.value) or "403" in str(refused.value)
    async with (
        asyncio.timeout(LIMIT),
        await connect(server.url(profile), headers={"Authorization": "Bearer s3cret"}) as agent,
    ):
        session = await agent.new_session(tmp_path)
        assert (await session.prompt("hi")).resolution is Resolution.COMPLETED
    seen = await server.seen()
    accepted = [r for r in seen if r["authorization"] == "Bearer s3cret"]
    assert accepted, seen
    if profile == "http":
        # Every request of the connection carried it: POSTs, event streams, the DELETE.
        assert {r["method"] for r in accepted} >= {"POST", "GET", "DELETE"}
        assert all(r["authorization"] == "Bearer s3cret" for r in seen if r["connection"])


async def test_http_cookies_are_returned_on_every_request(sdk_server: Any, tmp_path: Path) -> None:
    server = sdk_server(cookie=True)
    async with asyncio.timeout(LIMIT), await connect(server.http) as agent:
        # The server refuses (403) any request naming the connection without its cookie: a
        # session and a turn prove the cookie set on initialize came back each time.
        session = await agent.new_session(tmp_path)
        updates = [u async for u in session.prompt("with cookies")]
        assert [u.text for u in updates if isinstance(u, AgentMessageChunk)] == ["with cookies"]
    seen = await server.seen()
    later = [r for r in seen if r["connection"]]
    assert later
    assert all(r["cookie"] and r["cookie"].startswith("affinity=") for r in later), later


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_caller_jar_carries_cookies_across_reconnects(
    sdk_server: Any, profile: str, tmp_path: Path
) -> None:
    server = sdk_server(cookie=True)
    jar = http.cookiejar.CookieJar()
    async with asyncio.timeout(LIMIT):
        async with await connect(server.url(profile), cookies=jar) as agent:
            await agent.new_session(tmp_path)
        assert [c.name for c in jar] == ["affinity"]  # what the server set is the caller's
        async with await connect(server.url(profile), cookies=jar) as agent:
            await agent.new_session(tmp_path)
    seen = await server.seen()
    opening = [r for r in seen if not r["connection"] and r["method"] in ("POST", "WS")]
    assert len(opening) == 2
    assert opening[0]["cookie"] is None
    assert opening[1]["cookie"] == f"affinity={next(iter(jar)).value}"  # the reconnect sent it


async def test_a_refused_post_fails_its_request_once(sdk_server: Any, tmp_path: Path) -> None:
    server = sdk_server(cookie=True)
    jar = http.cookiejar.CookieJar()
    async with asyncio.timeout(LIMIT), await connect(server.http, cookies=jar) as agent:
        session = await agent.new_session(tmp_path)
        saved = list(jar)
        jar.clear()  # the server now refuses every POST of this connection (403)
        with pytest.raises(
            RpcError, match=r"POST session/new to .* failed: HTTP 403.*affinity cookie missing"
        ):
            await agent.new_session(tmp_path)
        # A refused prompt fails the turn (an error, not a hang).
        result = await session.prompt("refused")
        assert result.resolution is Resolution.ERROR
        assert result.error is not None
        assert "HTTP 403" in result.error.message
        # A refused notification is reported, not raised.
        transport: Any = agent.peer.transport  # type: ignore[attr-defined]
        agent.connection.notify_nowait("_sdk/note", {})
        await eventually(lambda: transport.failures, "the refused notification to be reported")
        assert "POST _sdk/note" in transport.failures[0]
        assert "HTTP 403" in transport.failures[0]
        # The connection goes on: with the cookie back, requests succeed again.
        for cookie in saved:
            jar.set_cookie(cookie)
        assert await agent.request("_sdk/echo", {"back": True}) == {"back": True}
        assert agent.connection.is_open


async def test_nothing_listening_is_a_clear_start_error(sdk_server: Any) -> None:
    server = sdk_server()
    server.kill()
    server.process.wait(timeout=30)
    for url in (server.ws, server.http):
        with pytest.raises(AgentStartError, match=r"127\.0\.0\.1"):
            await connect(url, init_timeout=30)
    with pytest.raises(AgentStartError, match="not an ACP URL"):
        await connect("ftp://127.0.0.1/acp")


async def test_an_initialize_answer_that_is_not_json_rpc_fails_at_once() -> None:
    """A 200 whose body is not the JSON-RPC answer (a proxy's page) fails ``initialize`` with the
    body quoted, at once, instead of waiting out ``init_timeout``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        body = b"<html>upstream says hello</html>"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nAcp-Connection-Id: c1\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(LIMIT):
            with pytest.raises(AgentStartError, match="not the JSON-RPC response: <html>upstream says hello"):
                await connect(f"http://127.0.0.1:{port}/acp", init_timeout=3 * LIMIT)
    finally:
        listener.close()
        await listener.wait_closed()


async def test_h2c_prior_knowledge(shared_sdk_server: Any, tmp_path: Path) -> None:
    server = shared_sdk_server
    before = len(await server.seen())
    async with asyncio.timeout(LIMIT), await connect(server.http, http2_prior_knowledge=True) as agent:
        session = await agent.new_session(tmp_path)
        assert (await session.prompt("over h2c")).resolution is Resolution.COMPLETED
    versions = {r["http_version"] for r in (await server.seen())[before:] if r["connection"]}
    assert versions == {"2"}
    # Without the option, cleartext is HTTP/1.1.
    before = len(await server.seen())
    async with asyncio.timeout(LIMIT), await connect(server.http) as agent:
        await agent.new_session(tmp_path)
    assert {r["http_version"] for r in (await server.seen())[before:] if r["connection"]} == {"1.1"}


async def test_tls_both_profiles_and_http2_by_alpn(
    sdk_server: Any, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, key = certificate
    server = sdk_server(tls=(cert, key))
    trust = ssl.create_default_context(cafile=str(cert))
    for url in (server.ws, server.http):
        assert url.startswith(("wss://", "https://"))
        with pytest.raises(AgentStartError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await connect(url)  # not trusted by default
        async with asyncio.timeout(LIMIT), await connect(url, ssl_context=trust) as agent:
            session = await agent.new_session(tmp_path)
            assert (await session.prompt("over TLS")).resolution is Resolution.COMPLETED
    https = [r for r in await server.seen() if r["type"] == "http" and r["connection"]]
    assert https
    assert {r["http_version"] for r in https} == {"2"}  # negotiated by ALPN
