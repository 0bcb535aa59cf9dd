"""``serve`` on fake time: the ladder a connection's end starts, the idle sweep, and an
in-process agent's cancel timeout all run on the server's injected clock.

The agents are real (a subprocess over pipes, or an ``Agent`` served in-process) and the clients
real (websockets); only the clock is fake, so each rung is checked at the exact moment it is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson

from acp_driver.agent import Agent, Turn
from acp_driver.core import TERM_GRACE, Resolution, Rung
from acp_driver.remote import RemoteServer, serve_agent, serve_command

from ..fakeclock import FakeClock
from ..waiting import eventually
from .serving import AGENTS, INIT_PARAMS, HttpClient, WsClient, pid_gone, text_prompt

T0 = 1000.0
DRIVER_AGENTS = Path(__file__).parent.parent / "driver" / "agents"
BUDGET = 8.0
HANG = [sys.executable, "-m", "acp_driver", "agent", "--behavior", "hang"]
POLITE = [sys.executable, "-m", "acp_driver", "agent"]


@contextlib.asynccontextmanager
async def server(make: Any, clock: FakeClock) -> AsyncIterator[RemoteServer]:
    started = await make
    try:
        yield started
    finally:
        # Closing runs every connection's ladder, which waits on the fake clock: move it on.
        closing = asyncio.ensure_future(started.aclose())
        while not closing.done():
            clock.advance(1.0)
            await asyncio.sleep(0.01)
        await closing


async def _one_connection(srv: RemoteServer) -> Any:
    await eventually(lambda: len(srv.connections) == 1, "the connection")
    (conn,) = srv.connections.values()
    return conn


async def test_a_wedged_agent_gets_every_rung_at_its_moment() -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        server(serve_command(HANG, port=0, cancel_budget=BUDGET, clock=clock), clock) as srv,
    ):
        async with WsClient.connect(srv.url) as client:
            sid = await client.open_session()
            await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("wedged")})
            conn = await _one_connection(srv)
            await eventually(lambda: bool(conn.inflight.prompts()), "the prompt to reach the relay")
            pid = conn.backend.pid
        # The client went: the ladder starts at T0 with session/cancel; nothing else is due yet.
        await eventually(lambda: conn.ladder is not None, "the connection's end")
        assert [r for _, r in conn.ladder.taken] == [Rung.SESSION_CANCEL]
        assert conn.ladder.next_deadline() == T0 + BUDGET * 0.5
        clock.advance_to(T0 + BUDGET * 0.5 - 0.001)
        assert [r for _, r in conn.ladder.taken] == [Rung.SESSION_CANCEL]
        clock.advance_to(T0 + BUDGET * 0.5)
        assert conn.ladder.taken[-1] == (T0 + BUDGET * 0.5, Rung.CANCEL_REQUEST)
        clock.advance_to(T0 + BUDGET * 0.75)
        assert conn.ladder.taken[-1] == (T0 + BUDGET * 0.75, Rung.TERMINATE)
        assert not conn.backend.exited  # it ignores SIGTERM and its input's end
        clock.advance_to(T0 + BUDGET)
        assert conn.ladder.taken[-1] == (T0 + BUDGET, Rung.KILL)
        await asyncio.wait_for(conn.wait_ended(), 30)  # SIGKILLed: reaped
        assert conn.ladder.resolution is Resolution.KILLED
        assert conn.ladder.elapsed == BUDGET  # fake time: exactly the budget
        assert pid is not None
        assert pid_gone(pid)


async def test_terminate_closes_the_agents_input_before_sigterm(tmp_path: Path) -> None:
    """The TERMINATE rung ends the agent's input, then signals: an agent reading its input at
    SIGTERM finds its end (a stdio agent may treat EOF as "stop now")."""
    clock = FakeClock(T0)
    report = tmp_path / "at-sigterm"
    witness = [sys.executable, str(AGENTS / "term_witness.py"), str(report)]
    async with (
        asyncio.timeout(60),
        server(serve_command(witness, port=0, cancel_budget=BUDGET, clock=clock), clock) as srv,
    ):
        async with WsClient.connect(srv.url) as client:
            sid = await client.open_session()
            await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("wedged")})
            await client.next()  # its update: the agent has the prompt (and reads no more)
            conn = await _one_connection(srv)
            await eventually(lambda: bool(conn.inflight.prompts()), "the prompt to reach the relay")
        await eventually(lambda: conn.ladder is not None, "the connection's end")
        clock.advance_to(T0 + BUDGET * 0.75 - 0.001)
        assert not conn.backend.exited
        clock.advance_to(T0 + BUDGET * 0.75)
        assert conn.ladder.taken[-1] == (T0 + BUDGET * 0.75, Rung.TERMINATE)
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert report.read_text() == "stdin closed"
        assert conn.ladder.resolution is Resolution.CANCELLED  # it exited on SIGTERM


async def test_a_polite_agent_is_done_before_any_time_passes() -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        server(serve_command(POLITE, port=0, cancel_budget=BUDGET, clock=clock), clock) as srv,
    ):
        async with WsClient.connect(srv.url) as client:
            sid = await client.open_session()
            await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("/sleep 600000")})
            conn = await _one_connection(srv)
            await eventually(lambda: bool(conn.inflight.prompts()), "the prompt to reach the relay")
        # session/cancel, the agent answers cancelled, nothing is in flight: its input is closed
        # at once and it exits on EOF -- all at T0.
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert [r for _, r in conn.ladder.taken] == [Rung.SESSION_CANCEL]
        assert conn.ladder.resolution is Resolution.CANCELLED
        assert conn.ladder.elapsed == 0.0
        assert clock.t == T0


async def test_the_idle_sweep_runs_on_the_clock() -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        server(serve_command(POLITE, port=0, idle_timeout=10.0, clock=clock), clock) as srv,
        WsClient.connect(srv.url) as client,
    ):
        await client.open_session()
        conn = await _one_connection(srv)
        clock.advance_to(T0 + 9.5)
        assert not conn.ending  # idle for less than the timeout
        clock.advance_to(T0 + 11.0)  # the next sweep after the timeout
        assert conn.ending
        assert conn.end_reason == "idle for 10 s"
        await asyncio.wait_for(conn.wait_ended(), 30)


class Stubborn(Agent):
    """Swallows every cancellation of its turn, until the test lets it go (a task that never
    ends would keep the test's event loop from closing)."""

    name = "stubborn"
    released = False

    async def prompt(self, turn: Turn) -> str:
        await turn.message("working\n")
        while not Stubborn.released:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)
        return "end_turn"


