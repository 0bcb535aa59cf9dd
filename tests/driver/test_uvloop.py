"""The host driver and the agent runtime on uvloop, the event loop that ASGI servers (uvicorn)
and many hosts run on: the library may assume nothing of asyncio's loop beyond its public API.

Running the suite on uvloop found two such assumptions, both in ``aio.open_pipes``:

- it set the pipe's read size through ``max_size``, an attribute only CPython's pipe transport
  has: every ``launch`` failed with ``AttributeError``;
- it attached the connection only once ``connect_read_pipe`` had returned. uvloop delivers the
  data already waiting in the pipe during that await; an agent on the runtime handled the
  ``initialize`` found there, and its answer stayed queued, never written: the host timed out.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import uvloop

from acp_driver.core import Resolution
from acp_driver.driver import ClientServices, PermissionRequest

from ._helpers import AGENTS, close_and_check, reference, running, take

UVLOOP_AGENT = [sys.executable, str(AGENTS / "uvloop_reference.py")]
AGENTS_BY_LOOP = {"agent-on-asyncio": reference("polite"), "agent-on-uvloop": UVLOOP_AGENT}


def on_uvloop() -> bool:
    return type(asyncio.get_running_loop()).__module__.startswith("uvloop")


@pytest.mark.parametrize("agent_argv", AGENTS_BY_LOOP.values(), ids=AGENTS_BY_LOOP.keys())
@pytest.mark.parametrize("protocol", [1, 2])
def test_turns_and_a_cancel_on_uvloop(agent_argv: list[str], protocol: int, tmp_path: Path) -> None:
    uvloop.run(turns_and_a_cancel(agent_argv, protocol, tmp_path))


async def turns_and_a_cancel(agent_argv: list[str], protocol: int, tmp_path: Path) -> None:
    assert on_uvloop()
    async with asyncio.timeout(60), running(agent_argv, protocol=protocol) as agent:
        session = await agent.new_session(str(tmp_path))
        done = await session.prompt("/stream 3 0")
        assert done.stop_reason == "end_turn"
        turn = session.prompt("/stream 1 0\n/sleep 60000")
        assert len(await take(turn, 1)) == 1  # the agent is in the turn
        outcome = await turn.cancel()
        assert outcome.resolved_by == "session_cancel"
        assert (await turn).stop_reason == "cancelled"
        again = await session.prompt("/stream 1 0")  # the session goes on
        assert again.stop_reason == "end_turn"
        await close_and_check(agent)


@pytest.mark.parametrize("agent_argv", AGENTS_BY_LOOP.values(), ids=AGENTS_BY_LOOP.keys())
def test_a_cancel_answers_the_pending_permission_on_uvloop(agent_argv: list[str], tmp_path: Path) -> None:
    uvloop.run(a_cancel_answers_the_pending_permission(agent_argv, tmp_path))


async def a_cancel_answers_the_pending_permission(agent_argv: list[str], tmp_path: Path) -> None:
    assert on_uvloop()
    asked = asyncio.Event()

    async def never_decides(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with (
        asyncio.timeout(60),
        running(agent_argv, services=ClientServices(permission=never_decides)) as agent,
    ):
        session = await agent.new_session(str(tmp_path))
        turn = session.prompt("/permission")
        await asyncio.wait(
            [asyncio.ensure_future(asked.wait()), asyncio.ensure_future(turn.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert asked.is_set(), await turn
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        [tool] = turn.tool_calls.values()
        assert tool.cancelled
        await close_and_check(agent)
