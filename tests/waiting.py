"""The one polling helper of the test suite: wait for a condition, bounded, with a clear failure.

Tests synchronise on events where the code offers one; where it cannot (another process's
state, what a peer wrote), they poll with ``eventually`` -- never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEFAULT_TIMEOUT = 15.0
"""Generous: a slow, loaded machine must never fail a test by timing alone."""


async def eventually(
    predicate: Callable[[], object],
    what: str = "condition",
    timeout: float = DEFAULT_TIMEOUT,
    *,
    details: Callable[[], str] | None = None,
) -> None:
    """Return once ``predicate()`` is true; fail the test after ``timeout`` seconds, with
    ``details()`` (e.g. both sides' traces) in the message."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            message = f"timed out after {timeout}s waiting for {what}"
            raise AssertionError(f"{message}\n{details()}" if details is not None else message)
        await asyncio.sleep(0.01)
