"""No gap at the default action: from the moment a command takes a signal over until it exits,
the signal is never at SIG_DFL (a death) nor at Python's ``KeyboardInterrupt`` handler (raised
out of a shutdown, and replaced by SIG_DFL while Python exits: a death after all).

The gap lasts microseconds, so the storms of ``test_signals.py`` hit it only now and then (one
CI run in many: ``run`` killed by SIGINT at its very end). These tests watch every disposition
the command sets instead, in this process, and deliver real signals to it where that is safe.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from acp_driver.cli import _check, _main
from acp_driver.cli._controller import SIGNALS, Controller
from acp_driver.cli._render import JsonOutput
from acp_driver.cli._signals import Routed

WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)


@pytest.fixture
def dispositions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, Any]]]:
    """Every ``signal.signal`` call for the watched signals, in order (asyncio's included: it
    calls ``signal.signal`` through the module too); the dispositions are put back after."""
    saved = {sig: signal.getsignal(sig) for sig in WATCHED}
    real = signal.signal
    calls: list[tuple[int, Any]] = []

    def spy(signum: int, handler: Any) -> Any:
        if signum in WATCHED:
            calls.append((signum, handler))
        return real(signum, handler)

    monkeypatch.setattr(signal, "signal", spy)
    try:
        yield calls
    finally:
        for sig, handler in saved.items():
            real(sig, handler)


def _gaps(calls: list[tuple[int, Any]]) -> list[tuple[str, Any]]:
    return [(signal.Signals(sig).name, handler) for sig, handler in calls if handler in DEFAULTS]


def test_run_and_chat_go_from_their_handler_straight_to_ignore(dispositions: list[tuple[int, Any]]) -> None:
    """``Controller`` (``run``, ``chat``) from ``install`` to ``uninstall``, in a real loop."""

    async def main() -> None:
        controller = Controller(JsonOutput())
        controller.install()
        controller.uninstall()

    asyncio.run(main())
    assert {sig for sig, _ in dispositions} == set(SIGNALS)
    assert _gaps(dispositions) == []
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in SIGNALS)


def test_check_never_leaves_a_signal_at_the_default(
    dispositions: list[tuple[int, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``check``'s handlers, installed before ``asyncio.run`` (which then installs no SIGINT
    handler of its own, and so restores Python's at its end none), then ignored; real signals
    once the audit is over leave its exit code. The audit is replaced by an empty one: the
    dispositions are the subject, not the audit."""

    def audit(opts: argparse.Namespace, argv: list[str], cwd: str | None) -> int:
        asyncio.run(_check._running(asyncio.sleep(0)))
        os.kill(os.getpid(), signal.SIGTERM)  # the audit is over: this changes nothing
        os.kill(os.getpid(), signal.SIGINT)
        return 6

    monkeypatch.setattr(_check, "check_command", audit)
    assert _main._check_obeying_signals(argparse.Namespace(), ["agent"], None) == 6
    assert _gaps(dispositions) == []
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in WATCHED)


def test_serve_keeps_its_handlers_through_the_close_then_ignores(
    dispositions: list[tuple[int, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` (the server replaced by one that closes at once): a real SIGHUP stops it, the
    handlers are still there while its agents are closed, and then every signal is ignored."""
    from acp_driver import remote
    from acp_driver.cli import _serve

    during_close: list[Any] = []

    class Server:
        url = "http://127.0.0.1:1/acp"

        async def aclose(self) -> None:
            during_close.extend(signal.getsignal(sig) for sig in WATCHED)

    async def serve_command(*args: Any, **kwargs: Any) -> Server:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGHUP)
        return Server()

    monkeypatch.setattr(remote, "serve_command", serve_command)
    assert asyncio.run(_serve._serve(["agent"], None)) == 0
    assert all(callable(handler) for handler in during_close), during_close
    assert _gaps(dispositions) == []
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in WATCHED)


def test_a_routed_signal_reaches_the_loop_and_none_after_ignore() -> None:
    """Real signals (SIGUSR1, which nothing else here uses): delivered while the loop waits in
    ``select``, handed to the callback on the loop; after ``ignore`` neither a death nor a call,
    not even for one delivered just before ``ignore`` and not yet handed over."""
    saved = signal.getsignal(signal.SIGUSR1)
    got: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()

        def on_signal(signum: int) -> None:
            got.append(signum)
            arrived.set()

        routed = Routed(loop, on_signal, (signal.SIGUSR1,))
        sender = threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGUSR1))
        sender.start()  # from another thread: the loop is waiting in select meanwhile
        await asyncio.wait_for(arrived.wait(), 30)  # no other wake-up: only the signal's
        sender.join()
        os.kill(os.getpid(), signal.SIGUSR1)  # handled (by Python) before kill returns...
        routed.ignore()  # ...but not handed over yet: dropped
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(3):
            await asyncio.sleep(0)

    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGUSR1, saved)
    assert got == [signal.SIGUSR1]


def test_routed_keeps_an_inherited_ignore(monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_driver.cli import _signals

    monkeypatch.setattr(_signals, "INHERITED_IGNORED", frozenset({signal.SIGHUP}))
    installed: list[int] = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: installed.append(signum))
    noop: Callable[[int], object] = lambda signum: None  # noqa: E731
    loop = asyncio.new_event_loop()
    try:
        routed = Routed(loop, noop, WATCHED)
    finally:
        loop.close()
    assert routed.signals == (signal.SIGINT, signal.SIGTERM)
    assert installed == [signal.SIGINT, signal.SIGTERM]
