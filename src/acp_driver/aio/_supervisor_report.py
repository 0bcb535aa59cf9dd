"""How a spawn learns that its child started: the supervisor's first report, on a pipe.

The supervisor (``_supervisor.py``) writes one line before anything else: ``p PID`` (the child
runs), ``e ERRNO`` (its exec failed: the host raises that ``OSError``, as without a
supervisor) or ``s ERRNO`` (the supervisor itself could not set up, e.g. ``prctl`` refused:
the host falls back to an unsupervised child). ``ProcessGroup.spawn`` reads it blocking,
``aspawn`` awaits it; a supervisor that does not report in time is abandoned without blocking.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import threading
import time

_SUPERVISOR_START_TIMEOUT = 30.0


class SupervisorUnavailableError(OSError):
    """The supervisor could not set itself up (``prctl`` refused); nothing was started."""


def read_first_report(fd: int) -> tuple[str, int, bytes]:
    """The supervisor's first report, blocking until it comes (see ``_parse_first_report``)."""
    deadline = time.monotonic() + _SUPERVISOR_START_TIMEOUT
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise OSError("the supervisor did not report in time")
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return parse_first_report(data)


async def await_first_report(fd: int) -> tuple[str, int, bytes]:
    """The supervisor's first report, awaited (see ``_parse_first_report``)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    data = bytearray()

    def on_readable() -> None:
        try:
            chunk = os.read(fd, 256)
        except BlockingIOError:
            return
        data.extend(chunk)
        if (not chunk or b"\n" in data) and not done.done():
            done.set_result(None)

    os.set_blocking(fd, False)
    loop.add_reader(fd, on_readable)
    try:
        async with asyncio.timeout(_SUPERVISOR_START_TIMEOUT):
            await done
    except TimeoutError:
        raise OSError("the supervisor did not report in time") from None
    finally:
        loop.remove_reader(fd)
    return parse_first_report(bytes(data))


def parse_first_report(data: bytes) -> tuple[str, int, bytes]:
    """The supervisor's first line: ``p PID``, ``e ERRNO`` or ``s ERRNO``.

    Returns its kind, its number and what followed it (a child that exits at once: ``x STATUS``).
    """
    if b"\n" not in data:
        raise SupervisorUnavailableError(0, "the supervisor exited without a report")
    line, rest = data.split(b"\n", 1)
    kind, _, value = line.decode("ascii", "replace").partition(" ")
    if kind not in ("p", "e", "s") or not value.isdigit():
        raise OSError(f"unexpected supervisor report {line!r}")
    return kind, int(value), rest


def abandon(popen: subprocess.Popen[bytes], report_r: int) -> None:
    """Give up a supervisor that has not reported yet, without blocking: it ends its child."""
    os.close(report_r)
    close_stdio(popen)
    with contextlib.suppress(OSError):
        popen.send_signal(signal.SIGTERM)  # handled once it started the child: the child's tree ends
    threading.Thread(target=popen.wait, name=f"reap-{popen.pid}", daemon=True).start()


def close_stdio(popen: subprocess.Popen[bytes]) -> None:
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
