"""Helpers shared by the Python runners (stdlib only: each runner runs in its own interpreter).

A runner is started by ``benchmarks/run.py`` as ``RUNNER --config JSON``; it runs every workload
it can against its own agent and prints ONE JSON object on its last stdout line::

    {"impl": "...", "results": {"seq_rps": 12345.6, ...}, "na": {"storm_ms": "why"},
     "errors": {"stream_ups": "traceback tail"}, "notes": {...},
     "work": {"seq": {"answered": 5000}, "stream": {"updates": 50000}, ...}}

``work`` is what each workload actually did, counted by the runner as it happened (answers
received and checked, updates seen by the application, ids answered at the wire): ``run.py``
checks that every column did the same work (see ``WORK_UNITS`` there).

The config may name the agent to drive instead of the runner's own (``agent``: an argv list,
``echo``/``sleep``: its extension method names): that is how the host-only rows (every host
drives the ceiling agent) and the agent-only rows (the ceiling host drives every agent) run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

ECHO_PARAMS = {"text": "hello", "n": 0}
HERE = os.path.dirname(os.path.abspath(__file__))
CEILING_AGENT = os.path.join(HERE, "..", "peers", "ceiling_agent.py")


def agent_override(cfg: dict[str, Any]) -> list[str] | None:
    """The agent argv the config asks this host to drive (None: the runner's own agent)."""
    argv = cfg.get("agent")
    if argv is None:
        return None
    if argv == "ceiling":
        return [sys.executable, CEILING_AGENT]
    return [str(a) for a in argv]


def parse_config() -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="JSON workload sizes (see run.py SIZES)")
    opts = parser.parse_args()
    cfg: dict[str, Any] = json.loads(opts.config)
    return cfg


def rss_mib(pid: int | str = "self") -> float | None:
    """VmRSS of a process in MiB (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def host_rss() -> float | None:
    gc.collect()
    return rss_mib("self")


TRACING = bool(os.environ.get("BENCH_TRACEMALLOC"))


def mem_checkpoint(label: str, notes: dict[str, Any]) -> None:
    """With BENCH_TRACEMALLOC=1 (and PYTHONTRACEMALLOC=1): record the traced size now and print
    the biggest allocation sites to stderr (``benchmarks/profile.py --memory``)."""
    if not TRACING or not tracemalloc.is_tracing():
        return
    current, _peak = tracemalloc.get_traced_memory()
    notes[f"traced_mib_at_{label}"] = round(current / 2**20, 2)
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")]
    )
    print(f"--- tracemalloc at {label}: {current / 2**20:.1f} MiB traced ---", file=sys.stderr)
    for stat in snapshot.statistics("lineno")[:14]:
        frame = stat.traceback[0]
        print(
            f"{stat.size / 2**20:8.2f} MiB {stat.count:8d} blocks  {frame.filename}:{frame.lineno}",
            file=sys.stderr,
        )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[k]


def median(values: list[float]) -> float:
    return statistics.median(values)


class Report:
    """Collects results; each workload runs in ``measure`` so one failure does not stop the rest."""

    def __init__(self, impl: str, cfg: dict[str, Any]) -> None:
        self.impl = impl
        self.cfg = cfg
        self.results: dict[str, Any] = {}
        self.na: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.notes: dict[str, Any] = {}
        self.work: dict[str, dict[str, int]] = {}
        self.wanted: set[str] | None = set(cfg["workloads"]) if cfg.get("workloads") else None

    def want(self, workload: str) -> bool:
        return self.wanted is None or workload in self.wanted

    async def measure(self, workload: str, fn: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        if not self.want(workload):
            return
        if TRACING and tracemalloc.is_tracing():
            tracemalloc.reset_peak()
        try:
            self.results.update(await fn())
            if TRACING and tracemalloc.is_tracing():
                self.notes[f"{workload}_traced_peak_mib"] = round(
                    tracemalloc.get_traced_memory()[1] / 2**20, 2
                )
        except Exception:
            tail = traceback.format_exc().strip().splitlines()[-6:]
            self.errors[workload] = "\n".join(tail)
            print(f"[{self.impl}] {workload} failed:\n" + "\n".join(tail), file=sys.stderr, flush=True)

    def not_applicable(self, workload: str, why: str) -> None:
        if self.want(workload):
            self.na[workload] = why

    def emit(self) -> None:
        sys.stdout.flush()
        out = {
            "impl": self.impl,
            "results": self.results,
            "na": self.na,
            "errors": self.errors,
            "notes": self.notes,
            "work": self.work,
            "pid": os.getpid(),
        }
        print(json.dumps(out), flush=True)


def now() -> float:
    return time.perf_counter()
