"""The official Python SDK's ``Connection`` in a subprocess (``sdk_peer.py``), attached to our
``acp_driver.aio.Connection`` over real OS pipes (our pipe transports, or asyncio streams), with
a trace of every line our side received and sent (fixture ``sdk_peer`` in ``conftest.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_driver.aio import Connection

PEER_SCRIPT = Path(__file__).with_name("sdk_peer.py")
PEER_EXIT_TIMEOUT = 10.0


@dataclass
class Trace:
    """Every raw line our connection received ("in") or queued for the wire ("out")."""

    lines: list[tuple[str, float, bytes]] = field(default_factory=list)

    def __call__(self, direction: str, data: bytes) -> None:
        self.lines.append((direction, time.monotonic(), bytes(data)))

    def messages(self, direction: str) -> list[dict[str, Any]]:
        return [json.loads(data) for d, _, data in self.lines if d == direction]

    def timed(self, direction: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, json.loads(data)) for d, t, data in self.lines if d == direction]

    def dump(self) -> str:
        return "\n".join(f"{d:>3} {data.decode(errors='replace').rstrip()}" for d, _, data in self.lines)


@dataclass
class Peer:
    conn: Connection
    trace: Trace
    process: asyncio.subprocess.Process
    stderr_path: Path
    transport: str

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def report(self) -> str:
        """Both sides' view, for assertion messages."""
        return (
            f"--- our trace ({self.transport}) ---\n{self.trace.dump()}\n"
            f"--- SDK peer stderr ---\n{self.stderr()}"
        )


async def spawn(transport: str, stderr: Any) -> tuple[asyncio.subprocess.Process, Any, Any]:
    """Start the SDK peer; return it and the (reader, writer) our side uses."""
    cmd = (sys.executable, "-u", str(PEER_SCRIPT))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if transport == "streams":
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        return proc, proc.stdout, proc.stdin
    # "pipes": plain os.pipe() pairs, driven by our own pipe transports (open_pipes).
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=child_in, stdout=child_out, stderr=stderr, env=env
        )
    except BaseException:
        for fd in (child_in, to_child, from_child, child_out):
            os.close(fd)
        raise
    os.close(child_in)
    os.close(child_out)
    reader = os.fdopen(from_child, "rb", buffering=0)
    writer = os.fdopen(to_child, "wb", buffering=0)
    return proc, reader, writer


async def reap(proc: asyncio.subprocess.Process) -> int | None:
    """Wait for the peer to exit on its own (it does at end of input); kill it otherwise."""
    try:
        async with asyncio.timeout(PEER_EXIT_TIMEOUT):
            return await proc.wait()
    except TimeoutError:
        pass
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    return None
