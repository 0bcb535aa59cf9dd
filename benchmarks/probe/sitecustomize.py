"""The event-loop probe of ``benchmarks/counts.py``: imported by every Python process whose
``PYTHONPATH`` starts with this directory (``site`` imports ``sitecustomize``), it does nothing
unless ``ACP_BENCH_PROBE`` names a directory.

Then it counts, in this process, how many times asyncio's loop went round (``_run_once``: one
``epoll_wait`` each), how many callbacks the loop ran (``Handle._run``), how many of those were
a task taking a step (a task switch: its ``__step`` or ``task_wakeup`` scheduled on the loop),
how many callbacks other threads handed to the loop (``call_soon_threadsafe``), and the
``os.read``/``os.write`` calls (asyncio's pipe transports read and write with them).
At exit it writes them, with ``sys.argv`` and the pid, to ``ACP_BENCH_PROBE/PID.json``.

Counting is all it does: no timing, no change to what runs when. Processes started with ``-S``
or ``-I`` (acp-driver's supervisor) do not load it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_DIR = os.environ.get("ACP_BENCH_PROBE")


def _install(directory: str) -> None:
    import asyncio
    import asyncio.base_events
    import asyncio.events
    import atexit
    import json
    import signal
    import sys

    counts = {"iterations": 0, "callbacks": 0, "task_steps": 0, "handoffs": 0, "reads": 0, "writes": 0}
    task_type = asyncio.Task
    run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]
    run_handle = asyncio.events.Handle._run

    def counted_run_once(self: asyncio.base_events.BaseEventLoop) -> None:
        counts["iterations"] += 1
        run_once(self)

    def counted_run(self: asyncio.events.Handle) -> None:
        counts["callbacks"] += 1
        if isinstance(getattr(self._callback, "__self__", None), task_type):  # type: ignore[attr-defined]
            counts["task_steps"] += 1
        run_handle(self)

    call_soon_threadsafe = asyncio.base_events.BaseEventLoop.call_soon_threadsafe

    def counted_call_soon_threadsafe(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["handoffs"] += 1  # a thread hands work to the loop (and wakes it: one more write)
        return call_soon_threadsafe(self, *args, **kwargs)

    os_read, os_write = os.read, os.write

    def counted_read(fd: int, n: int) -> bytes:
        counts["reads"] += 1
        return os_read(fd, n)

    def counted_write(fd: int, data: Any) -> int:
        counts["writes"] += 1
        return os_write(fd, data)

    asyncio.base_events.BaseEventLoop._run_once = counted_run_once  # type: ignore[attr-defined]
    asyncio.events.Handle._run = counted_run  # type: ignore[method-assign]
    asyncio.base_events.BaseEventLoop.call_soon_threadsafe = counted_call_soon_threadsafe  # type: ignore[method-assign]
    os.read = counted_read
    os.write = counted_write

    written = False

    def dump() -> None:
        nonlocal written
        if written:
            return
        written = True
        path = os.path.join(directory, f"{os.getpid()}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), "argv": sys.argv, **counts}, f)

    atexit.register(dump)
    hard_exit = os._exit

    def exit_after_dump(code: int) -> None:  # os._exit skips atexit
        dump()
        hard_exit(code)

    os._exit = exit_after_dump  # type: ignore[assignment]

    def on_sigterm(signum: int, frame: object) -> None:
        dump()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_sigterm)


if _DIR:
    _install(_DIR)
