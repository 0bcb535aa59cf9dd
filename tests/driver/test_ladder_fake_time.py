"""The cancel ladder against real agent processes, on fake time.

The agent is real (a subprocess over pipes); only the clock the ladder runs on is fake, so each
step is checked at the exact moment it becomes due -- and the tests take no budget's worth of
waiting. Each test is a short story: cancel, look at the wire, move time, look again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from acp_driver.core import resolve_within
from acp_driver.driver import ClientServices, LadderPolicy, Resolution, Rung
from acp_driver.services import LocalTerminals

from ..fakeclock import FakeClock
from ..procs import wait_group_gone
from ..waiting import eventually
from ..wire import Wire, first_update
from ._helpers import close_and_check, reference, running, script

BUDGET = 8.0
T0 = 1000.0


async def test_every_step_at_its_moment_then_sigkill_resolves(tmp_path: Path) -> None:
    # "hang": a wedged agent -- never answers, sends nothing, ignores SIGTERM.
    clock, wire = FakeClock(T0), Wire()
    async with (
        asyncio.timeout(60),
        running(
            reference("hang"), ladder=LadderPolicy(budget=BUDGET), clock=clock, tracer=wire.trace
        ) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("wedged")
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        assert turn.ladder is not None
        assert [r for _, r in turn.ladder.taken] == [Rung.SESSION_CANCEL]
        assert wire.methods()[-1] == "session/cancel"
        assert clock.next_deadline == T0 + BUDGET * 0.5

        clock.advance_to(T0 + BUDGET * 0.5 - 0.001)  # just before: nothing more
        assert [r for _, r in turn.ladder.taken] == [Rung.SESSION_CANCEL]
        clock.advance_to(T0 + BUDGET * 0.5)
        assert [r for _, r in turn.ladder.taken] == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST]
        assert wire.out[-1] == {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": turn.request_id},
        }
        clock.advance_to(T0 + BUDGET * 0.75)
        assert turn.ladder.taken[-1] == (T0 + BUDGET * 0.75, Rung.TERMINATE)
        assert agent.returncode is None  # it ignores SIGTERM: still running
        assert not turn.done
        clock.advance_to(T0 + BUDGET)
        assert turn.ladder.taken[-1] == (T0 + BUDGET, Rung.KILL)

        outcome = await canceller  # the SIGKILLed agent's exit resolves the turn
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "kill"
        assert outcome.steps == ("session_cancel", "cancel_request", "terminate", "kill")
        assert outcome.elapsed == BUDGET  # fake time: exactly the budget
        assert agent.returncode == -9
        await close_and_check(agent)


async def test_an_agent_dying_at_sigterm_resolves_at_terminate(tmp_path: Path) -> None:
    # "ignore-cancel": ignores both cancels, but dies at SIGTERM.
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        running(reference("ignore-cancel"), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("working\n/sleep 600000")
        await first_update(turn)
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        clock.advance_to(T0 + BUDGET * 0.75)
        outcome = await canceller
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "terminate"
        assert outcome.elapsed == BUDGET * 0.75
        assert clock.next_deadline is None  # resolved: the ladder waits for nothing more
        await close_and_check(agent)


async def test_a_polite_agent_resolves_before_any_time_passes(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        running(reference("polite"), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("working\n/sleep 600000")
        await first_update(turn)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert outcome.elapsed == 0.0
        # The $/cancel_request step was dropped: no timer of the ladder waits on the clock (the
        # only one left is initialize's request deadline, answered, dropped when it comes due).
        assert turn.ladder is not None
        assert turn.ladder.next_deadline() is None
        assert clock.deadlines == [T0 + 30.0]  # launch's default init_timeout
        result = await turn
        assert result.stop_reason == "cancelled"
        assert result.cancel == outcome
        await close_and_check(agent)


async def test_kill_skips_the_rest_of_the_ladder(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        running(reference("hang"), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("wedged")
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        clock.advance(1.0)
        turn.kill()  # a second Ctrl-C
        outcome = await canceller
        assert outcome.steps == ("session_cancel", "kill")
        assert outcome.resolution is Resolution.KILLED
        assert outcome.elapsed == 1.0
        await close_and_check(agent)


async def test_a_permission_request_after_the_cancel_is_answered_cancelled(tmp_path: Path) -> None:
    # "ignore-cancel" goes on after session/cancel and asks permission: the host answers
    # "cancelled" without asking anyone (the user's dialog never opens for a cancelled turn).
    clock = FakeClock(T0)
    wire: list[tuple[str, dict[str, Any]]] = []
    asked: list[Any] = []

    async def policy(request: Any) -> dict[str, Any]:
        asked.append(request)
        return {"outcome": "selected", "optionId": "allow"}

    async with (
        asyncio.timeout(60),
        running(
            reference("ignore-cancel"),
            ladder=LadderPolicy(budget=BUDGET),
            clock=clock,
            services=ClientServices(permission=policy),
            tracer=lambda direction, message: wire.append((direction, orjson.loads(message))),
        ) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("working\n/sleep 300\n/permission")
        await first_update(turn)
        canceller = asyncio.create_task(turn.cancel())
        await eventually(
            lambda: any(d == "in" and m.get("method") == "session/request_permission" for d, m in wire),
            "the agent's permission request",
        )
        [asked_id] = [
            m["id"] for d, m in wire if d == "in" and m.get("method") == "session/request_permission"
        ]
        await eventually(
            lambda: any(d == "out" and m.get("id") == asked_id and "method" not in m for d, m in wire),
            "our answer to it",
        )
        [answer] = [m for d, m in wire if d == "out" and m.get("id") == asked_id and "method" not in m]
        assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
        assert asked == []
        # The agent goes on with the refusal and ends its turn its own way, before any
        # further step was due (no time passed).
        outcome = await canceller
        assert outcome.steps == ("session_cancel",)
        assert outcome.resolution is Resolution.COMPLETED
        assert outcome.stop_reason == "end_turn"
        await close_and_check(agent)


async def test_the_agent_cleans_up_its_terminals_while_its_turn_is_cancelled(tmp_path: Path) -> None:
    # The host kills the turn's terminals at once but keeps them until the turn ends: the
    # agent's terminal/output, wait_for_exit, kill and release are answered normally.
    clock = FakeClock(T0)
    terminals = LocalTerminals()
    reports: list[dict[str, Any]] = []
    async with (
        asyncio.timeout(60),
        running(
            script("cleanup_on_cancel"),
            ladder=LadderPolicy(budget=BUDGET),
            clock=clock,
            services=ClientServices(terminals=terminals),
        ) as agent,
    ):
        agent.connection.on_notification("_cleanup/report", reports.append)
        session = await agent.new_session(tmp_path)
        turn = session.prompt("go")
        await first_update(turn)
        [terminal] = terminals.terminals.values()
        outcome = await turn.cancel()
        assert reports == [{"output": "ok", "wait_for_exit": "ok", "kill": "ok", "release": "ok"}]
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert terminals.terminals == {}  # released by the agent (or at the turn's end)
        await wait_group_gone(terminal.pgid)
        await close_and_check(agent)


async def test_cancel_agent_shuts_an_idle_agent_down_on_the_ladders_schedule(tmp_path: Path) -> None:
    """``cancel("agent")`` with nothing running: the agent's input is closed at once, SIGTERM
    comes at 3/4 of the budget and SIGKILL at the budget, on the agent's clock -- the bound of
    every cancel (``resolve_within``), here for an agent that ignores both its input's end and
    SIGTERM."""
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        running(script("ignore_sigterm"), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent,
    ):
        await agent.new_session(tmp_path)
        cancelling = asyncio.create_task(agent.cancel("agent"))
        await eventually(lambda: clock.deadlines == [T0 + BUDGET * 0.75], "the shutdown to wait on the clock")
        clock.advance_to(T0 + BUDGET * 0.75)  # SIGTERM: ignored
        await eventually(lambda: clock.deadlines == [T0 + BUDGET], "SIGKILL to be due at the budget")
        assert agent.returncode is None
        clock.advance_to(T0 + BUDGET)
        outcome = await cancelling
        assert agent.returncode == -9
        assert outcome.elapsed == BUDGET  # fake time: SIGKILL exactly at the budget
        assert outcome.elapsed <= resolve_within(BUDGET)
        assert outcome.steps == ("shutdown",)
