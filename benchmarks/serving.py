"""Shared by the remote benchmarks: start a server subprocess that announces
``listening on http://HOST:PORT/acp`` on stderr (``acp-driver serve``, ``peers/sdk_server.py``),
and find the processes below it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

READY = re.compile(r"listening on (http://[\d.]+:\d+/acp)")


@dataclass
class Server:
    process: asyncio.subprocess.Process
    url: str  # http://HOST:PORT/acp


@contextlib.asynccontextmanager
async def server(argv: list[str], ready_timeout: float = 60) -> AsyncIterator[Server]:
    """Start ``argv``, yield it once its ready line came (stderr is drained meanwhile), then SIGTERM
    it (SIGKILL if it does not exit within 60 s)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    stderr = proc.stderr
    draining: asyncio.Task[None] | None = None
    try:
        seen = []
        async with asyncio.timeout(ready_timeout):
            while True:
                line = (await stderr.readline()).decode()
                if not line:
                    raise RuntimeError(f"{argv} exited before listening: {''.join(seen)}")
                seen.append(line)
                match = READY.search(line)
                if match:
                    break

        async def drain() -> None:  # keep its stderr pipe from filling up
            while await stderr.read(65536):
                pass

        draining = asyncio.ensure_future(drain())
        yield Server(proc, match.group(1))
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(60):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if draining is not None:
            draining.cancel()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
