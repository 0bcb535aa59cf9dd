"""The one clock every timed decision runs on, injectable so tests can run on fake time.

Request deadlines, the cancel ladder (host and ``serve``), ``serve``'s idle sweep and the agent
runtime's cancel timeout all take a ``Clock``; the default is the running loop's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds, and callbacks at a time on that scale."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer: ...


class LoopClock:
    """The running event loop's monotonic clock (the default)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)


async def wait_on(clock: Clock, futures: Iterable[asyncio.Future[Any]], timeout: float) -> bool:
    """Wait until one of ``futures`` is done or ``timeout`` seconds passed on ``clock``
    (``asyncio.wait`` with its timeout measured by an injectable clock). True if one is done."""
    pending = set(futures)
    if any(f.done() for f in pending):
        return True
    expired = asyncio.get_running_loop().create_future()

    def expire() -> None:
        if not expired.done():
            expired.set_result(None)

    timer = clock.call_at(clock.now() + timeout, expire)
    try:
        await asyncio.wait({*pending, expired}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        expired.cancel()
    return any(f.done() for f in pending)
