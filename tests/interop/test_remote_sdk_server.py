"""Interop: our host's ``connect`` against the official Python SDK 1.0.0rc3's remote server.

The server is ``acp.http.asgi.create_asgi_app`` under hypercorn (a subprocess on a loopback
socket, ``tests/remote/peers/sdk_server.py``) serving an agent written with the SDK; our side is
``acp_driver.driver.connect`` over WebSocket and over Streamable HTTP. What is interop proper
lives here: a prompt and its streamed typed updates, ``session/cancel``, ``$/cancel_request``,
and the permission request pending when the turn is cancelled (answered ``cancelled``). The
network ladder, dropped servers, reconnects, cookies and credentials are in ``tests/remote``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import RequestCancelledError
from acp_driver.driver import (
    AgentMessageChunk,
    ClientServices,
    PermissionRequest,
    Resolution,
    connect,
)

from ..remote.conftest import PROFILES, Server, sdk_servers
from ..waiting import eventually
from ..wire import Wire, first_update

pytestmark = [pytest.mark.interop, pytest.mark.parametrize("profile", PROFILES)]

LIMIT = 60  # seconds: a bound on each test, never a timing assertion


@pytest.fixture
async def sdk_server(tmp_path: Path) -> AsyncIterator[Callable[..., Server]]:
    async with sdk_servers(tmp_path) as start:
        yield start


async def test_prompt_streams_typed_updates(sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = sdk_server()
    async with asyncio.timeout(LIMIT), await connect(server.url(profile)) as agent:
        assert agent.remote
        assert agent.info["name"] == "sdk-remote-agent"
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 5 1")
        updates = [u async for u in turn]
        result = await turn
        assert result.resolution is Resolution.COMPLETED
        assert result.stop_reason == "end_turn"
        assert all(isinstance(u, AgentMessageChunk) for u in updates)
        assert [u.text for u in updates if isinstance(u, AgentMessageChunk)] == [
            f"chunk {i}" for i in range(5)
        ]
        # A second session on the same connection has its own stream (HTTP) and turns.
        other = await agent.new_session(tmp_path)
        assert other.id != session.id
        echoed = [u async for u in other.prompt("hello there")]
        assert [u.text for u in echoed if isinstance(u, AgentMessageChunk)] == ["hello there"]


async def test_session_cancel_resolves_cancelled(sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = sdk_server()
    wire = Wire()
    async with asyncio.timeout(LIMIT), await connect(server.url(profile), tracer=wire.trace) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/sleep 600000")
        await first_update(turn)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert (await turn).stop_reason == "cancelled"
        assert {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session.id}} in wire.out
        assert agent.connection.is_open  # the connection outlives the cancelled turn


async def test_cancel_request_scope_request(sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = sdk_server()
    async with asyncio.timeout(LIMIT), await connect(server.url(profile)) as agent:
        sent: list[Any] = []
        answer = agent.connection.request_nowait("_sdk/sleep", {"ms": 600000}, on_sent=sent.append)
        await eventually(lambda: sent, "the request to be sent")
        outcome = await agent.cancel("request", request_id=sent[0])
        assert outcome.resolved_by == "cancel_request"
        with pytest.raises(RequestCancelledError):
            await answer  # the SDK cancelled the handler and answered -32800
        assert await agent.request("_sdk/echo", {"still": "here"}) == {"still": "here"}


async def test_permission_pending_when_the_turn_is_cancelled(
    sdk_server: Any, profile: str, tmp_path: Path
) -> None:
    server = sdk_server()
    asked = asyncio.Event()

    async def never_answer(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    wire = Wire()
    services = ClientServices(permission=never_answer)
    async with (
        asyncio.timeout(LIMIT),
        await connect(server.url(profile), services=services, tracer=wire.trace) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        await asked.wait()
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        result = await turn
        assert result.stop_reason == "cancelled"
        answers = [m for m in wire.out if "result" in m and isinstance(m["result"], dict)]
        assert {"outcome": {"outcome": "cancelled"}} in [a["result"] for a in answers]
        texts = [u.text for u in turn.late_updates + list(turn.unread) if isinstance(u, AgentMessageChunk)]
        assert "permission outcome: cancelled" in texts
    if profile == "http":
        # The RFD: a permission answer is a session-scoped POST (Acp-Session-Id).
        posts = [r for r in await server.seen() if r["method"] == "POST" and '"outcome"' in r.get("body", "")]
        assert [r["session"] for r in posts] == [session.id]


async def test_run_with_the_default_protocol_completes_against_the_sdks_server(
    sdk_server: Any, profile: str
) -> None:
    """The SDK's remote agent answers ``initialize`` with the client's own version, as its echo
    example does: ``acp-driver run URL`` under its default protocol speaks v1 with it (one
    stderr line says why), completes the turn and exits 0."""
    import os
    import sys

    server = sdk_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "run",
        "--agent",
        server.url(profile),
        "hello over the network",
        env={**os.environ, "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(LIMIT):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert "hello over the network" in out.decode()
    assert "agent claims v2 but answers v1: speaking v1" in err.decode()
