"""The one clock every timed decision runs on, injectable so tests can run on fake time.

Request deadlines, a handler's timeout, the cancel ladder (host and ``serve``), every
SIGTERM -> SIGKILL escalation outside it (``ProcessGroup.reap``, terminals, shutdown, ``serve``'s
release), ``serve``'s idle sweep and ``initialize`` timeout, a network peer's close grace and the
agent runtime's cancel timeout all take a ``Clock``; the default is the running loop's.
``wait_on`` and ``timeout_on`` are ``asyncio.wait``'s and ``asyncio.timeout``'s timeouts measured
on such a clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from types import TracebackType
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


class _ClockTimeout:
    """``asyncio.timeout(delay)`` whose delay runs on ``clock`` (see ``timeout_on``)."""

    __slots__ = ("_clock", "_delay", "_inside", "_scope", "_timer")

    def __init__(self, clock: Clock, delay: float) -> None:
        self._clock = clock
        self._delay = delay
        self._scope = asyncio.timeout(None)
        self._timer: Timer | None = None
        self._inside = False

    async def __aenter__(self) -> asyncio.Timeout:
        await self._scope.__aenter__()
        self._inside = True
        clock = self._clock
        self._timer = clock.call_at(clock.now() + self._delay, self._expire)
        return self._scope

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._inside = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self._scope.__aexit__(kind, exc, tb)

    def _expire(self) -> None:
        self._timer = None
        if self._inside:  # the scope cancels its task now, as asyncio.timeout's own expiry does
            self._scope.reschedule(asyncio.get_running_loop().time())


def timeout_on(clock: Clock | None, delay: float) -> contextlib.AbstractAsyncContextManager[asyncio.Timeout]:
    """``asyncio.timeout(delay)``, with ``delay`` measured on ``clock`` (None: the loop's own
    time, plain ``asyncio.timeout``). ``TimeoutError`` when it expires; ``expired()`` on the
    scope it yields tells that expiry from another ``TimeoutError``."""
    if clock is None:
        return asyncio.timeout(delay)
    return _ClockTimeout(clock, delay)
