"""Scale of ``acp-driver serve``: many WebSocket connections streaming at once, all cancelled at once.

One ``acp-driver serve --port 0`` subprocess (the bundled reference agent, one process per
connection). The benchmark opens N WebSocket connections with plain ``websockets`` clients,
starts a long streaming turn on each (``/stream 100000 100``), waits until every one streams,
then sends ``session/cancel`` from every client at the same moment and measures the time until
every turn is answered ``cancelled``. Then every client disconnects and the server must reap
every agent. RSS of the ``serve`` process is read from /proc before and after the connections.

Self-checks (exit 1 if one fails): every connection streamed; every turn was answered
``cancelled``; all resolved within the target (2 s; reported, not enforced, with ``--quick``);
no agent process left after the connections closed.

    python benchmarks/remote_scale.py            # 200 connections
    python benchmarks/remote_scale.py --quick    # 20 connections, a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import websockets
from serving import descendants, rss_kib, server

TARGET_S = 2.0
STREAM = "/stream 100000 100"
"""Each turn: a chunk every 100 ms until cancelled (200 connections: 2000 updates/s in all)."""


class Client:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.sid = ""
        self.prompt_id = 3
        self.streaming = asyncio.Event()
        self.answer: dict[str, Any] | None = None
        self.answered_at = 0.0
        self.updates = 0
        self.closed = ""

    async def call(self, rid: int, method: str, params: Any) -> dict[str, Any]:
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        while True:
            message = json.loads(await self.ws.recv())
            if message.get("id") == rid and "method" not in message:
                return message

    async def start_turn(self) -> None:
        await self.call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await self.call(2, "session/new", {"cwd": "/", "mcpServers": []})
        self.sid = new["result"]["sessionId"]
        prompt = [{"type": "text", "text": STREAM}]
        await self.ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": self.prompt_id,
                    "method": "session/prompt",
                    "params": {"sessionId": self.sid, "prompt": prompt},
                }
            )
        )

    async def read(self) -> None:
        try:
            async for data in self.ws:
                message = json.loads(data)
                if message.get("method") == "session/update":
                    self.updates += 1
                    self.streaming.set()
                elif message.get("id") == self.prompt_id:
                    self.answer = message
                    self.answered_at = time.perf_counter()
                    return
        except websockets.ConnectionClosed as exc:
            self.closed = f"connection closed: {exc}"

    async def cancel(self) -> None:
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.sid}})
        )


async def run(connections: int, quick: bool) -> int:
    checks: list[tuple[str, bool, str]] = []
    rows: list[tuple[str, str]] = []
    argv = [
        sys.executable,
        "-m",
        "acp_driver",
        "serve",
        "--port",
        "0",
        "--max-connections",
        str(connections + 10),
    ]
    async with server(argv) as serve:
        process, url = serve.process, "ws" + serve.url[len("http") :]
        await asyncio.sleep(0)  # let the server settle; RSS before any connection
        rss_idle = rss_kib(process.pid)
        t0 = time.perf_counter()
        # No client pings: with hundreds of agents starting on a small machine a ping may wait
        # longer than its timeout, and liveness is not what is measured here.
        sockets = await asyncio.gather(
            *(
                websockets.connect(url, max_size=None, open_timeout=120, ping_interval=None)
                for _ in range(connections)
            )
        )
        clients = [Client(ws) for ws in sockets]
        await asyncio.gather(*(c.start_turn() for c in clients))
        readers = [asyncio.ensure_future(c.read()) for c in clients]
        try:
            async with asyncio.timeout(120):
                await asyncio.gather(*(c.streaming.wait() for c in clients))
        except TimeoutError:
            pass
        setup_s = time.perf_counter() - t0
        streaming = sum(c.streaming.is_set() for c in clients)
        checks.append(
            ("every connection streams its turn", streaming == connections, f"{streaming}/{connections}")
        )
        rss_loaded = rss_kib(process.pid)
        agents = len(descendants(process.pid))
        rows.append(("connections", str(connections)))
        rows.append(("setup (connect, initialize, session/new, first update)", f"{setup_s:.2f} s"))
        rows.append(("processes under serve (agents + supervisors)", str(agents)))

        cancel_at = time.perf_counter()
        await asyncio.gather(*(c.cancel() for c in clients), return_exceptions=True)
        try:
            async with asyncio.timeout(60):
                await asyncio.gather(*readers)
        except TimeoutError:
            pass
        answered = [c for c in clients if c.answer is not None]
        cancelled = sum(
            1 for c in answered if (c.answer or {}).get("result", {}).get("stopReason") == "cancelled"
        )
        latencies = sorted(c.answered_at - cancel_at for c in answered)
        all_resolved = latencies[-1] if len(latencies) == connections else float("inf")
        lost = [c.closed for c in clients if c.closed]
        detail = f"{cancelled}/{connections}" + (f" ({len(lost)} lost: {lost[0]})" if lost else "")
        checks.append(("every turn answered cancelled", cancelled == connections, detail))
        within = all_resolved <= TARGET_S
        checks.append(
            (
                f"all resolved within {TARGET_S:g} s" + (" (reported only with --quick)" if quick else ""),
                within or quick,
                f"{all_resolved:.3f} s",
            )
        )
        if latencies:
            rows.append(("cancel -> cancelled, p50", f"{latencies[len(latencies) // 2] * 1000:.1f} ms"))
            rows.append(("cancel -> cancelled, max (all resolved)", f"{latencies[-1] * 1000:.1f} ms"))
        rows.append(
            ("updates streamed before the cancel (all connections)", str(sum(c.updates for c in clients)))
        )
        rows.append(("serve RSS idle", f"{rss_idle / 1024:.1f} MiB"))
        rows.append(("serve RSS with the connections", f"{rss_loaded / 1024:.1f} MiB"))
        rows.append(("serve RSS per connection", f"{(rss_loaded - rss_idle) / connections:.0f} KiB"))

        closed_at = time.perf_counter()
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
        deadline = time.monotonic() + 60
        left = descendants(process.pid)
        while left and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            left = descendants(process.pid)
        rows.append(("close -> every agent reaped", f"{time.perf_counter() - closed_at:.2f} s"))
        checks.append(("no agent process left after the connections closed", not left, f"{len(left)} left"))

    width = max(len(name) for name, _ in rows)
    print(f"acp-driver serve, {connections} WebSocket connections ({'quick' if quick else 'full'})")
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>12}")
    failed = 0
    for name, ok, detail in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}")
        failed += not ok
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=None, help="how many (default 200; --quick: 20)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 20 connections, the time target reported only"
    )
    opts = parser.parse_args()
    connections = opts.connections or (20 if opts.quick else 200)
    return asyncio.run(run(connections, opts.quick))


if __name__ == "__main__":
    raise SystemExit(main())
