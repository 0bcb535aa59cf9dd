"""What every test process shares.

The tests that signal a real CLI process (Ctrl-C, SIGTERM, SIGHUP) stand for a user at a
terminal, where the command runs in the foreground with those signals' default dispositions. A
test run started where one is ignored -- a background job of a non-interactive shell
(``nice pytest &`` in a CI script: SIGINT), ``nohup pytest`` (SIGHUP), a supervisor that ignores
SIGTERM -- would pass the ignore on to every process it starts, and the CLI keeps a signal it
inherited ignored ignored (the Unix convention; ``cli/_signals.py``): those tests would see a
command that never hears the signal. So a test process that inherited one of them ignored takes a
handler for it instead (Python's own for SIGINT; one that does nothing for SIGHUP and SIGTERM, so
the run itself stays as immune to them as it was started); a process it starts gets the default
disposition back at exec, as from a terminal. The tests of the inherited ignore itself set it up
explicitly in the processes they start.

An async test marked ``both_loops`` runs twice: on asyncio's own loop and on uvloop, the loop
ASGI servers (uvicorn) and many hosts run on (``pytest_asyncio_loop_factories``); every other
async test runs on asyncio's loop, its test id unchanged.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Mapping
from types import FrameType

import pytest
import uvloop

ON_ASYNCIO: Mapping[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
ON_BOTH_LOOPS: Mapping[str, Callable[[], asyncio.AbstractEventLoop]] = {
    **ON_ASYNCIO,
    "uvloop": uvloop.new_event_loop,
}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return ON_BOTH_LOOPS if item.get_closest_marker("both_loops") is not None else ON_ASYNCIO


def _ignore(signum: int, frame: FrameType | None) -> None:
    """Ignores the signal here, without passing the ignore on at exec (a handler is reset there)."""


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, _ignore)
