#!/usr/bin/env python3
"""Remote transports next to stdio: updates/s and cancel latency, acp-driver's ``serve`` and the
official Python SDK's server (1.0.0rc3 ``[http]``) in one table.

    .venv/bin/python benchmarks/remote.py [--quick] [--repeat N] [--write]

Every column is driven by the same host, acp-driver's (``launch`` for stdio, ``connect(url)`` for
the rest), and does the same protocol work per row:

- ``stdio``:           the reference agent as a subprocess over pipes (the baseline);
- ``serve ws/http``:   ``acp-driver serve`` (one reference-agent subprocess per connection,
  relayed) over WebSocket / Streamable HTTP;
- ``sdk-server ws/http``: the SDK's ``create_asgi_app`` under hypercorn, its agent
  (``peers/sdk_agent.BenchAgent``) in-process, over WebSocket / Streamable HTTP.

Rows: ``stream``: one turn streaming ``N`` ``agent_message_chunk`` updates, consumed as typed
updates through ``async for``: updates/s from the prompt to the answer; ``cancel``: a turn that
streamed one chunk and then sleeps is cancelled (``turn.cancel()``, i.e. ``session/cancel``):
milliseconds from the cancel to the turn resolved ``cancelled``, p50 and p99.

Self-checks (exit 1 when one fails): every stream turn received exactly ``N`` updates and ended
``end_turn``; every cancelled turn resolved ``cancelled``; every column ran every row.
``--write`` puts the table into docs/remote.md (between its markers) and the numbers into
``benchmarks/remote_results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

from serving import server  # noqa: E402

from acp_driver.driver import Resolution, connect, launch  # noqa: E402

DOC = ROOT / "docs" / "remote.md"
RESULTS = HERE / "remote_results.json"
BEGIN = "<!-- BEGIN GENERATED REMOTE RESULTS (benchmarks/remote.py) -->"
END = "<!-- END GENERATED REMOTE RESULTS -->"

COLUMNS = ["stdio", "serve ws", "serve http", "sdk-server ws", "sdk-server http"]


async def open_agent(column: str, urls: dict[str, str]) -> Any:
    if column == "stdio":
        return await launch([sys.executable, "-m", "acp_driver", "agent"], protocol=1)
    where, profile = column.rsplit(" ", 1)
    url = urls[where]
    if profile == "ws":
        url = "ws://" + url.removeprefix("http://")
    return await connect(url, protocol=1)


async def stream_once(column: str, urls: dict[str, str], n: int, cwd: str) -> float:
    agent = await open_agent(column, urls)
    try:
        session = await agent.new_session(cwd)
        started = time.perf_counter()
        turn = session.prompt(f"/stream {n} 0")
        count = 0
        async for update in turn:
            if update.kind == "agent_message_chunk":
                count += 1
        result = await turn
        elapsed = time.perf_counter() - started
    finally:
        await agent.aclose()
    if count != n or result.stop_reason != "end_turn":
        raise AssertionError(f"{column}: stream got {count}/{n} updates, stop {result.stop_reason!r}")
    return n / elapsed


async def cancel_latencies(column: str, urls: dict[str, str], k: int, cwd: str) -> list[float]:
    agent = await open_agent(column, urls)
    out = []
    try:
        session = await agent.new_session(cwd)
        for _ in range(k):
            turn = session.prompt("/stream 1 0\n/sleep 60000")
            async for update in turn:
                if update.kind == "agent_message_chunk":
                    break
            started = time.perf_counter()
            outcome = await turn.cancel()
            out.append((time.perf_counter() - started) * 1000)
            result = await turn
            if outcome.resolution is not Resolution.CANCELLED or result.stop_reason != "cancelled":
                raise AssertionError(
                    f"{column}: cancel resolved {outcome.resolution}, stop {result.stop_reason!r}"
                )
    finally:
        await agent.aclose()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = 2000 if opts.quick else 20000
    k = 5 if opts.quick else 40
    py = sys.executable
    results: dict[str, dict[str, Any]] = {c: {"stream_ups": [], "cancel_ms": []} for c in COLUMNS}
    with tempfile.TemporaryDirectory() as cwd:
        async with (
            server([py, "-m", "acp_driver", "serve", "--port", "0"]) as ours,
            server([py, str(HERE / "peers" / "sdk_server.py"), "0"]) as theirs,
        ):
            urls = {"serve": ours.url, "sdk-server": theirs.url}
            for _ in range(opts.repeat):  # columns interleaved within each repeat
                for column in COLUMNS:
                    results[column]["stream_ups"].append(await stream_once(column, urls, n, cwd))
                    results[column]["cancel_ms"].extend(await cancel_latencies(column, urls, k, cwd))
    table = {}
    for column, got in results.items():
        table[column] = {
            "stream_ups": statistics.median(got["stream_ups"]),
            "cancel_p50_ms": pct(got["cancel_ms"], 0.5),
            "cancel_p99_ms": pct(got["cancel_ms"], 0.99),
            "runs": len(got["stream_ups"]),
            "cancels": len(got["cancel_ms"]),
        }
    return {"n_updates": n, "cancels_per_run": k, "repeat": opts.repeat, "columns": table}


def render(data: dict[str, Any]) -> str:
    cols = data["columns"]
    base = cols["stdio"]
    lines = [
        f"Updates per turn: {data['n_updates']}; cancels per run: {data['cancels_per_run']}; "
        f"repeats: {data['repeat']} (medians; cancel percentiles over all cancels). Host: acp-driver "
        f"in every column; machine: {platform.machine()}, Python {platform.python_version()}.",
        "",
        "| column | updates/s | vs stdio | cancel p50 ms | cancel p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in cols.items():
        lines.append(
            f"| {name} | {row['stream_ups']:,.0f} | {row['stream_ups'] / base['stream_ups']:.2f} | "
            f"{row['cancel_p50_ms']:.2f} | {row['cancel_p99_ms']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat: a smoke test")
    parser.add_argument("--repeat", type=int, default=None, help="runs per column (default 3, quick 1)")
    parser.add_argument("--write", action="store_true", help="update docs/remote.md and remote_results.json")
    opts = parser.parse_args()
    if opts.repeat is None:
        opts.repeat = 1 if opts.quick else 3
    try:
        data = asyncio.run(run(opts))
    except AssertionError as exc:
        print(f"SELF-CHECK FAILED: {exc}", file=sys.stderr)
        return 1
    text = render(data)
    print(text)
    if opts.write:
        RESULTS.write_text(json.dumps(data, indent=2) + "\n")
        doc = DOC.read_text()
        block = f"{BEGIN}\n{text}\n{END}"
        if BEGIN in doc:
            doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S)
        else:
            doc += "\n" + block + "\n"
        DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
