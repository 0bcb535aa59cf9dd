"""``--turn-timeout`` runs on the agent's clock, like the ladder it starts: the cancel comes
exactly at the timeout, and each ladder step the command reports is timed on that clock.

In process: the command's ``Controller`` with its JSON output, over a real agent process (the
reference agent, wedged); only the clock is fake."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from acp_driver.cli._controller import Controller
from acp_driver.cli._render import JsonOutput
from acp_driver.driver import LadderPolicy, Resolution

from ..driver._helpers import reference, running
from ..fakeclock import FakeClock
from ..waiting import eventually

T0 = 1000.0
TIMEOUT = 5.0
BUDGET = 8.0


async def test_the_turn_timeout_and_the_steps_it_reports_run_on_the_agents_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock(T0)
    async with (
        asyncio.timeout(60),
        running(reference("hang"), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent,
    ):
        session = await agent.new_session(tmp_path)
        controller = Controller(JsonOutput())
        agent.on_ladder_step = controller.on_step
        turn = session.prompt("wedged")
        controller.start(turn, TIMEOUT)
        assert T0 + TIMEOUT in clock.deadlines  # the timeout, on the agent's clock
        clock.advance_to(T0 + TIMEOUT - 0.001)
        assert controller.reason is None
        clock.advance_to(T0 + TIMEOUT)
        assert controller.reason == "timeout"
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        assert turn.ladder is not None
        assert turn.ladder.started_at == T0 + TIMEOUT
        clock.advance_to(T0 + TIMEOUT + BUDGET)  # every rung, then SIGKILL
        result = await turn
        await controller.finish()
        assert result.resolution is Resolution.KILLED
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [e for e in events if e["type"] in ("cancel", "ladder")] == [
            {"type": "cancel", "reason": "timeout"},
            {"type": "ladder", "step": "session_cancel", "elapsedMs": 0.0},
            {"type": "ladder", "step": "cancel_request", "elapsedMs": BUDGET * 0.5 * 1000},
            {"type": "ladder", "step": "terminate", "elapsedMs": BUDGET * 0.75 * 1000},
            {"type": "ladder", "step": "kill", "elapsedMs": BUDGET * 1000},
        ]
