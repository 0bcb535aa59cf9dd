"""A turn that ended is freed by reference counting, not left to the cyclic collector.

A host runs turn after turn; a turn that stays in a reference cycle once it ended (its ladder
runner holding its hooks, which hold the turn) is freed only when the collector runs, which it
does every few hundred allocations -- inside some cancel's critical path (a collection showed in
~1.5 % of the cancels of benchmark row H5, enough for the p99). Resolved, the runner drops the
owner's hooks (``aio.LadderRunner``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_driver.aio import LadderRunner
from acp_driver.core import TurnMachine
from acp_driver.driver import PromptTurn

from ..waiting import eventually
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
async def test_an_ended_turn_is_freed_once_the_next_one_ends(protocol: int, tmp_path: Path) -> None:
    """A session holds its last turn (``last_turn``), no earlier one: a long session keeps no
    ended turn alive (v2's message and tool-call tables kept every one, updates and all)."""
    async with running(reference("polite"), protocol=protocol) as agent:
        session = await agent.new_session(str(tmp_path))
        first = session.prompt("/tool 1 0")
        assert (await first).stop_reason == "end_turn"
        freed = weakref.ref(first)
        del first
        second = session.prompt("/stream 1 0\n/sleep 60000")
        await second.__anext__()
        await second.cancel()
        await eventually(lambda: freed() is None, "the first turn freed")
