"""Deadlines of outgoing requests, without a timer per request.

``asyncio.timeout`` per request costs more than the rest of a round trip. Here: one dict per
distinct timeout value -- requests with the same timeout expire in the order they were made,
so insertion order is deadline order -- and one timer armed for the earliest deadline of all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

from ..core import RequestId

T = TypeVar("T")

_KEEP_EMPTY_BUCKETS = 16
"""Empty per-timeout dicts are kept (reused) while there are at most this many."""


class Deadlines(Generic[T]):
    """Calls ``expired(item)`` once each item's deadline has passed, unless dropped before."""

    __slots__ = ("_at", "_buckets", "_expired", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, expired: Callable[[T], None]) -> None:
        self._loop = loop
        self._expired = expired
        self._buckets: dict[float, dict[RequestId, tuple[float, T]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def add(self, rid: RequestId, timeout: float, item: T) -> None:
        deadline = self._loop.time() + timeout
        bucket = self._buckets.get(timeout)
        if bucket is None:
            bucket = self._buckets[timeout] = {}
        bucket[rid] = (deadline, item)
        if self._timer is None or deadline < self._at:
            self._arm(deadline)

    def drop(self, rid: RequestId, timeout: float) -> None:
        bucket = self._buckets.get(timeout)
        if bucket is not None:
            bucket.pop(rid, None)
            if not bucket and len(self._buckets) > _KEEP_EMPTY_BUCKETS:
                del self._buckets[timeout]

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._buckets.clear()

    @property
    def armed(self) -> bool:
        """Whether a timer is set (there is a deadline to wait for)."""
        return self._timer is not None

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets.values())

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = at
        self._timer = self._loop.call_at(at, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        earliest: float | None = None
        for timeout, bucket in list(self._buckets.items()):
            while bucket:
                rid = next(iter(bucket))
                deadline, item = bucket[rid]
                if deadline > now:
                    earliest = deadline if earliest is None else min(earliest, deadline)
                    break
                del bucket[rid]
                self._expired(item)
            if not bucket:
                del self._buckets[timeout]
        if earliest is not None:
            self._arm(earliest)
