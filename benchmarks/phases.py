#!/usr/bin/env python3
"""Where the host's share of a cancel goes: acp-driver's host cancels busy turns of the ceiling
agent (row H5) and times the stretches of each cancel, in one process, medians over N cancels::

    python3 benchmarks/phases.py [N] [--src OTHER/src]

It prints, in µs after ``turn.cancel()`` was called and in the order they happen: when
``session/cancel`` is handed to ``write`` (the host's work before the agent can see the cancel);
when the answer's ``read`` returned (the agent, the two wake-ups, and whatever the host did after
its write); when the read is handed to the connection (framing); when ``PromptTurn._finish`` is
entered and left (the turn resolved: parsing, the core, the answer's future, the turn machine);
when the connection is done with the read; when ``cancel()`` returned (the caller's task).

It wraps ``os.write``, ``os.read`` and two methods with timestamps (a few hundred nanoseconds
each): the numbers are wall-clock, so they move with the machine's load -- read them side by side,
in one run. Counts that do not move are in ``counts.py`` and ``instructions.py``.

``--floor`` adds, in the same process against the same agent, what the host's own connection
costs without the turn's cancel machinery: ``session/cancel`` queued with ``notify_nowait`` and
the prompt's future awaited (no ladder, no ``cancel()``; the turn still resolves as the answer is
read), next to ``turn.cancel()`` timed alone -- medians of N each, interleaved. The difference is
what the ladder, the turn machine and ``cancel()`` add to a cancel's critical path.

``--loops`` runs the same ``--floor`` measurement with the host on asyncio's own loop and on
uvloop (if installed), alternating, two rounds each: what a compiled event loop would take off
the host's share of a cancel.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUSY_TURN = "/stream 1 0\n/sleep 60000"
STRETCHES = ["write", "read", "feed", "finish", "finished", "fed", "returned"]
LABELS = {
    "write": "session/cancel handed to write",
    "read": "the answer read",
    "feed": "the read handed to the connection",
    "finish": "the turn resolving (_finish entered)",
    "finished": "the turn resolved (_finish left)",
    "fed": "the connection done with the read",
    "returned": "cancel() returned",
}


async def measure(n: int) -> dict[str, list[float]]:
    from acp_driver.aio import Connection
    from acp_driver.driver import _prompt_turn as _turn
    from acp_driver.driver import launch

    clock = time.perf_counter
    marks: dict[str, float] = {}
    on = False

    def mark(name: str) -> None:
        if on and name not in marks:
            marks[name] = clock()

    real_write, real_read = os.write, os.read

    def write(fd: int, data: Any) -> int:
        mark("write")
        return real_write(fd, data)

    def read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        mark("read")
        return data

    feed, finish = Connection.feed_messages, _turn.PromptTurn._finish

    def timed_feed(self: Any, messages: Any) -> None:
        mark("feed")
        feed(self, messages)
        mark("fed")

    def timed_finish(self: Any, *args: Any) -> None:
        mark("finish")
        finish(self, *args)
        mark("finished")

    Connection.feed_messages = timed_feed  # type: ignore[method-assign]
    _turn.PromptTurn._finish = timed_finish  # type: ignore[method-assign]
    os.write, os.read = write, read  # type: ignore[assignment]
    agent = await launch([sys.executable, str(HERE / "peers" / "ceiling_agent.py")])
    out: dict[str, list[float]] = {name: [] for name in STRETCHES}
    try:
        session = await agent.new_session(os.getcwd())
        for i in range(n + 50):  # the first 50 warm up
            turn = session.prompt(BUSY_TURN)
            await turn.__anext__()
            marks.clear()
            on = True
            marks["start"] = clock()
            await turn.cancel()
            marks["returned"] = clock()
            on = False
            if (await turn).stop_reason != "cancelled":
                raise SystemExit("a turn was not cancelled")
            if i >= 50 and all(name in marks for name in STRETCHES):
                for name in STRETCHES:
                    out[name].append((marks[name] - marks["start"]) * 1e6)
    finally:
        os.write, os.read = real_write, real_read
        await agent.shutdown()
    return out


def floor_on(loop: str, n: int) -> tuple[list[float], list[float]]:
    """``floor(n)`` with the host on ``loop`` (``asyncio`` or ``uvloop``)."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(floor(n))
    return asyncio.run(floor(n))


async def floor(n: int) -> tuple[list[float], list[float]]:
    """(``session/cancel`` + awaiting the prompt's future, ``turn.cancel()``), µs, interleaved."""
    from acp_driver.driver import launch

    clock = time.perf_counter
    agent = await launch([sys.executable, str(HERE / "peers" / "ceiling_agent.py")], protocol=1)
    bare: list[float] = []
    full: list[float] = []
    try:
        session = await agent.new_session(os.getcwd())
        for i in range(2 * (n + 50)):
            turn = session.prompt(BUSY_TURN)
            await turn.__anext__()
            start = clock()
            if i % 2:
                await turn.cancel()
            else:
                agent.connection.notify_nowait("session/cancel", {"sessionId": session.id})
                assert turn.prompt_answer is not None
                await turn.prompt_answer
            elapsed = (clock() - start) * 1e6
            if (await turn).stop_reason != "cancelled":
                raise SystemExit("a turn was not cancelled")
            if i >= 100:
                (full if i % 2 else bare).append(elapsed)
    finally:
        await agent.shutdown()
    return bare, full


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int, nargs="?", default=2000, help="cancels (default 2000)")
    parser.add_argument("--src", type=Path, default=HERE.parent / "src", help="the acp_driver tree")
    parser.add_argument("--floor", action="store_true", help="also the cancel without the machinery")
    parser.add_argument("--loops", action="store_true", help="--floor on asyncio's loop and on uvloop")
    opts = parser.parse_args()
    sys.path.insert(0, str(opts.src.resolve()))
    if opts.loops:
        print(f"acp-driver host, ceiling agent: {opts.n} cancels per run, medians in µs ({opts.src})")
        print(f"  {'loop':8} {'round':>5}  {'notify_nowait':>13}  {'turn.cancel()':>13}")
        for round_ in (1, 2):
            for loop in ("asyncio", "uvloop"):
                bare, full = floor_on(loop, opts.n)
                print(
                    f"  {loop:8} {round_:>5}  {statistics.median(bare):13.1f}  {statistics.median(full):13.1f}"
                )
        return 0
    if opts.floor:
        bare, full = asyncio.run(floor(opts.n))
        print(f"acp-driver host, ceiling agent: {len(bare)} + {len(full)} cancels, interleaved ({opts.src})")
        print(
            f"  {statistics.median(bare):8.1f}  µs: session/cancel by notify_nowait, the prompt's future awaited"
        )
        print(f"  {statistics.median(full):8.1f}  µs: turn.cancel()")
    out = asyncio.run(measure(opts.n))
    medians = {name: statistics.median(values) for name, values in out.items()}
    print(f"acp-driver host, ceiling agent: {len(out['returned'])} cancels ({opts.src})")
    print("  µs after turn.cancel() was called (medians), in order:")
    for name in sorted(STRETCHES, key=medians.__getitem__):
        print(f"  {medians[name]:8.1f}  {LABELS[name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
