"""The host driver and the agent runtime on uvloop, the event loop that ASGI servers (uvicorn)
and many hosts run on: the library may assume nothing of asyncio's loop beyond its public API.

Running the suite on uvloop found three such assumptions:

- ``aio.open_pipes`` set the pipe's read size through ``max_size``, an attribute only CPython's
  pipe transport has: every ``launch`` failed with ``AttributeError``;
- it attached the connection only once ``connect_read_pipe`` had returned. uvloop delivers the
  data already waiting in the pipe during that await; an agent on the runtime handled the
  ``initialize`` found there, and its answer stayed queued, never written: the host timed out;
- a ``connect_read_pipe`` cancelled half-way (a terminal whose creation is cancelled, a spawn
  interrupted) closes the pipe's descriptor on uvloop but not its file object, which then closes
  that number again later, whatever it has become: ``aio.connect_read_pipe`` never abandons the
  loop's setup half-way, and closes what it made.

(The CLI stays on asyncio's loop; see docs/hosts.md, "Event loops".)
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from acp_driver.aio import connect_read_pipe
from acp_driver.core import Resolution
from acp_driver.driver import ClientServices, PermissionRequest
from acp_driver.services import LocalTerminals

from ..services._helpers import FakeSession, live_members
from ..waiting import eventually
from ._helpers import AGENTS, asked_or_ended, close_and_check, reference, running, take

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
        await asked_or_ended(asked, turn)
        assert asked.is_set(), await turn
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        [tool] = turn.tool_calls.values()
        assert tool.cancelled
        await close_and_check(agent)


RUNNERS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


@pytest.mark.parametrize("run", RUNNERS.values(), ids=RUNNERS.keys())
def test_a_pipe_connect_cancelled_half_way_closes_the_pipe(
    run: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    async def scenario() -> None:
        read_fd, write_fd = os.pipe()
        pipe = os.fdopen(read_fd, "rb", buffering=0)
        connecting = asyncio.ensure_future(connect_read_pipe(asyncio.Protocol, pipe))
        await asyncio.sleep(0)  # one loop iteration: the loop is setting the pipe up
        connecting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await connecting
        await eventually(lambda: pipe.closed, "the pipe's file object closed")
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(read_fd)  # and its descriptor with it, once
        os.close(write_fd)

    run(scenario())


def test_a_terminal_cancelled_while_created_leaves_nothing_on_uvloop(tmp_path: Path) -> None:
    async def scenario() -> None:
        assert on_uvloop()
        session = FakeSession("sess_1", str(tmp_path))
        terminals = LocalTerminals(kill_grace=0.5)
        params = {"sessionId": session.id, "command": "sleep", "args": ["60"]}
        try:
            creating = asyncio.ensure_future(terminals.create(session, session, params))
            await asyncio.sleep(0)  # spawned and registered; the loop is taking its pipe
            (terminal,) = terminals.terminals.values()
            creating.cancel()
            with pytest.raises(asyncio.CancelledError):
                await creating
            assert terminals.terminals == {}
            assert live_members(terminal.pgid) == []
            stdout = terminal.process.popen.stdout
            assert stdout is not None
            await eventually(lambda: stdout.closed, "the terminal's pipe closed")
        finally:
            await terminals.aclose()

    uvloop.run(scenario())
