#!/usr/bin/env python3
"""Instructions per request on the stdio hot path, counted by callgrind (not timed).

Wall-clock rows are noisy on shared machines; instruction counts are repeatable, so this is the
tool to tell whether a change made the hot path heavier. For one source tree it counts, with
``valgrind --tool=callgrind``, the host process (and, separately, the agent process) running N
requests and running none, and prints the difference per request::

    python3 benchmarks/instructions.py                 # this repo's src/
    python3 benchmarks/instructions.py --src OTHER/src # another tree (e.g. a checkout of main)

Rows: host, 1000 concurrent echo requests per batch; agent, the same; host, sequential echo
round trips. Needs valgrind (Debian package ``valgrind``) and a python with orjson.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CLIENT = r"""
import asyncio, inspect, os, sys
from acp_driver.driver import launch, RemoteAgent

async def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    argv = [sys.executable, "-m", "acp_driver", "agent"]
    if os.environ.get("CG_AGENT_OUT"):
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.environ["CG_AGENT_OUT"], *argv]
    options = {"init_timeout": 300}
    if "supervise" in inspect.signature(RemoteAgent.launch).parameters:
        options["supervise"] = False  # measure the protocol path only
    agent = await launch(argv, **options)
    for _ in range(n):
        if mode == "seq":
            for _ in range(10):
                await agent.request("_acp_driver/echo", {"x": 1}, timeout=300)
        else:
            await asyncio.gather(*[agent.request("_acp_driver/echo", {"x": 1}, timeout=300) for _ in range(1000)])
    await agent.aclose()

asyncio.run(main())
"""


def collected(out: str) -> int:
    text = Path(out).read_text(errors="replace")
    match = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if match is None:
        raise SystemExit(f"no instruction total in {out}")
    return int(match.group(1))


def count(src: Path, mode: str, n: int, who: str, work: Path) -> int:
    script = work / "client.py"
    script.write_text(CLIENT)
    env = dict(os.environ, PYTHONPATH=str(src))
    out = str(work / f"{who}-{mode}-{n}.out")
    if who == "host":
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            str(script),
            mode,
            str(n),
        ]
    else:
        env["CG_AGENT_OUT"] = out
        cmd = [sys.executable, str(script), mode, str(n)]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=1800)
    return collected(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--src", type=Path, default=ROOT / "src", help="the acp_driver source tree to measure"
    )
    opts = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind not found (Debian package 'valgrind')", file=sys.stderr)
        return 2
    src = opts.src.resolve()
    rows = [("host", "conc", 10, 10_000), ("agent", "conc", 10, 10_000), ("host", "seq", 100, 1_000)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"source tree: {src}")
        for who, mode, n, requests in rows:
            base = count(src, mode, 0, who, work)
            loaded = count(src, mode, n, who, work)
            label = "1000 concurrent" if mode == "conc" else "sequential"
            print(f"{who:5} {label:16} {(loaded - base) / requests:10,.0f} instructions/request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
