#!/usr/bin/env python3
"""Profile one workload of one implementation with py-spy (host and agent processes together).

    python3 benchmarks/profile.py WORKLOAD [--impl acp-driver|ceiling] [--scale 20] [--top 25]
    python3 benchmarks/profile.py --memory WORKLOAD [--impl ...]   # tracemalloc peak in the host

py-spy is installed into ``benchmarks/.work/tools`` on first use. The runner of ``--impl`` runs
WORKLOAD only, with the full sizes multiplied by ``--scale`` (so the workload dominates the
profile), under ``py-spy record --subprocesses``; the raw samples are summarised per process:
self time and inclusive time per function, in % of that process's samples (py-spy drops idle
samples, so this is CPU time). Raw data stays in ``benchmarks/.work/profiles/``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import run as harness

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def tools_python() -> Path:
    return harness.ensure_venv(
        harness.WORK / "tools",
        ["py-spy"],
        "import shutil, sys, os; sys.exit(0 if os.path.exists(os.path.join(os.path.dirname(sys.executable), 'py-spy')) else 1)",
    )


def scaled(workload: str, scale: float) -> dict[str, object]:
    cfg: dict[str, object] = dict(harness.SIZES["full"])
    for key in ("seq", "conc1k_rounds", "conc10k_rounds", "stream", "cancel", "cold"):
        cfg[key] = max(1, int(float(cfg[key]) * scale))  # type: ignore[arg-type]
    cfg["workloads"] = [workload]
    return cfg


def short(frame: str) -> str:
    m = FRAME.match(frame)
    if not m:
        return frame
    path = m.group("file")
    for marker in ("site-packages/", "python3.11/", "src/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{m.group('func')} ({path})"


def summarise(raw: Path, top: int) -> str:
    by_proc: dict[str, dict[str, collections.Counter[str]]] = {}
    totals: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        procs = [f for f in frames if f.startswith("process ")]
        proc = procs[-1] if procs else "process ?"
        proc = re.sub(r'^process \d+:"(.*)"$', r"\1", proc)
        proc = "agent" if ("agent" in proc or "peers/" in proc) else "host"
        frames = [short(f) for f in frames if not f.startswith("process ")]
        if not frames:
            continue
        stats = by_proc.setdefault(proc, {"self": collections.Counter(), "incl": collections.Counter()})
        totals[proc] += count
        stats["self"][frames[-1]] += count
        for f in set(frames):
            stats["incl"][f] += count
    out = []
    for proc in ("host", "agent"):
        if proc not in by_proc:
            continue
        total = totals[proc]
        out.append(f"\n=== {proc}: {total} samples (CPU time) ===")
        out.append("-- self time --")
        for func, n in by_proc[proc]["self"].most_common(top):
            out.append(f"{100 * n / total:6.1f}%  {func}")
        out.append("-- inclusive time --")
        for func, n in by_proc[proc]["incl"].most_common(top + 8):
            out.append(f"{100 * n / total:6.1f}%  {func}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", choices=[w for w in harness.WORKLOADS if not harness.bench_v2.is_v2(w)])
    parser.add_argument("--impl", default="acp-driver", choices=["acp-driver", "ceiling"])
    parser.add_argument("--scale", type=float, default=20.0, help="multiply the full sizes (default 20)")
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--memory", action="store_true", help="tracemalloc peak of the host instead of py-spy"
    )
    parser.add_argument("--src", type=Path, default=None, help="profile acp_driver from this source tree")
    opts = parser.parse_args()
    if opts.src is not None:
        harness.use_src(opts.src.resolve())

    cmd, env = harness.commands([opts.impl])[opts.impl]
    cfg = scaled(opts.workload, opts.scale if not opts.memory else 1.0)
    profiles = harness.WORK / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    if opts.memory:
        env = dict(env, PYTHONTRACEMALLOC="1", BENCH_TRACEMALLOC="1")
        proc = subprocess.run([*cmd, "--config", json.dumps(cfg)], env=env, capture_output=True, text=True)
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr)
        return proc.returncode
    raw = profiles / f"{opts.impl}-{opts.workload}.raw"
    spy = tools_python().parent / "py-spy"
    full = [
        str(spy),
        "record",
        "--subprocesses",
        "-r",
        str(opts.rate),
        "-f",
        "raw",
        "-o",
        str(raw),
        "--",
        *cmd,
    ]
    full += ["--config", json.dumps(cfg)]
    proc = subprocess.run(full, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not raw.exists():
        print(proc.stdout, proc.stderr, file=sys.stderr)
        return 1
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if lines:
        print("runner results:", json.dumps(json.loads(lines[-1])["results"]))
    print(f"raw samples: {os.path.relpath(raw)}")
    print(summarise(raw, opts.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