async def test_an_in_process_turn_that_ignores_its_cancel_is_answered_at_the_cancel_timeout() -> None:
    clock = FakeClock(T0)
    Stubborn.released = False
    async with (
        asyncio.timeout(60),
        server(serve_agent(Stubborn, port=0, cancel_timeout=2.0, clock=clock), clock) as srv,
        WsClient.connect(srv.url) as client,
    ):
        try:
            sid = await client.open_session()
            rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("go")})
            await client.next()  # "working": the turn runs
            await client.notify("session/cancel", {"sessionId": sid})
            conn = await _one_connection(srv)
            runtime = conn.backend.runtime
            await eventually(
                lambda: any(
                    s.turn is not None and s.turn.cancel_requested for s in runtime.sessions.values()
                ),
                "the cancel to reach the turn",
            )
            await eventually(lambda: T0 + 2.0 in clock.deadlines, "the runtime to wait on the clock")
            clock.advance_to(T0 + 1.999)
            await asyncio.sleep(0.05)  # (a real wait: nothing may come before the fake deadline)
            assert runtime.sessions[sid].turn is not None  # still waiting for the handler
            clock.advance_to(T0 + 2.0)
            answer, _ = await client.answer_of(rid)
            assert answer["result"] == {"stopReason": "cancelled"}
        finally:
            # Let the turn go, whatever happened: a task that swallows every cancel would keep
            # the test's event loop from ever closing.
            Stubborn.released = True


