#!/usr/bin/env python3
"""Where a round trip and a cancel go, as counts that do not depend on the machine's load.

For each implementation and pairing of ``run.py`` (``pair``, ``host``, ``agent``), it runs the
runner of ``run.py`` twice per workload -- sequential round trips (row 1) and cancels (row 5) --
with N and 2N items, under ``strace -ff`` and with the event-loop probe (``probe/sitecustomize.py``)
in every Python process, and prints the difference per item, for each side (host, agent):

- loop iterations (asyncio's ``_run_once``; for node, whose loop the probe cannot see, the
  ``epoll_wait`` calls stand for them), callbacks the loop ran, task switches (a task's step run by
  the loop);
- syscalls: ``read``, ``write``, ``epoll_wait`` (``epoll_pwait`` included), ``futex`` (thread
  hand-offs) and all of them together, every thread of the process counted.

Nothing here is timed, and the same code gives nearly the same counts on a busy machine: only
loop iterations (and ``epoll_wait``) still move with timing -- whether an iteration that polls
without waiting finds the peer's next message already there, how many lines one read brings.
Each count is the median of ``--repeat`` pairs of runs. Usage::

    python3 benchmarks/counts.py                              # acp-driver, ts-2.4.0, ceiling
    python3 benchmarks/counts.py --only acp-driver,ceiling --modes pair --markdown
    python3 benchmarks/counts.py --src OTHER/src              # another acp_driver tree

Needs ``strace`` (Debian package ``strace``); node for the TypeScript SDK (set up by ``run.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as harness  # noqa: E402 - the harness's commands, pairings and environments

PROBE = HERE / "probe"
DEFAULT_IMPLS = ["acp-driver", f"ts-{harness.TS_SDK}", "ceiling"]
WORKLOADS = {"seq": "round trip", "cancel": "cancel"}
SYSCALLS = ("read", "write", "epoll_wait", "futex")
METRICS = ("iterations", "callbacks", "task_steps", "handoffs", "py_read", "py_write", *SYSCALLS, "syscalls")
LABELS = {
    "iterations": "loop iterations",
    "callbacks": "callbacks run",
    "task_steps": "task switches",
    "handoffs": "thread hand-offs",
    "py_read": "os.read (probe)",
    "py_write": "os.write (probe)",
    "read": "read",
    "write": "write",
    "epoll_wait": "epoll_wait",
    "futex": "futex",
    "syscalls": "all syscalls",
}
EPOLL = {"epoll_wait", "epoll_pwait", "epoll_pwait2"}
_LINE = re.compile(r"^(\w+)\(")
_CLONE = re.compile(r"^(clone3?|fork|vfork)\((.*)\)\s+=\s+(\d+)")


def parse_strace(directory: Path) -> dict[int, dict[str, Any]]:
    """Per process (thread group): its argv (last ``execve``) and the syscall counts of its main
    thread, the one that runs the event loop (node's and the runtime's helper threads -- garbage
    collection, compilers -- would only add noise; a hand-off to or from a thread shows on the
    main thread as a ``futex`` or an extra ``read``/``write``)."""
    tids: dict[int, Counter[str]] = {}
    argv: dict[int, list[str]] = {}
    parent_thread: dict[int, int] = {}  # thread -> the tid that created it
    for path in directory.glob("trace.*"):
        tid = int(path.suffix[1:])
        counts: Counter[str] = Counter()
        for line in path.read_text(errors="replace").splitlines():
            match = _LINE.match(line)
            if match is None:
                continue  # signals, exits, "<... resumed>" (-ff keeps a call on one line)
            name = match.group(1)
            counts[name] += 1
            clone = _CLONE.match(line)
            if clone is not None and "CLONE_THREAD" in clone.group(2):
                parent_thread[int(clone.group(3))] = tid
            if name == "execve" and line.rstrip().endswith("= 0"):
                args = re.search(r"\[(.*?)\]", line)
                if args is not None:
                    argv[tid] = re.findall(r'"((?:[^"\\]|\\.)*)"', args.group(1))
        tids[tid] = counts

    def leader(tid: int) -> int:
        while tid in parent_thread:
            tid = parent_thread[tid]
        return tid

    processes: dict[int, dict[str, Any]] = {}
    for tid, counts in tids.items():
        pid = leader(tid)
        proc = processes.setdefault(pid, {"argv": [], "counts": Counter()})
        if tid == pid:
            proc["counts"].update(counts)  # the main thread: the one that runs the event loop
        if tid in argv:
            proc["argv"] = argv[tid]
    return processes


def role(argv: list[str]) -> str | None:
    """Which side a process is (from its ``execve`` argv or its ``sys.argv``): the host runner,
    the agent, or neither (acp-driver's supervisor, whose argv names the agent after ``--``)."""
    if "--config" in argv:
        argv = argv[: argv.index("--config")]  # the config names the agent to drive
    text = " ".join(argv)
    if "_supervisor.py" in text:
        return None
    if "/peers/" in text or "acp_driver agent" in text or "acp_driver/__main__.py agent" in text:
        return "agent"
    if "/runners/" in text:
        return "host"
    return None


def run_once(
    job: harness.Job, workload: str, n: int, strace: str | None, work: Path
) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """One runner with the probe (and, given ``strace``, under ``strace -ff``): the processes
    strace saw and the probe's reports."""
    impl, mode, cmd, env, extra = job
    sizes = dict(harness.SIZES["quick"], warmup=20, seq=0, cancel=0)
    sizes[workload] = n
    cfg = dict(sizes, workloads=[workload], **extra)
    probe_dir = Path(tempfile.mkdtemp(dir=work))
    trace_dir = Path(tempfile.mkdtemp(dir=work))
    run_env = dict(env, ACP_BENCH_PROBE=str(probe_dir))
    run_env["PYTHONPATH"] = ":".join(filter(None, [str(PROBE), env.get("PYTHONPATH")]))
    full = [*cmd, "--config", json.dumps(cfg)]
    if strace is not None:
        full = [strace, "-ff", "-qq", "-v", "-s", "512", "-o", str(trace_dir / "trace"), *full]
    proc = subprocess.run(full, env=run_env, capture_output=True, text=True, timeout=1800, cwd=harness.ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{impl} ({mode}, {workload}) failed:\n{proc.stderr[-3000:]}")
    report = json.loads(lines[-1])
    unit = "answered" if workload == "seq" else "cancelled"
    if report.get("work", {}).get(workload, {}).get(unit) != n or report.get("errors"):
        raise SystemExit(f"{impl} ({mode}, {workload}, n={n}) did not do its work: {report}")
    processes = parse_strace(trace_dir) if strace is not None else {}
    probes = [json.loads(f.read_text()) for f in probe_dir.glob("*.json")]
    shutil.rmtree(probe_dir, ignore_errors=True)
    shutil.rmtree(trace_dir, ignore_errors=True)
    return processes, probes


def by_side(
    processes: dict[int, dict[str, Any]], probes: list[dict[str, Any]]
) -> dict[str, dict[str, float]]:
    """The counts of one run, per side: the probe's (Python) and strace's (every process)."""
    sides: dict[str, dict[str, float]] = {}

    def side_of(argv: list[str]) -> dict[str, float] | None:
        side = role(argv)
        if side is None:
            return None
        return sides.setdefault(side, {})

    for data in probes:
        counts = side_of(data["argv"])
        if counts is not None:
            if "iterations" in counts:
                raise SystemExit(f"two probed processes on one side: {data['argv']}")
            counts.update({k: data[k] for k in ("iterations", "callbacks", "task_steps", "handoffs")})
            counts.update({"py_read": data["reads"], "py_write": data["writes"]})
    for info in processes.values():
        counts = side_of(info["argv"])
        if counts is None:
            continue
        if "syscalls" in counts:
            raise SystemExit(f"two traced processes on one side: {info['argv']}")
        calls = info["counts"]
        counts.update(
            {
                "read": calls["read"] + calls["readv"],
                "write": calls["write"] + calls["writev"],
                "epoll_wait": sum(calls[name] for name in EPOLL),
                "futex": calls["futex"],
                "syscalls": sum(calls.values()),
            }
        )
        if info["argv"] and Path(info["argv"][0]).name.startswith("node"):
            counts["iterations"] = counts["epoll_wait"]  # no probe in node: one wait per loop turn
    return sides


def per_item(
    job: harness.Job, workload: str, n: int, strace: str | None, work: Path, repeat: int = 1
) -> dict[str, dict[str, float]]:
    """Counts per item, (the run with 2n) minus (the run with n) divided by n, the median of
    ``repeat`` such pairs: first with the probe alone (the loop's counts, undisturbed), then
    under strace (the syscalls)."""
    samples = [_per_item(job, workload, n, strace, work) for _ in range(repeat)]
    return {
        side: {key: statistics.median(s[side][key] for s in samples) for key in samples[0][side]}
        for side in samples[0]
    }


def _per_item(
    job: harness.Job, workload: str, n: int, strace: str | None, work: Path
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"host": {}, "agent": {}}
    passes = [None] if strace is None else [None, strace]
    for tracer in passes:
        small = by_side(*run_once(job, workload, n, tracer, work))
        large = by_side(*run_once(job, workload, 2 * n, tracer, work))
        for side in ("host", "agent"):
            if side not in small or side not in large:
                continue  # node, in the probe's pass
            for key, value in large[side].items():
                if key not in small[side] or (tracer is not None and key in out[side]):
                    continue  # under strace: the syscalls (the loop's counts came without it)
                out[side][key] = (value - small[side][key]) / n
    for side, counts in out.items():
        if "iterations" not in counts:
            raise SystemExit(f"{job[0]} ({job[1]}): no count for the {side} (no process found)")
    return out


def column(impl: str, mode: str) -> tuple[str, str]:
    """Who is the host and who the agent of a pairing."""
    if mode == "host":
        return impl, "ceiling"
    if mode == "agent":
        return "ceiling", impl
    return impl, impl


def render(results: list[dict[str, Any]], markdown: bool) -> str:
    out: list[str] = []
    for workload, unit in WORKLOADS.items():
        header = ["per " + unit]
        cols: list[dict[str, float]] = []
        if not any(r["workload"] == workload for r in results):
            continue
        for r in results:
            if r["workload"] != workload:
                continue
            host, agent = column(r["impl"], r["mode"])
            for side, who in (("host", host), ("agent", agent)):
                if r["mode"] != "pair" and who == "ceiling":
                    continue  # the ceiling's side of a split pairing: the ceiling pair shows it
                header.append(f"{who} {side}" + ("" if r["mode"] == "pair" else f" ({r['mode']} only)"))
                cols.append(r["counts"][side])
        table = [header]
        for metric in METRICS:
            row = [LABELS[metric]]
            for c in cols:
                value = c.get(metric)
                row.append("—" if value is None else f"{value:.1f}")
            table.append(row)
        if markdown:
            out.append("| " + " | ".join(table[0]) + " |")
            out.append("|" + "|".join(["---"] + ["---:"] * (len(table[0]) - 1)) + "|")
            out += ["| " + " | ".join(row) + " |" for row in table[1:]]
        else:
            widths = [max(len(row[i]) for row in table) for i in range(len(header))]
            for row in table:
                out.append(
                    "  ".join(
                        c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))
                    )
                )
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(DEFAULT_IMPLS), help="implementations (run.py's names)")
    parser.add_argument("--modes", default="pair,host,agent", help="pairings: pair, host, agent")
    parser.add_argument("--workloads", default="seq,cancel", help="seq (round trips), cancel")
    parser.add_argument("--seq", type=int, default=400, help="round trips in the smaller run (default 400)")
    parser.add_argument("--cancel", type=int, default=100, help="cancels in the smaller run (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs per count; medians (default 3)")
    parser.add_argument("--src", type=Path, default=None, help="run acp-driver from this source tree")
    parser.add_argument("--no-strace", action="store_true", help="the probe's counts only (no syscalls)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts to this file")
    opts = parser.parse_args()
    strace = shutil.which("strace")
    if strace is None and not opts.no_strace:
        print("strace not found (Debian package 'strace')", file=sys.stderr)
        return 2
    if opts.src is not None:
        harness.use_src(opts.src.resolve())
    impls = [harness.ALIASES.get(x.strip(), x.strip()) for x in opts.only.split(",") if x.strip()]
    impls = [i for i in harness.IMPLS if i in impls]
    modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    workloads = [w.strip() for w in opts.workloads.split(",") if w.strip()]
    for tree in (harness.environment.SRC, HERE / "runners", HERE / "peers", PROBE):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], capture_output=True)
    host_cmds = harness.commands(sorted(set(impls) | {"ceiling"}))
    round_jobs = [j for j in harness.jobs(impls, modes, host_cmds) if j[0] in impls]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for workload in workloads:
            n = opts.seq if workload == "seq" else opts.cancel
            for job in round_jobs:
                harness.log(f"counting {job[0]} ({job[1]}), {workload}, n={n} and {2 * n}")
                counts = per_item(job, workload, n, None if opts.no_strace else strace, work, opts.repeat)
                results.append({"impl": job[0], "mode": job[1], "workload": workload, "counts": counts})
    print(render(results, opts.markdown))
    if opts.json is not None:
        opts.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
