"""``serve`` relaying ACP v2: a connection that ends while a session works (its prompt answered at
insertion) is still cancelled -- session/cancel for the working session, the held prompts
withdrawn -- and its agent reaped; ``--protocol`` caps the version a connection speaks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import ErrorCode, RpcError, Rung
from acp_driver.driver import connect

from ..waiting import eventually
from . import serving
from .serving import WsClient, pid_gone, text_prompt

make_server = serving.make_server  # the fixture

V2_INIT = {
    "protocolVersion": 2,
    "info": {"name": "t", "version": "0"},
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"},
    "clientCapabilities": {},
}
IGNORES = [sys.executable, "-m", "acp_driver", "agent", "--behavior", "ignore-cancel"]


async def _session(client: WsClient) -> str:
    init = await client.call("initialize", V2_INIT)
    assert init["result"]["protocolVersion"] == 2
    new = await client.call("session/new", {"cwd": "/", "mcpServers": []})
    sid: str = new["result"]["sessionId"]
    return sid


async def test_a_working_v2_session_is_cancelled_when_its_connection_ends(make_server: Any) -> None:
    server = await make_server(cancel_budget=2.0)
    async with WsClient.connect(server.url) as client:
        sid = await _session(client)
        rid = await client.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 100000 20")}
        )
        answer, _ = await client.answer_of(rid)
        assert "messageId" in answer["result"]  # answered at insertion: no prompt in flight any more
        (conn,) = server.connections.values()
        await eventually(lambda: sid in conn.inflight.working, "the work to be seen running")
        pid = conn.backend.pid
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert conn.ladder is not None
    assert [r for _, r in conn.ladder.taken] == [Rung.SESSION_CANCEL]  # the polite agent idled cancelled
    assert pid is not None
    assert pid_gone(pid)


async def test_held_prompts_are_withdrawn_at_the_middle_rung(make_server: Any) -> None:
    server = await make_server(argv=IGNORES, cancel_budget=2.0)
    async with WsClient.connect(server.url) as client:
        sid = await _session(client)
        await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 100000 20")})
        held = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("held")})
        (conn,) = server.connections.values()
        await eventually(lambda: any(r.id == held for r in conn.inflight.prompts()), "the held prompt")
        await eventually(lambda: sid in conn.inflight.working, "the work to be seen running")
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert conn.ladder is not None
    rungs = [r for _, r in conn.ladder.taken]
    assert rungs[:2] == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST]


async def test_protocol_caps_the_version_a_connection_speaks(make_server: Any) -> None:
    server = await make_server(protocol=1)
    async with WsClient.connect(server.url) as client:
        init = await client.call("initialize", V2_INIT)
        assert init["result"]["protocolVersion"] == 1
        assert "agentCapabilities" in init["result"]


@pytest.mark.parametrize("profile", ["http", "ws"])
async def test_a_session_the_server_does_not_know_is_not_found_on_both_profiles(
    make_server: Any, profile: str, tmp_path: Path
) -> None:
    """v2 counts closing an unknown session as a success (``{}`` or ``-32002``). Over Streamable
    HTTP, ``serve`` answers an ``Acp-Session-Id`` it does not know with the RFD's 404 before the
    agent sees anything: our client maps it to ``-32002`` (what the agent answers over WebSocket),
    not to an internal error; the connection goes on and so does ``session.close()``."""
    server = await make_server()
    url = server.url if profile == "http" else serving.ws_url(server.url)
    async with asyncio.timeout(60), await connect(url, protocol=2) as agent:
        with pytest.raises(RpcError) as raised:
            await agent.request("session/close", {"sessionId": "nope"})
        assert raised.value.code == ErrorCode.RESOURCE_NOT_FOUND, raised.value
        if profile == "http":
            assert "the server does not know session 'nope'" in str(raised.value)
        session = await agent.new_session(tmp_path)
        assert (await session.prompt("hello")).stop_reason == "end_turn"  # the connection goes on
        await session.close()
        assert agent.connection.is_open


async def test_a_v2_turn_ended_by_its_idle_is_no_longer_live(make_server: Any) -> None:
    """The relay asks the host's lifecycle which turn is live: a turn inserted and ended by its
    idle leaves no turn in flight."""
    server = await make_server(cancel_budget=2.0)
    async with WsClient.connect(server.url) as client:
        sid = await _session(client)
        rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("hello")})
        await client.answer_of(rid)
        (conn,) = server.connections.values()
        await eventually(lambda: sid not in conn.inflight.working, "the turn's idle to end it")
        assert not conn.inflight.in_flight
