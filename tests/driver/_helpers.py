"""Helpers for the host driver's acceptance tests: real agent processes, no mocks.

- ``reference(behavior)``: argv of the bundled reference agent with a ``--behavior``.
- ``script(name)``: argv of a small misbehaving agent of ``tests/driver/agents``.
- ``running(argv, ...)``: launch an agent; whatever happens in the test, its process group is
  SIGKILLed at the end if anything of it is still alive (no test leaks processes).
- ``assert_group_gone(pgid)``: no process of the group is left (zombies included: a zombie still
  counts for ``killpg``; orphaned grandchildren get a few seconds to be reaped by init).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from acp_driver.driver import PromptTurn, RemoteAgent, Update, launch

from ..fakeclock import FakeClock
from ..procs import group_alive as group_alive
from ..procs import pid_alive as pid_alive
from ..procs import wait_group_gone

AGENTS = Path(__file__).with_name("agents")


def reference(behavior: str) -> list[str]:
    return [sys.executable, "-m", "acp_driver", "agent", "--behavior", behavior]


def script(name: str) -> list[str]:
    return [sys.executable, str(AGENTS / f"{name}.py")]


async def assert_group_gone(pgid: int, *, grace: float = 5.0) -> None:
    """No process of group ``pgid`` survives, zombies included (within ``grace`` seconds)."""
    await wait_group_gone(pgid, grace)


async def close_and_check(agent: RemoteAgent) -> None:
    """``aclose`` the agent; then it must have been reaped and its whole group be gone."""
    await agent.aclose()
    assert agent.returncode is not None, "agent process not reaped after aclose()"
    await assert_group_gone(agent.process.pgid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def running(argv: Sequence[str], **options: Any) -> AsyncIterator[RemoteAgent]:
    """Launch an agent for a test; its group never outlives the test, pass or fail. The driver
    tests are about v1 unless they say ``protocol=2`` (``test_v2_*.py``)."""
    options.setdefault("protocol", 1)
    agent = await launch(argv, **options)
    try:
        yield agent
    finally:
        pgid = agent.process.pgid
        clock = options.get("clock")
        try:
            async with asyncio.timeout(15):
                # The shutdown's graces run on the agent's clock: a fake one is moved on while
                # an agent still running (a wedged one) is closed, SIGTERMed and SIGKILLed.
                closing = asyncio.ensure_future(agent.aclose())
                while not closing.done():
                    if isinstance(clock, FakeClock):
                        clock.advance(0.5)
                    await asyncio.wait({closing}, timeout=0.01)
                await closing
        finally:
            _kill_group(pgid)


async def take(turn: PromptTurn, count: int) -> list[Update]:
    """The turn's first ``count`` updates (fewer if it ends first)."""
    got: list[Update] = []
    async for update in turn:
        got.append(update)
        if len(got) >= count:
            break
    return got


async def asked_or_ended(asked: asyncio.Event, turn: PromptTurn) -> None:
    """Until the host was asked something (``asked`` set by its service) or ``turn`` ended; then
    ``asked.is_set()`` says which (an ended turn's result says why it never asked)."""
    waiters = [asyncio.ensure_future(asked.wait()), asyncio.ensure_future(turn.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def read_pids(path: Path) -> dict[str, int]:
    """``role -> pid`` from an agent's pid file (see ``agents/_acp.py``)."""
    pids = {}
    if path.exists():
        for line in path.read_text().splitlines():
            role, pid = line.split()
            pids[role] = int(pid)
    return pids
