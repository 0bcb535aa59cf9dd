"""A turn that ended is freed by reference counting, not left to the cyclic collector.

A host runs turn after turn; a turn that stays in a reference cycle once it ended (its ladder
runner holding its hooks, which hold the turn) is freed only when the collector runs, which it
does every few hundred allocations -- inside some cancel's critical path (a collection showed in
~1.5 % of the cancels of benchmark row H5, enough for the p99). Resolved, the runner drops the
owner's hooks (``aio.LadderRunner``)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_driver.aio import LadderRunner
from acp_driver.core import TurnMachine
from acp_driver.driver import PromptTurn

from ._helpers import reference, running

TURN_TYPES = (PromptTurn, LadderRunner, TurnMachine)


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """What the collector finds unreachable from here on (kept in ``gc.garbage``, not freed)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize("protocol", [1, 2])
@pytest.mark.parametrize("cancelled", [True, False], ids=["cancelled", "completed"])
async def test_an_ended_turn_leaves_no_cycle(
    protocol: int, cancelled: bool, saved_garbage: list[object], tmp_path: Path
) -> None:
    async with running(reference("polite"), protocol=protocol) as agent:
        session = await agent.new_session(str(tmp_path))
        for _ in range(5):
            if cancelled:
                turn = session.prompt("/stream 1 0\n/sleep 60000")
                await turn.__anext__()  # the agent is in the turn
                await turn.cancel()
                expected = "cancelled"
            else:
                turn = session.prompt("/stream 2 0")
                expected = "end_turn"
            assert (await turn).stop_reason == expected
        del turn
        gc.collect()
        cycles = [type(o).__name__ for o in saved_garbage if isinstance(o, TURN_TYPES)]
        assert cycles == [], f"ended turns left in reference cycles: {cycles}"


@pytest.mark.parametrize("protocol", [1, 2])
async def test_the_previous_turn_is_freed_after_the_woken_caller_ran(protocol: int, tmp_path: Path) -> None:
    """A turn's end frees the session's previous turn (``last_turn``), a whole object graph: not
    before the caller awaiting the turn resumes (its critical path), but right after."""
    async with running(reference("polite"), protocol=protocol) as agent:
        session = await agent.new_session(str(tmp_path))
        order: list[str] = []
        first = session.prompt("/stream 1 0")
        assert (await first).stop_reason == "end_turn"
        freed = weakref.ref(first, lambda _ref: order.append("freed"))
        del first
        second = session.prompt("/stream 1 0\n/sleep 60000")
        await second.__anext__()
        await second.cancel()
        order.append("resumed")
        assert order == ["resumed"]  # still held: released by a callback queued after the caller's
        while freed() is not None:
            await asyncio.sleep(0)  # one loop iteration: the release runs in this one
        assert order == ["resumed", "freed"]
