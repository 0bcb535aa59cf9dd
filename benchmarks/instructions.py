#!/usr/bin/env python3
"""Instructions per request on the stdio hot path, counted by callgrind (not timed).

Wall-clock rows are noisy on shared machines; instruction counts are repeatable, so this is the
tool to tell whether a change made the hot path heavier. For one source tree it counts, with
``valgrind --tool=callgrind``, the host process (and, separately, the agent process) running N
requests and running none, and prints the difference per request::

    python3 benchmarks/instructions.py                 # this repo's src/
    python3 benchmarks/instructions.py --src OTHER/src # another tree (e.g. a checkout of main)

Rows: host, 1000 concurrent echo requests per batch; agent, the same; host, sequential echo
round trips. Then the latency rows of ``run.py`` (H1/H5, A1/A5) as instructions, one side at a
time with the ceiling's other side not counted: per sequential round trip and per cancel (a busy
turn's first update, ``session/cancel``, the ``cancelled`` answer), acp-driver's host against the
ceiling host (both driving the ceiling agent), and the reference agent against the ceiling agent
(both driven by the ceiling host); ``--latency`` counts only those. Then the host-only rows of
``run.py`` (H2, H4): acp-driver's host and the ceiling host (``runners/ceiling_host.py``), each
driving the ceiling agent (not counted), per request (1000 concurrent) and per ``session/update``
(consumed through ``async for update in turn`` for acp-driver); ``--traced`` adds acp-driver's
host stream with a trace recorded (what ``--trace`` costs per update). Needs valgrind (Debian
package ``valgrind``) and a python with orjson.
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


# The host-only rows: a host drives the ceiling agent (benchmarks/peers/ceiling_agent.py, not
# under valgrind), so the count is the host's alone and comparable with the ceiling host's.
HOST_ONLY = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[3])
from _common import CEILING_AGENT, ECHO_PARAMS

async def acp_driver(mode, n):
    import os
    from acp_driver.driver import launch
    traced = {"trace": os.environ["CG_TRACE"]} if os.environ.get("CG_TRACE") else {}
    agent = await launch([sys.executable, CEILING_AGENT], init_timeout=300, **traced)
    session = await agent.new_session("/tmp")
    if mode == "stream":
        turn = session.prompt(f"/stream {n} 0")
        count = 0
        async for _update in turn:
            count += 1
        await turn
        assert count == n
    else:
        for _ in range(n // 1000):
            await asyncio.gather(*(agent.request("_bench/echo", ECHO_PARAMS) for _ in range(1000)))
    await agent.shutdown()

async def ceiling(mode, n):
    import ceiling_host as ch
    proc, client = await ch.start()
    sid = (await client.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
    if mode == "stream":
        count = 0
        def on_update(params):
            nonlocal count
            count += params["update"]["sessionUpdate"] == "agent_message_chunk"
        client.on_update = on_update
        prompt = [{"type": "text", "text": f"/stream {n} 0"}]
        await client.request("session/prompt", {"sessionId": sid, "prompt": prompt})
        assert count == n
    else:
        for _ in range(n // 1000):
            await asyncio.gather(*(client.request_future("_bench/echo", ECHO_PARAMS)[1] for _ in range(1000)))
    await ch.stop(proc, client)

impl, mode, n = sys.argv[4], sys.argv[1], int(sys.argv[2])
asyncio.run((acp_driver if impl == "acp-driver" else ceiling)(mode, n))
"""


