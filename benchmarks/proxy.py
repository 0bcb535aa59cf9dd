"""What ``acp-driver proxy`` costs an editor: the same client against the reference agent, direct and
through the proxy, in one run.

- round trip: ``_acp_driver/echo`` requests one after the other (each waits for its answer);
  p50 / p90 in microseconds, and the proxy's added p50;
- stream: one turn of ``/stream N 0`` (N message chunks as fast as the agent writes them);
  chunks per second, and the proxy's share of the direct rate;
- the proxy's RSS (``VmRSS``, ``VmHWM`` from ``/proc``) at the end of the stream.

    python benchmarks/proxy.py [--requests 2000] [--chunks 20000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

AGENT = [sys.executable, "-m", "acp_driver", "agent"]
PROXY = [sys.executable, "-m", "acp_driver", "proxy", "-q", "--"]


class Client:
    """A minimal NDJSON client on the agent's (or the proxy's) pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    @classmethod
    async def start(cls, argv: list[str]) -> Client:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=64 * 1024 * 1024,
        )
        return cls(process)

    def send(self, method: str, params: Any) -> int:
        assert self.process.stdin is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        return self.next_id

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if not line:
            raise EOFError("the agent ended")
        return orjson.loads(line)  # type: ignore[no-any-return]

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        request = self.send(method, params)
        while True:
            message = await self.read()
            if message.get("id") == request and "method" not in message:
                return message

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.wait()


def _rss(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


async def measure(argv: list[str], requests: int, chunks: int) -> dict[str, Any]:
    client = await Client.start(argv)
    await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = await client.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
    sid = session["result"]["sessionId"]
    for _ in range(200):  # warm-up
        await client.call("_acp_driver/echo", {"x": 1})
    times = []
    for i in range(requests):
        started = time.perf_counter()
        await client.call("_acp_driver/echo", {"i": i})
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    prompt = client.send(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"/stream {chunks} 0"}]}
    )
    seen = 0
    first: float | None = None
    while True:
        message = await client.read()
        if message.get("method") == "session/update":
            seen += 1
            if first is None:
                first = time.perf_counter()
        elif message.get("id") == prompt:
            break
    elapsed = time.perf_counter() - (first or time.perf_counter())
    memory = _rss(client.process.pid)
    await client.close()
    return {
        "p50_us": times[len(times) // 2],
        "p90_us": times[int(len(times) * 0.9)],
        "mean_us": statistics.fmean(times),
        "chunks": seen,
        "chunks_per_s": seen / elapsed if elapsed > 0 else float("inf"),
        "rss_mib": memory.get("VmRSS"),
        "hwm_mib": memory.get("VmHWM"),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    direct = await measure(AGENT, opts.requests, opts.chunks)
    proxied = await measure([*PROXY, *AGENT], opts.requests, opts.chunks)
    result = {
        "direct": direct,
        "proxy": proxied,
        "added_p50_us": proxied["p50_us"] - direct["p50_us"],
        "stream_ratio": proxied["chunks_per_s"] / direct["chunks_per_s"],
        "proxy_rss_mib": proxied["rss_mib"],
        "proxy_hwm_mib": proxied["hwm_mib"],
    }
    if opts.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"round trip p50: direct {direct['p50_us']:.0f} us, proxy {proxied['p50_us']:.0f} us "
            f"(added {result['added_p50_us']:.0f} us); p90 {direct['p90_us']:.0f} / {proxied['p90_us']:.0f} us"
        )
        print(
            f"stream: direct {direct['chunks_per_s']:.0f} chunks/s, proxy {proxied['chunks_per_s']:.0f} "
            f"chunks/s ({result['stream_ratio']:.2f}x)"
        )
        print(f"proxy RSS {proxied['rss_mib']:.1f} MiB (peak {proxied['hwm_mib']:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
