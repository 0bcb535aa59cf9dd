"""A live peer for the fuzzers: an event loop of our own, run example by example.

Hypothesis runs a plain function per example; the peer process lives across examples (one
spawn per test, not per example), so each example is ``loop.run_until_complete(...)`` on the
same loop. Anything that reaches the loop's exception handler is recorded (a crash).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LiveLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.crashes: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _loop, context: self.crashes.append(context))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(timeout):  # a hang fails the example, it does not stall CI
                return await coro

        return self.loop.run_until_complete(bounded())

    def close(self) -> None:
        loop = self.loop
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=5))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def parse(data: bytes) -> Any:
    """A traced message as Python data (the standard parser: lone surrogates are fine)."""
    return json.loads(data.decode("utf-8"))


class LogCount(logging.Handler):
    """Counts the records of ``acp_driver`` loggers at WARNING or above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1

    def __enter__(self) -> LogCount:
        logging.getLogger("acp_driver").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("acp_driver").removeHandler(self)
