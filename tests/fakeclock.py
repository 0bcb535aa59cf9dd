"""A fake clock for the host's timed decisions (``acp_driver.aio.Clock``): time moves when the
test says so, and the callbacks due run then, in deadline order."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class FakeTimer:
    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self._timers: list[tuple[float, int, FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def call_at(self, when: float, callback: Callable[[], object]) -> FakeTimer:
        timer = FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    @property
    def next_deadline(self) -> float | None:
        """When the next pending callback is due (None: nothing is waiting for time)."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    @property
    def deadlines(self) -> list[float]:
        """Every pending callback's time, in order."""
        return sorted(when for when, _, timer in self._timers if not timer.cancelled)

    def advance_to(self, t: float) -> None:
        """Move time to ``t``, running every callback due by then, in order."""
        while (due := self.next_deadline) is not None and due <= t:
            _, _, timer = heapq.heappop(self._timers)
            self.t = max(self.t, timer.when)
            timer.callback()
        self.t = max(self.t, t)

    def advance(self, seconds: float) -> None:
        self.advance_to(self.t + seconds)
