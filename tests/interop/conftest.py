"""Interop fixtures: the official ACP Python SDK (``agent-client-protocol``, import ``acp``) as a
peer in a subprocess, talking to our ``acp_driver.aio.Connection`` over real OS pipes.

Without the SDK (or with one older than ``SDK_MIN``) every test here is SKIPPED with the reason
in pytest's summary (``-ra``); set ``ACP_INTEROP_REQUIRED=1`` to make that a failure instead.
``ACP_INTEROP_TRACE=1`` (with ``-s``) prints both sides' view of the wire after each test.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.version import InvalidVersion, Version

from acp_driver.aio import Connection

SDK_DIST = "agent-client-protocol"
SDK_MIN = "1.0.0rc3"
PEER_SCRIPT = Path(__file__).with_name("sdk_peer.py")
PEER_EXIT_TIMEOUT = 10.0


@functools.cache
def sdk_problem() -> str | None:
    """Why the official SDK cannot be used here, or None when it can."""
    wanted = f"{SDK_DIST}>={SDK_MIN} (import name 'acp')"
    try:
        import acp.connection
        import acp.stdio  # noqa: F401
    except ImportError as exc:
        return f"the official ACP Python SDK is not importable: need {wanted}; {exc!r}"
    try:
        installed = importlib.metadata.version(SDK_DIST)
    except importlib.metadata.PackageNotFoundError:
        return f"'acp' imports but the distribution {SDK_DIST!r} is not installed: need {wanted}"
    try:
        too_old = Version(installed) < Version(SDK_MIN)
    except InvalidVersion:
        return f"{SDK_DIST} has an unparsable version {installed!r}: need {wanted}"
    if too_old:
        return f"{SDK_DIST} {installed} is installed, the interop tests need {wanted}"
    return None


@pytest.fixture(autouse=True)
def _require_sdk() -> None:
    problem = sdk_problem()
    if problem is None:
        return
    message = f"INTEROP TESTS NOT RUN: {problem}"
    if os.environ.get("ACP_INTEROP_REQUIRED"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


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


async def wait_for(predicate: Callable[[], bool], timeout: float, what: str, peer: Peer) -> None:
    """Poll ``predicate`` until true; fail with both sides' traces after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n{peer.report()}")
        await asyncio.sleep(0.01)


async def _spawn(transport: str, stderr: Any) -> tuple[asyncio.subprocess.Process, Any, Any]:
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


async def _reap(proc: asyncio.subprocess.Process) -> int | None:
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


@pytest.fixture(params=["pipes", "streams"])
async def sdk_peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    """Our ``Connection`` attached to a subprocess running the official SDK's ``Connection``."""
    transport: str = request.param
    stderr_path = tmp_path / "sdk_peer.stderr"
    trace = Trace()
    conn = Connection(name=f"ours-{transport}", tracer=trace)
    with stderr_path.open("wb") as stderr_file:
        proc, reader, writer = await _spawn(transport, stderr_file)
    peer = Peer(conn, trace, proc, stderr_path, transport)
    exited_cleanly: int | None = None
    try:
        if transport == "streams":
            await conn.open_streams(reader, writer)
        else:
            try:
                await conn.open_pipes(reader, writer)
            except BaseException:
                reader.close()
                writer.close()
                raise
        async with asyncio.timeout(30):  # the peer is up and answering before the test starts
            await conn.request("echo", {"warm_up": True})
        yield peer
    finally:
        try:
            async with asyncio.timeout(10):
                await conn.aclose("test over")
        finally:
            exited_cleanly = await _reap(proc)
            if os.environ.get("ACP_INTEROP_TRACE"):
                print(f"\n=== {request.node.name} ===\n{peer.report()}")
    # Closing our side ends the peer's stdin: the SDK's main_loop must return and the peer exit 0.
    assert exited_cleanly == 0, (
        f"SDK peer did not exit cleanly after we closed (exit status {proc.returncode}, "
        f"{'killed' if exited_cleanly is None else 'exited'})\n{peer.report()}"
    )
    assert conn.violations == 0, (
        f"our connection saw {conn.violations} protocol violation(s)\n{peer.report()}"
    )
