#!/usr/bin/env python3
"""How long a big trace takes to draw and to open: ``python3 benchmarks/trace_page.py [EVENTS]``.

Writes traces of about EVENTS lines (default 100 000) shaped like real recordings: one agent,
turns in one session, each streaming its updates; every fifth turn is cancelled, the agent
ignores it and the ladder climbs to SIGTERM (``cancel``, ``rung``, ``resolved`` events,
``session/cancel`` and ``$/cancel_request`` on the wire). Three shapes: 50 turns (2000 updates
each), 1000 turns (100 updates each: a thousand lanes), and one turn answered at once whose
updates all come after its answer (every one a late update). For each, best of three:

- ``acp-driver trace FILE --html OUT -q`` (read, analyse, draw) and ``--chrome OUT -q``, as
  subprocesses (wall time, the interpreter's start included, and CPU time);
- the page in headless Chromium (Debian's ``chromium``): from navigation to the load event,
  and to the first frame painted after it; then one zoom (the layout of every element placed in
  time, and the axis redrawn).

Prints the numbers; asserts nothing (the machine's load decides them).
"""

from __future__ import annotations

import asyncio
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
SESSION = "sess_benchmark"


def write_trace(path: Path, events: int, turns: int, late: bool = False) -> int:
    per_turn = max(1, (events - 10) // turns - 8)
    lines: list[dict[str, Any]] = []
    t = 0.0

    def add(kind: str, **fields: Any) -> None:
        lines.append({"id": len(lines), "t": round(t, 6), "kind": kind, **fields})

    def wire(direction: str, msg: dict[str, Any]) -> None:
        add("wire", dir=direction, msg=msg)

    add("trace", v=1, tool="acp-driver bench", started="2026-01-01T00:00:00Z", role="host", agent=["agent"])
    add("spawn", pid=4242, argv=["agent"], supervised=False)
    wire("out", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    t += 0.01
    wire("in", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "bench"}}})
    wire(
        "out", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
    )
    wire("in", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SESSION}})
    rid = 2
    for turn in range(turns):
        t += 0.05
        prompt = rid
        rid += 1
        wire(
            "out",
            {
                "jsonrpc": "2.0",
                "id": prompt,
                "method": "session/prompt",
                "params": {
                    "sessionId": SESSION,
                    "prompt": [{"type": "text", "text": f"/stream {per_turn} 1"}],
                },
            },
        )
        cancelled = turn % 5 == 4 and not late
        if late:
            wire("in", {"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
        for i in range(per_turn):
            t += 0.001
            if cancelled and i == per_turn // 2:
                add("cancel", scope="current_turn", by="host", session=SESSION, request=prompt,
                    schedule={"session_cancel": 0.0, "cancel_request": 1.0, "terminate": 1.5, "kill": 2.0})  # fmt: skip
                add("rung", rung="session_cancel", session=SESSION, due=0.0, next=1.0)
                wire("out", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SESSION}})
                cancel_at = t
            if cancelled and i == per_turn * 3 // 4:
                add("rung", rung="cancel_request", session=SESSION, due=1.0, next=1.5)
                wire("out", {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompt}})
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"chunk {i}\n"},
            }
            wire(
                "in",
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": SESSION, "update": update},
                },
            )
        t += 0.001
        if late:
            continue
        if cancelled:
            add("rung", rung="terminate", session=SESSION, due=1.5, next=2.0)
            add("resolved", session=SESSION, resolution="killed", stop_reason=None, by="terminate",
                cancelled_by=None, elapsed=round(t - cancel_at, 6))  # fmt: skip
        else:
            wire("in", {"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
            add("resolved", session=SESSION, resolution="completed", stop_reason="end_turn", by=None,
                cancelled_by=None, elapsed=0.1)  # fmt: skip
    add("exit", pid=4242, status=0, description="exited with status 0")
    add("connection_end", reason="closed")
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return len(lines)


def best_of(n: int, argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of ``n`` runs of ``argv`` (CPU: user + system, the
    figure a loaded machine does not inflate)."""
    best = (float("inf"), float("inf"))
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        best = min(best, (wall, cpu))
    return best


async def browser_times(page: Path) -> tuple[float, float, float]:
    sys.path.insert(0, str(ROOT))
    from tests.trace.browser import Browser

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise SystemExit("no chromium on this machine (Debian: apt-get install chromium)")
    best = (float("inf"), float("inf"), float("inf"))
    for _ in range(3):
        browser = await Browser.start(binary)
        try:
            await browser.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})  # fmt: skip
            loaded = browser.when("Page.loadEventFired")
            started = time.perf_counter()
            await browser.send("Page.navigate", {"url": page.resolve().as_uri()})
            await loaded
            load = time.perf_counter() - started
            await browser.send(
                "Runtime.evaluate",
                {"expression": "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))", "awaitPromise": True},
            )  # fmt: skip
            painted = time.perf_counter() - started
            zoomed = await browser.send(
                "Runtime.evaluate",
                {
                    "expression": "new Promise(r => { const s = performance.now(); const end = +document.getElementById('timeline').dataset.end;"
                    " window.acpTimeline.zoomTo(end / 4, end / 2);"
                    " requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now() - s))); })",
                    "awaitPromise": True,
                    "returnByValue": True,
                },
            )  # fmt: skip
            zoom = float(zoomed["result"]["value"]) / 1000
            assert browser.console_errors == [], browser.console_errors
        finally:
            await browser.close()
        best = (min(best[0], load), min(best[1], painted), min(best[2], zoom))
    return best


def main() -> int:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    cli = [sys.executable, "-m", "acp_driver", "trace"]
    shapes = (("50 turns", 50, False), ("1000 turns", 1000, False), ("1 turn, all updates late", 1, True))
    with tempfile.TemporaryDirectory(prefix="acp-trace-bench-") as folder:
        for name, turns, late in shapes:
            trace = Path(folder) / "big.ndjson"
            written = write_trace(trace, events, turns, late)
            page, chrome = Path(folder) / "big.html", Path(folder) / "big.json"
            draw = best_of(3, [*cli, str(trace), "--html", str(page), "-q"])
            export = best_of(3, [*cli, str(trace), "--chrome", str(chrome), "-q"])
            load, painted, zoom = asyncio.run(browser_times(page))
            print(
                f"{name}: {written} events, {trace.stat().st_size / 1e6:.1f} MB; page {page.stat().st_size / 1e6:.1f} MB"
            )
            print(f"  acp-driver trace --html (read, analyse, draw): {draw[0]:6.2f} s ({draw[1]:.2f} s CPU)")
            print(
                f"  acp-driver trace --chrome:                     {export[0]:6.2f} s ({export[1]:.2f} s CPU)"
            )
            print(f"  chromium: navigation to load event:            {load:6.2f} s")
            print(f"  chromium: navigation to first frame:           {painted:6.2f} s")
            print(f"  chromium: one zoom (layout, axis, 2 frames):   {zoom:6.3f} s")
            print(f"  from the file to a painted page:               {draw[0] + painted:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
