"""A prompt turn the agent runtime ended is freed by reference counting, not left to the cyclic
collector: a cancelled turn's task holds its ``CancelledError``, whose traceback holds the
turn's frames, which hold the turn, which held the task. The runtime drops the task of an
ended turn (``Turn._end``); otherwise ~36 objects per cancel waited for a collection, which then
ran inside some later cancel's critical path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_driver.driver import launch

GC_AGENT = Path(__file__).with_name("gc_agent.py")


@pytest.mark.parametrize("protocol", [1, 2])
async def test_a_cancelled_turn_leaves_no_cycle_in_the_agent(protocol: int, tmp_path: Path) -> None:
    report = tmp_path / "garbage.txt"
    agent = await launch([sys.executable, str(GC_AGENT), str(report)], protocol=protocol)
    try:
        session = await agent.new_session(str(tmp_path))
        for _ in range(5):
            turn = session.prompt("/stream 1 0\n/sleep 60000")
            await turn.__anext__()  # the agent is in the turn
            await turn.cancel()
            assert (await turn).stop_reason == "cancelled"
    finally:
        await agent.aclose()  # end of input: the agent exits and writes its report
    assert agent.returncode == 0
    assert report.read_text().split() == [], "ended turns left in reference cycles in the agent"
