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
  that number again later, whatever it has become: ``aio.connect_read_pipe`` (and
  ``connect_write_pipe``: uvloop's write side does the same) never abandons the loop's setup
  half-way, and closes what it made.

The tests marked ``both_loops`` run on each loop (tests/conftest.py); so do a terminal cancelled
while created (tests/services/test_terminals.py) and the host's cancels against the official
SDKs' agents (tests/interop/test_driver_with_sdk_agents.py). (The CLI stays on asyncio's loop;
see docs/hosts.md, "Event loops".)
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import uvloop

from acp_driver.aio import Connection, State, connect_read_pipe, connect_write_pipe, open_pipes
from acp_driver.core import Resolution
from acp_driver.driver import ClientServices, PermissionRequest

from ..waiting import DEFAULT_TIMEOUT, eventually
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


@pytest.mark.parametrize("direction", ["read", "write"])
@pytest.mark.both_loops
async def test_a_pipe_connect_cancelled_half_way_closes_the_pipe(direction: str) -> None:
    read_fd, write_fd = os.pipe()
    if direction == "read":
        ours, theirs = read_fd, write_fd
        pipe = os.fdopen(ours, "rb", buffering=0)
        connecting = asyncio.ensure_future(connect_read_pipe(asyncio.Protocol, pipe))
    else:
        ours, theirs = write_fd, read_fd
        pipe = os.fdopen(ours, "wb", buffering=0)
        connecting = asyncio.ensure_future(connect_write_pipe(asyncio.BaseProtocol, pipe))
    await asyncio.sleep(0)  # one loop iteration: the loop is setting the pipe up
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    await eventually(lambda: pipe.closed, "the pipe's file object closed")
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(ours)  # and its descriptor with it, once
    os.close(theirs)


@pytest.mark.parametrize("step", ["write", "read"])
@pytest.mark.both_loops
async def test_open_pipes_cancelled_half_way_leaves_nothing_open(step: str) -> None:
    """Cancelled while the loop takes the write pipe, the write pipe is closed and the read pipe
    is still the caller's; cancelled once attached, while the read side is being set up,
    nothing is left open -- not the connection (it closes as if the peer had ended), not the
    pipe it writes to."""
    to_us, from_peer = os.pipe()
    to_peer, from_us = os.pipe()
    reader = os.fdopen(to_us, "rb", buffering=0)
    writer = os.fdopen(from_us, "wb", buffering=0)
    conn = Connection(name="half-open")
    opening = asyncio.ensure_future(open_pipes(conn, reader, writer))
    await asyncio.sleep(0)  # one iteration: the loop is taking the write pipe
    if step == "read":
        while conn.state is State.NEW:  # step by step: cancelled right after the attach
            assert not opening.done()
            await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    closed = [from_us]
    if step == "read":
        await asyncio.wait_for(conn.wait_closed(), DEFAULT_TIMEOUT)
        await eventually(lambda: reader.closed, "the read pipe's file object closed")
        closed.append(to_us)
    else:
        assert conn.state is State.NEW
        assert not reader.closed
        reader.close()
    await eventually(lambda: writer.closed, "the write pipe's file object closed")
    for fd in closed:
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)
    assert os.read(to_peer, 100) == b""  # the peer sees the end of our output
    os.close(to_peer)
    os.close(from_peer)


@pytest.mark.both_loops
async def test_open_pipes_that_cannot_read_raises_and_leaves_nothing_open() -> None:
    """The read side fails once the connection is attached (here: a read pipe already closed):
    the error reaches the caller, and the connection is closed with its write pipe, not left
    open on a transport that will never read."""
    to_us, from_peer = os.pipe()
    to_peer, from_us = os.pipe()
    reader = os.fdopen(to_us, "rb", buffering=0)
    writer = os.fdopen(from_us, "wb", buffering=0)
    reader.close()
    conn = Connection(name="cannot-read")
    with pytest.raises(ValueError, match="closed file"):
        await open_pipes(conn, reader, writer)
    await asyncio.wait_for(conn.wait_closed(), DEFAULT_TIMEOUT)
    await eventually(lambda: writer.closed, "the write pipe's file object closed")
    assert os.read(to_peer, 100) == b""  # the peer sees the end of our output
    os.close(to_peer)
    os.close(from_peer)


@pytest.mark.both_loops
async def test_both_loops_means_each_loop_once(request: pytest.FixtureRequest) -> None:
    """``both_loops`` (tests/conftest.py) runs a test on asyncio's loop and on uvloop."""
    assert on_uvloop() is request.node.name.endswith("[uvloop]")
