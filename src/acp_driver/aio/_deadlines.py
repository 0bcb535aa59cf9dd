"""Deadlines of outgoing requests, without a timer per request and without work per answer.

``asyncio.timeout`` per request costs more than the rest of a round trip. Here: one deque per
distinct timeout value -- requests with the same timeout expire in the order they were made, so
append order is deadline order -- and one timer armed for the earliest deadline of all.

An answered request is not looked up and removed (that cost a call and two dict operations per
answer): its entry stays until it reaches the front, where it is skipped because its item is
``done()``. So that entries of answered requests cannot pile up behind one long request, the
front is trimmed of finished items at every ``add``, and when the deques hold more than twice the
entries left after the last sweep (and at least ``COMPACT_MIN``), every finished entry is dropped
(amortised O(1) per request).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ._clock import Clock, Timer


class Expiring(Protocol):
    deadline: float
    """Set by ``add`` (the item carries it: no pair allocated per item)."""

    def done(self) -> bool: ...


T = TypeVar("T", bound=Expiring)

COMPACT_MIN = 1024
"""Entries held before finished ones are swept out of the middle of the deques."""


class Deadlines(Generic[T]):
    """Calls ``expired(item)`` once an item's deadline has passed, unless it is ``done()`` by then."""

    __slots__ = ("_at", "_buckets", "_call_at", "_compact_at", "_expired", "_size", "_time", "_timer")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, expired: Callable[[T], None], clock: Clock | None = None
    ) -> None:
        self._call_at: Callable[[float, Callable[[], object]], Timer]
        if clock is not None:  # an injected clock (tests run it on fake time)
            self._time = clock.now
            self._call_at = clock.call_at
        else:
            # asyncio's own loops tell time with time.monotonic(): call it without the method's frame.
            self._time = time.monotonic if type(loop).time is asyncio.BaseEventLoop.time else loop.time
            self._call_at = loop.call_at
        self._expired = expired
        self._buckets: dict[float, deque[T]] = {}
        self._timer: Timer | None = None
        self._at = 0.0
        self._size = 0
        self._compact_at = COMPACT_MIN

    def add(self, timeout: float, item: T) -> None:
        item.deadline = deadline = self._time() + timeout
        bucket = self._buckets.get(timeout)
        if bucket is None:
            bucket = self._buckets[timeout] = deque()
        elif bucket and bucket[0].done():
            self._size -= _trim(bucket)
        bucket.append(item)
        self._size += 1
        if self._size > self._compact_at:
            self._compact()
        if self._timer is None or deadline < self._at:
            self._arm(deadline)

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._buckets.clear()
        self._size = 0
        self._compact_at = COMPACT_MIN

    @property
    def armed(self) -> bool:
        """Whether a timer is set (there is a deadline to wait for)."""
        return self._timer is not None

    @property
    def held(self) -> int:
        """How many entries are held, finished ones not yet dropped included (for tests)."""
        return sum(len(bucket) for bucket in self._buckets.values())

    def __len__(self) -> int:
        """How many items wait for their deadline (finished ones not counted)."""
        return sum(1 for bucket in self._buckets.values() for item in bucket if not item.done())

    def _compact(self) -> None:
        size = 0
        for timeout, bucket in list(self._buckets.items()):
            kept = deque(item for item in bucket if not item.done())
            if kept:
                self._buckets[timeout] = kept
                size += len(kept)
            else:
                del self._buckets[timeout]
        self._size = size
        self._compact_at = max(COMPACT_MIN, 2 * size)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = at
        self._timer = self._call_at(at, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._time()
        earliest: float | None = None
        for timeout, bucket in list(self._buckets.items()):
            while bucket:
                item = bucket[0]
                if item.done():
                    bucket.popleft()
                    self._size -= 1
                    continue
                if item.deadline > now:
                    earliest = item.deadline if earliest is None else min(earliest, item.deadline)
                    break
                bucket.popleft()
                self._size -= 1
                self._expired(item)
            if not bucket and self._buckets.get(timeout) is bucket:
                del self._buckets[timeout]
        if earliest is not None and not (self.armed and earliest >= self._at):  # an expiry may add
            self._arm(earliest)


def _trim(bucket: deque[T]) -> int:
    """Drop the finished items at the front of ``bucket``; return how many."""
    n = 0
    while bucket and bucket[0].done():
        bucket.popleft()
        n += 1
    return n