# The latency rows (run.py's H1/H5 and A1/A5) as instructions: one side under callgrind, the other
# side the ceiling's (not counted). ``host``: acp-driver's host or the ceiling host drives the
# ceiling agent; ``agent``: the ceiling host drives the reference agent or the ceiling agent.
LATENCY = r"""
import asyncio, os, sys
sys.path.insert(0, sys.argv[3])
from _common import CEILING_AGENT, ECHO_PARAMS
BUSY_TURN = "/stream 1 0\n/sleep 60000"

async def acp_driver_host(mode, n):
    from acp_driver.driver import launch
    agent = await launch([sys.executable, CEILING_AGENT], init_timeout=300)
    session = await agent.new_session("/tmp")
    for _ in range(n):
        if mode == "seq":
            assert await agent.request("_bench/echo", ECHO_PARAMS) == ECHO_PARAMS
        else:
            turn = session.prompt(BUSY_TURN)
            await turn.__anext__()
            await turn.cancel()
            assert (await turn).stop_reason == "cancelled"
    await agent.shutdown()

async def ceiling_host(mode, n, agent=None, echo="_bench/echo"):
    import ceiling_host as ch
    if agent is not None:
        ch.AGENT = agent
    proc, client = await ch.start()
    sid = (await client.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
    loop = asyncio.get_running_loop()
    for _ in range(n):
        if mode == "seq":
            assert await client.request(echo, ECHO_PARAMS) == ECHO_PARAMS
        else:
            started = loop.create_future()
            client.on_update = lambda _p, f=started: f.done() or f.set_result(None)
            prompt = [{"type": "text", "text": BUSY_TURN}]
            turn = loop.create_task(client.request("session/prompt", {"sessionId": sid, "prompt": prompt}))
            await started
            client.notify("session/cancel", {"sessionId": sid})
            assert (await turn)["stopReason"] == "cancelled"
    await ch.stop(proc, client)

side, impl, mode, n = sys.argv[4], sys.argv[5], sys.argv[1], int(sys.argv[2])
if side == "host":
    asyncio.run((acp_driver_host if impl == "acp-driver" else ceiling_host)(mode, n))
else:
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.environ["CG_AGENT_OUT"]]
    if impl == "acp-driver":
        argv, echo = [*grind, sys.executable, "-m", "acp_driver", "agent"], "_acp_driver/echo"
    else:
        argv, echo = [*grind, sys.executable, CEILING_AGENT], "_bench/echo"
    asyncio.run(ceiling_host(mode, n, argv, echo))
"""


# What one method call costs: the threshold for an inline copy of a rule (docs/benchmarks.md,
# "Inline copies") is stated against it.
CALL_COST = r"""
import sys

class C:
    __slots__ = ("run", "valid")

    def __init__(self):
        self.run = 0
        self.valid = False

    def heard(self):
        if self.run:
            self.run = 0
        if not self.valid:
            self.valid = True

    def called(self, n):
        for _ in range(n):
            self.heard()

    def inline(self, n):
        for _ in range(n):
            if self.run:
                self.run = 0
            if not self.valid:
                self.valid = True

getattr(C(), sys.argv[1])(int(sys.argv[2]))
"""


def call_cost(work: Path) -> tuple[float, float]:
    """Instructions per loop turn: calling a two-line method, and the same two lines inline."""
    script = work / "call_cost.py"
    script.write_text(CALL_COST)
    per = []
    for way in ("called", "inline"):
        counts = []
        for n in (0, 100_000):
            out = str(work / f"call-{way}-{n}.out")
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
            subprocess.run([*cmd, str(script), way, str(n)], check=True, capture_output=True, timeout=600)
            counts.append(collected(out))
        per.append((counts[1] - counts[0]) / 100_000)
    return per[0], per[1]


def count_latency(src: Path, side: str, impl: str, mode: str, n: int, work: Path) -> int:
    """Instructions of one side (host or agent) of ``n`` round trips or cancels, the other side
    the ceiling's."""
    script = work / "latency.py"
    script.write_text(LATENCY)
    env = dict(os.environ, PYTHONPATH=str(src))
    out = str(work / f"latency-{side}-{impl}-{mode}-{n}.out")
    runners = str(ROOT / "benchmarks" / "runners")
    cmd = [sys.executable, str(script), mode, str(n), runners, side, impl]
    if side == "host":
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
    else:
        env["CG_AGENT_OUT"] = out
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=1800)
    return collected(out)


