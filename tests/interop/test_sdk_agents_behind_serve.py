"""Agents we did not write, behind our server: ``acp-driver serve -- <SDK agent>`` relays each
official SDK's stdio agent (``peers/sdk_agent.py`` under Python SDK 0.12.1 and 1.0.0rc3,
``peers/ts_agent.mjs`` under the TypeScript SDK) to our ``connect`` over WebSocket and over
Streamable HTTP. What must survive the extra hop: the prompt and its streamed updates,
``session/cancel`` ending the turn ``cancelled``, the permission request pending at the cancel
answered ``cancelled`` (the agent says so), and the agent process reaped by ``serve`` when the
connection ends mid-turn. One ``serve`` per SDK; both profiles in each test."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import AgentMessageChunk, ClientServices, PermissionRequest, Resolution, connect

from ..remote.serving import ServeProcess, descendants
from ..waiting import eventually
from .sdk_peers import SdkPeer

pytestmark = pytest.mark.interop

LIMIT = 60  # seconds: a bound on each test, never a timing assertion
PROFILES = ("ws", "http")


def url_for(serve: ServeProcess, scheme: str) -> str:
    return scheme + serve.url[len("http") :]


async def test_an_sdk_agent_behind_serve(sdk: SdkPeer, tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def never_answer(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    env = {**os.environ, **sdk.env}
    async with ServeProcess.start("--cancel-budget", "4", "--", *sdk.script("agent"), env=env) as serve:
        for scheme in PROFILES:
            asked.clear()
            services = ClientServices(permission=never_answer)
            async with (
                asyncio.timeout(LIMIT),
                await connect(url_for(serve, scheme), services=services) as agent,
            ):
                session = await agent.new_session(tmp_path)
                # A prompt and its streamed update.
                done = session.prompt("hello through the relay")
                texts = [u.text async for u in done if isinstance(u, AgentMessageChunk)]
                assert (await done).resolution is Resolution.COMPLETED, (scheme, serve.lines)
                assert any("hello through the relay" in t for t in texts), texts
                # session/cancel ends a sleeping turn cancelled.
                sleeping = session.prompt("/sleep 600000")
                async for update in sleeping:
                    assert isinstance(update, AgentMessageChunk)
                    assert update.text == "sleeping"
                    break
                outcome = await sleeping.cancel()
                assert outcome.resolution is Resolution.CANCELLED, (scheme, outcome)
                assert (await sleeping).stop_reason == "cancelled"
                # A permission request pending at the cancel: answered cancelled, the agent says so.
                asking = session.prompt("/permission")
                await asked.wait()
                outcome = await asking.cancel()
                assert outcome.resolution is Resolution.CANCELLED, (scheme, outcome)
                assert (await asking).stop_reason == "cancelled"
                said = [u.text for u in asking.late_updates if isinstance(u, AgentMessageChunk)]
                said += [u.text async for u in asking if isinstance(u, AgentMessageChunk)]
                assert "permission outcome: cancelled" in said, said
                # The connection ends mid-turn: serve reaps the agent.
                session.prompt("/sleep 600000")
                assert descendants(serve.process.pid), "serve runs no agent"
            await eventually(lambda: not descendants(serve.process.pid), f"serve reaped the {sdk.id} agent")