async def test_an_http_stream_closing_counts_as_activity_on_the_servers_clock() -> None:
    """Over HTTP the idle time starts when the client's last stream closes -- measured on the
    server's clock, like every other activity (a second clock here once ended connections late
    or at once, depending on how the two clocks stood)."""
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        server(serve_command(POLITE, port=0, idle_timeout=10.0, clock=clock), clock) as srv,
        HttpClient.connect(srv.url) as client,
    ):
        await client.initialize()
        await client.open_stream()
        conn = await _one_connection(srv)
        clock.advance_to(T0 + 20.0)
        assert not conn.ending  # a stream is open: not idle, however long
        client.close_streams()
        await eventually(lambda: conn.streams_open == 0, "the stream to close on the server")
        clock.advance_to(T0 + 29.0)
        assert not conn.ending  # idle for 9 s since the stream closed
        clock.advance_to(T0 + 31.0)
        assert conn.ending
        assert conn.end_reason == "idle for 10 s"


async def test_an_initialize_the_agent_never_answers_is_504_at_the_timeout_on_the_clock() -> None:
    clock = FakeClock(T0)
    mute = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # reads, never answers
    init = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
    async with (
        asyncio.timeout(60),
        server(serve_command(mute, port=0, initialize_timeout=10.0, clock=clock), clock) as srv,
        httpx.AsyncClient() as http,
    ):
        posting = asyncio.ensure_future(
            http.post(srv.url, content=init, headers={"Content-Type": "application/json"})
        )
        await eventually(lambda: T0 + 10.0 in clock.deadlines, "initialize to wait on the server's clock")
        clock.advance_to(T0 + 9.999)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not posting.done()
        clock.advance_to(T0 + 10.0)
        response = await posting
        assert response.status_code == 504
        assert "did not answer initialize in time" in response.text


async def test_an_agent_whose_output_ended_is_waited_for_on_the_clock_then_its_connection_ends() -> None:
    """An agent that closes its stdout but runs on: its exit is waited for ``TERM_GRACE`` on the
    server's clock (to name it in the reason), then the connection ends and the ladder runs."""
    clock = FakeClock(T0)
    quiet = [sys.executable, str(DRIVER_AGENTS / "close_stdout.py")]
    async with (
        asyncio.timeout(60),
        server(serve_command(quiet, port=0, cancel_budget=BUDGET, clock=clock), clock) as srv,
        WsClient.connect(srv.url) as client,
    ):
        sid = await client.open_session()
        await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("go")})
        await client.next()  # "about to go quiet": then its stdout closes
        conn = await _one_connection(srv)
        # Two deadlines at T0 + 1 s: the server's idle sweep (every second) and the wait for the
        # agent's exit. Waiting for the sweep's alone let the test move the clock before the
        # relay had read the agent's end: the wait then started later and was never reached.
        assert TERM_GRACE == 1.0
        await eventually(
            lambda: clock.deadlines.count(T0 + TERM_GRACE) == 2, "the wait for its exit, on the clock"
        )
        clock.advance_to(T0 + TERM_GRACE - 0.001)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not conn.ending
        clock.advance_to(T0 + TERM_GRACE)
        # The clock ended the wait (the agent sleeps a minute of real time, and the fake clock
        # does not move again): wait for that event, not for a count of loop turns.
        await eventually(lambda: conn.ending, "the connection's end, at the clock's deadline")
        assert conn.end_reason is not None
        assert conn.end_reason.startswith("the agent ended (still running")
        assert conn.ladder is not None
        assert conn.ladder.started_at == T0 + TERM_GRACE