def count_host_only(src: Path, impl: str, mode: str, n: int, work: Path, traced: bool = False) -> int:
    script = work / "host_only.py"
    script.write_text(HOST_ONLY)
    env = dict(os.environ, PYTHONPATH=str(src))
    if traced:
        env["CG_TRACE"] = str(work / "trace.ndjson")  # acp-driver's host records a --trace file
    out = str(work / f"host-only-{impl}-{mode}-{n}.out")
    runners = ROOT / "benchmarks" / "runners"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    subprocess.run(
        [*cmd, str(script), mode, str(n), str(runners), impl],
        env=env,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    return collected(out)


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
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="only the host-only rows (H2, H4), acp-driver's host and the ceiling host",
    )
    parser.add_argument(
        "--traced",
        action="store_true",
        help="also acp-driver's host stream with a trace recorded (launch(trace=FILE)): tracing's cost",
    )
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="host-only rows without the ceiling host (its code does not change between trees)",
    )
    parser.add_argument(
        "--call-cost",
        action="store_true",
        help="only what a method call costs (a two-line method called against the lines inline)",
    )
    parser.add_argument(
        "--latency",
        action="store_true",
        help="only the latency rows: round trips and cancels (H1/H5, A1/A5), each side alone",
    )
    opts = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind not found (Debian package 'valgrind')", file=sys.stderr)
        return 2
    src = opts.src.resolve()
    # Bytecode first: a module compiled during one of the counted runs (a file edited since the
    # last import) would add its compilation to that run only and skew the difference.
    for tree in (src, ROOT / "benchmarks" / "runners", ROOT / "benchmarks" / "peers"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], capture_output=True)
    rows = [("host", "conc", 10, 10_000), ("agent", "conc", 10, 10_000), ("host", "seq", 100, 1_000)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if opts.call_cost:
            called, inline = call_cost(work)
            print(f"a loop turn calling a two-line method: {called:,.0f} instructions; inline: {inline:,.0f}")
            print(f"one method call: {called - inline:,.0f} instructions")
            return 0
        print(f"source tree: {src}")
        for who, mode, n, requests in [] if opts.host_only or opts.latency else rows:
            base = count(src, mode, 0, who, work)
            loaded = count(src, mode, n, who, work)
            label = "1000 concurrent" if mode == "conc" else "sequential"
            print(f"{who:5} {label:16} {(loaded - base) / requests:10,.0f} instructions/request")
        # Latency (rows H1/H5, A1/A5 of run.py): one side counted, the other the ceiling's.
        impls = ("acp-driver",) if opts.no_ceiling else ("acp-driver", "ceiling")
        for side in () if opts.host_only else ("host", "agent"):
            for mode, unit, n in (("seq", "round trip", 1000), ("cancel", "cancel", 200)):
                per = {}
                for impl in impls:
                    base = count_latency(src, side, impl, mode, 0, work)
                    loaded = count_latency(src, side, impl, mode, n, work)
                    per[impl] = (loaded - base) / n
                text = f"{side} only, {unit}: acp-driver {per['acp-driver']:,.0f}"
                if "ceiling" in per:
                    text += f", ceiling {per['ceiling']:,.0f} (ceiling ÷ acp-driver {per['ceiling'] / per['acp-driver']:.2f})"
                print(f"{text} instructions/{unit}")
        if opts.latency:
            return 0
        # Host only (rows H2/H4 of run.py), each host driving the ceiling agent.
        n = 20_000
        for mode, unit in (("conc", "request"), ("stream", "update")):
            per = {}
            for impl in ("acp-driver",) if opts.no_ceiling else ("acp-driver", "ceiling"):
                base = count_host_only(src, impl, mode, 0, work)
                loaded = count_host_only(src, impl, mode, n, work)
                per[impl] = (loaded - base) / n
            label = "1000 concurrent" if mode == "conc" else "update stream"
            if mode == "stream" and opts.traced:
                base = count_host_only(src, "acp-driver", mode, 0, work, traced=True)
                loaded = count_host_only(src, "acp-driver", mode, n, work, traced=True)
                traced = (loaded - base) / n
                print(
                    f"host only, {label}, traced: acp-driver {traced:,.0f} instructions/{unit} "
                    f"({traced / per['acp-driver']:.2f}x untraced)"
                )
            if "ceiling" not in per:
                print(f"host only, {label}: acp-driver {per['acp-driver']:,.0f} instructions/{unit}")
                continue
            ratio = per["ceiling"] / per["acp-driver"]
            print(
                f"host only, {label}: acp-driver {per['acp-driver']:,.0f}, ceiling host "
                f"{per['ceiling']:,.0f} instructions/{unit} (ceiling ÷ acp-driver {ratio:.2f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
