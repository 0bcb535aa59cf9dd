"""The official Python SDK's remote CLIENTS (1.0.0rc3 ``[http]``: ``acp.ws`` and ``acp.http``)
against OUR server, ``acp-driver serve`` (a subprocess serving the bundled reference agent).

Each test runs over both profiles: the SDK's WebSocket transport, and its Streamable HTTP
transport (over ``http://`` its httpx2 client speaks HTTP/1.1: one TCP connection per stream).
The SDK client runs in the test process with its ``ClientSideConnection``; the server and its
agents are real processes on loopback sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ..remote.serving import ServeProcess, descendants
from ..waiting import eventually

pytestmark = pytest.mark.interop

acp = pytest.importorskip("acp")


class RecordingClient:
    """The SDK's ``Client`` protocol: records updates, answers permission with the first allow."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.got_update = asyncio.Event()
        self.permission_requests = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.got_update.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        self.permission_requests += 1
        allow = next(o for o in options if str(o.kind).startswith("allow"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    def texts(self) -> list[str]:
        return [u["content"]["text"] for u in self.updates if u.get("sessionUpdate") == "agent_message_chunk"]


@contextlib.asynccontextmanager
async def sdk_connection(url: str, profile: str, client: RecordingClient) -> AsyncIterator[Any]:
    if profile == "websocket":
        from acp.ws import create_websocket_stream

        transport = await create_websocket_stream("ws" + url[len("http") :])
    else:
        from acp.http import create_http_stream

        transport = create_http_stream(url)
    conn = acp.connect_to_agent(client, transport)
    try:
        yield conn
    finally:
        await conn.close()


async def _session(conn: Any) -> str:
    from acp.schema import ClientCapabilities

    init = await conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
    )
    assert init.protocol_version == acp.PROTOCOL_VERSION
    session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
    sid: str = session.session_id
    return sid


def _text(text: str) -> list[Any]:
    from acp.schema import TextContentBlock

    return [TextContentBlock(type="text", text=text)]


PROFILES = ["websocket", "http"]


@pytest.mark.parametrize("profile", PROFILES)
async def test_sdk_client_prompt_streams_and_answers(profile: str) -> None:
    async with ServeProcess.start() as serve:
        client = RecordingClient()
        async with sdk_connection(serve.url, profile, client) as conn:
            sid = await _session(conn)
            response = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=_text("/stream 3 0")), 30)
            assert response.stop_reason == "end_turn"
            assert client.texts() == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"]
        await eventually(
            lambda: descendants(serve.process.pid) == [], "the agent to be reaped after the SDK closed"
        )


@pytest.mark.parametrize("profile", PROFILES)
async def test_sdk_client_session_cancel_ends_the_turn_cancelled(profile: str) -> None:
    async with ServeProcess.start() as serve:
        client = RecordingClient()
        async with sdk_connection(serve.url, profile, client) as conn:
            sid = await _session(conn)
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=_text("/stream 1000 20")))
            await asyncio.wait_for(client.got_update.wait(), 30)
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 30)
            assert response.stop_reason == "cancelled"
            assert 1 <= len(client.texts()) < 1000


@pytest.mark.parametrize("profile", PROFILES)
async def test_sdk_client_answers_a_permission_request(profile: str) -> None:
    async with ServeProcess.start() as serve:
        client = RecordingClient()
        async with sdk_connection(serve.url, profile, client) as conn:
            sid = await _session(conn)
            response = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=_text("/permission")), 30)
            assert response.stop_reason == "end_turn"
            assert client.permission_requests == 1
            assert any("permission outcome: selected" in t for t in client.texts()), client.texts()


@pytest.mark.parametrize("profile", PROFILES)
async def test_sdk_client_gone_mid_turn_the_server_reaps_the_agent(profile: str) -> None:
    async with ServeProcess.start("--cancel-budget", "2") as serve:
        client = RecordingClient()
        async with sdk_connection(serve.url, profile, client) as conn:
            sid = await _session(conn)
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=_text("/stream 100000 10")))
            await asyncio.wait_for(client.got_update.wait(), 30)
            agents = descendants(serve.process.pid)
            assert agents
        # The SDK closed (WebSocket close / DELETE) with the turn live: the server cancels it.
        turn.cancel()
        with contextlib.suppress(BaseException):
            await turn
        await eventually(lambda: descendants(serve.process.pid) == [], "the agent to be reaped")
