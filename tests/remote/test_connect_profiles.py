"""``connect(url)`` against the official SDK's server, on both profiles (WebSocket, Streamable HTTP).

Each test is a real ``hypercorn`` subprocess serving ``acp.http.asgi.create_asgi_app`` on a
loopback socket, and our host on the other end: turns and their typed updates, both cancels,
the permission pending when the turn is cancelled, the ladder's network rungs (on a fake clock:
each at its exact moment), a server killed mid-turn, reconnect and ``session/load``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import (
    AgentDisconnectedError,
    AgentMessageChunk,
    LadderPolicy,
    RemoteAgent,
    Resolution,
    Rung,
    UserMessageChunk,
    connect,
)

from ..fakeclock import FakeClock
from ..waiting import eventually
from ..wire import first_update
from .conftest import PROFILES

pytestmark = pytest.mark.parametrize("profile", PROFILES)

BUDGET = 8.0
T0 = 1000.0
LIMIT = 60  # seconds: a bound on each test, never a timing assertion


@pytest.mark.both_loops  # our network client on uvloop too (httpx, websockets)
async def test_an_agent_ignoring_cancel_is_disconnected_at_the_close_rung(
    shared_sdk_server: Any, profile: str, tmp_path: Path
) -> None:
    server = shared_sdk_server
    clock = FakeClock(T0)
    async with asyncio.timeout(LIMIT):
        agent = await connect(server.url(profile), ladder=LadderPolicy(budget=BUDGET), clock=clock)
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/ignore-cancel 600000")
        await first_update(turn)
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        clock.advance_to(T0 + BUDGET * 0.5)
        assert turn.ladder is not None
        assert [r for _, r in turn.ladder.taken] == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST]
        assert not turn.done
        assert agent.connection.is_open
        clock.advance_to(T0 + BUDGET * 0.75)  # the close rung: the connection is closed gracefully
        outcome = await canceller
        assert outcome.resolution is Resolution.DISCONNECTED
        assert outcome.resolved_by == "terminate"
        assert outcome.elapsed == BUDGET * 0.75  # fake time: within the budget, exactly at the rung
        result = await turn
        assert result.resolution is Resolution.DISCONNECTED
        assert isinstance(result.error, AgentDisconnectedError)
        assert server.url(profile) in str(result.error)
        # Nothing of the ladder is left; at most the graceful close's grace, on the same clock,
        # which ends at the budget (the grace is the rest of it): then the connection is aborted.
        assert clock.deadlines in ([], [T0 + BUDGET])
        with pytest.raises(AgentDisconnectedError, match="host closed the connection"):
            await agent.new_session(tmp_path)
        await agent.aclose()


async def test_kill_aborts_the_connection(shared_sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = shared_sdk_server
    clock = FakeClock(T0)
    async with asyncio.timeout(LIMIT):
        agent = await connect(server.url(profile), ladder=LadderPolicy(budget=BUDGET), clock=clock)
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/ignore-cancel 600000")
        await first_update(turn)
        turn.kill()  # a second Ctrl-C: straight to the abort
        result = await turn
        assert result.resolution is Resolution.DISCONNECTED
        assert result.cancel is not None
        assert result.cancel.resolved_by == "kill"
        assert "aborted" in str(result.error)
        await agent.aclose()


async def test_server_killed_mid_turn_resolves_everything_at_once(
    sdk_server: Any, profile: str, tmp_path: Path
) -> None:
    server = sdk_server()
    async with asyncio.timeout(LIMIT):
        agent = await connect(server.url(profile), request_timeout=600)
        first = await agent.new_session(tmp_path)
        second = await agent.new_session(tmp_path)
        # Sent first: messages go out in order, so once the turns are running it was delivered.
        request = asyncio.ensure_future(agent.request("_sdk/sleep", {"ms": 600000}))
        turns = [first.prompt("/sleep 600000"), second.prompt("/sleep 600000")]
        for turn in turns:
            await first_update(turn)
        server.kill()
        results = [await turn for turn in turns]
        assert [r.resolution for r in results] == [Resolution.DISCONNECTED] * 2
        assert all(server.url(profile) in str(r.error) for r in results)
        with pytest.raises(AgentDisconnectedError) as failed:
            await request
        assert server.url(profile) in str(failed.value)
        assert "host" not in str(failed.value)  # not the host's doing: the server went away
        assert not agent.connection.is_open
        await agent.aclose()


async def test_reconnect_and_load_the_session(shared_sdk_server: Any, profile: str, tmp_path: Path) -> None:
    server = shared_sdk_server
    async with asyncio.timeout(LIMIT):
        agent: RemoteAgent = await connect(server.url(profile))
        assert agent.supports("load")
        session = await agent.new_session(tmp_path)
        await session.prompt("remember apples")
        sid = session.id
        await agent.aclose()

        again = await connect(server.url(profile))
        loaded = await again.load_session(sid, tmp_path)
        # SDK 1.0.0rc3 over WebSocket may send the replay's notifications after the load's
        # answer (its writer does not keep them in order): wait for them.
        await eventually(lambda: len(loaded.session_updates) >= 2, "the replayed history")
        replayed = list(loaded.session_updates)
        assert [type(u) for u in replayed] == [UserMessageChunk, AgentMessageChunk]
        assert [u.text for u in replayed] == ["remember apples", "noted: apples"]  # type: ignore[attr-defined]
        # The loaded session takes new turns on the new connection.
        echoed = [u async for u in loaded.prompt("after the reconnect")]
        assert [u.text for u in echoed if isinstance(u, AgentMessageChunk)] == ["after the reconnect"]
        await again.aclose()
