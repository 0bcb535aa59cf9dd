"""The clock the host's timed decisions run on, injectable so tests can run on fake time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


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
