#!/usr/bin/env python3
"""The benchmark harness: acp-driver vs the official ACP SDKs vs a minimal "ceiling" peer pair.

One command (see docs/benchmarks.md)::

    python3 benchmarks/run.py [--quick] [--repeat N] [--only IMPL,...] [--workloads W,...]
                              [--no-chart] [--write | --no-write]

It prepares its own environments under ``benchmarks/.work/`` (git-ignored; reused when present),
then runs the same protocol-level workloads against five implementations, each host in its own
process (``benchmarks/runners/*``), ``--repeat`` times, interleaved, and reports medians. Each
implementation runs in up to three pairings (``--modes``):

- ``pair``:  its host <-> its agent (rows 1-10);
- ``host``:  its host <-> the ceiling agent (rows H*: the ratio to the ceiling is the host's alone);
- ``agent``: the ceiling host <-> its agent (rows A*: the ratio is the agent's alone).

The ceiling column of the H and A rows is the ceiling pair itself. Every runner counts the work it
did (answers received, updates seen, ids answered at the wire); the harness checks that every
column did the same work per row and fails the run (exit 1) when one did not. The columns:

- ``acp-driver``:   our host driver <-> our reference agent (this repo's ``src``);
- ``sdk-0.12.1``:   official Python SDK ``ClientSideConnection`` <-> an agent written with it;
- ``sdk-1.0.0rc3``: the same with the 1.0.0rc3 SDK;
- ``ts-2.4.0``:     official TypeScript SDK 2.4.0 client app <-> agent app, both on node;
- ``ceiling``:      a minimal asyncio + orjson NDJSON client <-> agent (no framework).

It prints one table (rows: workloads; columns: implementations, ratios, targets, PASS/FAIL). A full
run (no ``--quick``, all five implementations) also writes ``benchmarks/results.json``,
``docs/benchmarks.png`` and the results section of ``docs/benchmarks.md``; other runs write
``benchmarks/.work/results-partial.json`` only (override with ``--write``/``--no-write``).

Exit status: 0 when every runner ran, every selected workload produced a number and the work
counts are equal across columns (a missed target is reported as FAIL, not as an error); 1
otherwise; 2 on an environment problem.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import v2 as bench_v2  # noqa: E402 - the ACP v2 rows (benchmarks/v2.py)

ROOT = HERE.parent
WORK = HERE / ".work"
RUNNERS = HERE / "runners"
SRC = ROOT / "src"  # the acp_driver tree that runs (--src to try another one)
DOCS = ROOT / "docs"
RESULTS = HERE / "results.json"
CHART = DOCS / "benchmarks.png"
DOC = DOCS / "benchmarks.md"
BEGIN = "<!-- BEGIN GENERATED RESULTS (benchmarks/run.py) -->"
END = "<!-- END GENERATED RESULTS -->"

SDK_OLD = "0.12.1"
SDK_NEW = "1.0.0rc3"
TS_SDK = "2.4.0"
TS_PACKAGE = "@agentclientprotocol/sdk"

IMPLS = ["acp-driver", f"sdk-{SDK_OLD}", f"sdk-{SDK_NEW}", f"ts-{TS_SDK}", "ceiling"]
SDKS = IMPLS[1:4]
ALIASES = {
    "acp": "acp-driver",
    "ts": f"ts-{TS_SDK}",
    "sdk-old": f"sdk-{SDK_OLD}",
    "sdk-new": f"sdk-{SDK_NEW}",
}
WORKLOADS = [
    "seq",
    "conc1k",
    "conc10k",
    "stream",
    "cancel",
    "cold",
    "storm",
    "ignored",
    "hang",
    "ctrl_c",
    *bench_v2.WORKLOADS,
]
MODES = ["pair", "host", "agent", "cli"]
PREFIX = {"pair": "", "host": "host:", "agent": "agent:", "cli": "cli:"}
# The workloads of the host-only and agent-only pairings (RSS is measured in every run).
SPLIT_WORKLOADS = ["seq", "conc1k", "conc10k", "stream", "cancel", "storm"]
# What each pairing runs: ``cli`` is acp-driver's CLI (``acp-driver run``) with each column's agent.
MODE_WORKLOADS = {
    "pair": [w for w in WORKLOADS if w != "ctrl_c"],
    "host": [*SPLIT_WORKLOADS, *bench_v2.WORKLOADS],
    "agent": [*SPLIT_WORKLOADS, *bench_v2.WORKLOADS],
    "cli": ["ctrl_c"],
}
# What each column's agent calls its extension methods (the ceiling host needs them in agent rows).
ECHO_SLEEP = {"acp-driver": ("_acp_driver/echo", "_acp_driver/sleep")}
# The work each workload must have done, in every column: (unit, count from the sizes).
WORK_UNITS: dict[str, tuple[str, Any]] = {
    "seq": ("answered", lambda c: c["seq"]),
    "conc1k": ("answered", lambda c: c["conc1k"] * c["conc1k_rounds"]),
    "conc10k": ("answered", lambda c: c["conc10k"] * c["conc10k_rounds"]),
    "stream": ("updates", lambda c: c["stream"]),
    "cancel": ("cancelled", lambda c: c["cancel"]),
    "storm": ("ids_answered", lambda c: c["storm"]),
    "ignored": ("resolved", lambda c: 1),
    "hang": ("resolved", lambda c: 1),
    "ctrl_c": ("cancelled", lambda c: c["ctrl_c"]),
    **bench_v2.WORK_UNITS,
}

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "warmup": 500,
        "seq": 5000,
        "conc1k": 1000,
        "conc1k_rounds": 5,
        "conc10k": 10000,
        "conc10k_rounds": 2,
        "stream": 50000,
        "cancel": 200,
        "cold": 10,
        "storm": 10000,
        "ignored_budget": 2.0,
        "ctrl_c": 100,
    },
    "quick": {
        "warmup": 50,
        "seq": 200,
        "conc1k": 100,
        "conc1k_rounds": 1,
        "conc10k": 300,
        "conc10k_rounds": 1,
        "stream": 500,
        "cancel": 10,
        "cold": 2,
        "storm": 200,
        "ignored_budget": 0.5,
        "ctrl_c": 3,
    },
}


# Targets for acp-driver, checked in the same run: (text, check(value, results, metric)). The
# host's throughput and memory targets are checked on the host-only rows (every host drives the
# ceiling agent, so the ratio is the host's alone). Latency (issue 25): rows 1 and 5 in each
# pairing at least as good as the best SDK's, a cancel's p99 at most 1 ms and its p50 at most
# twice the ceiling's.
def _at_least_best_sdk(value: float, results: dict[str, dict[str, Any]], metric: str, higher: bool) -> bool:
    """As good as the best SDK's value of the same run (vacuously, when no SDK ran)."""
    best = best_sdk(metric, higher, results)
    return best is None or (value >= best[1] if higher else value <= best[1])


def _latency_targets() -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for p in ("", "host:", "agent:"):
        out[f"{p}seq_rps"] = ("≥ best SDK", lambda v, r, m: _at_least_best_sdk(v, r, m, True))
        out[f"{p}cancel_p50_ms"] = (
            "≤ best SDK, ≤ 2x ceiling",
            lambda v, r, m: _at_least_best_sdk(v, r, m, False) and _ratio(v, r, m, "ceiling") <= 2.0,
        )
        out[f"{p}cancel_p99_ms"] = (
            "≤ best SDK, ≤ 1 ms",
            lambda v, r, m: _at_least_best_sdk(v, r, m, False) and v <= 1.0,
        )
    return out


TARGETS: dict[str, tuple[str, Any]] = {
    **_latency_targets(),
    "host:seq_rps": (
        "≥ best SDK, ≥ 90 % of ceiling",
        lambda v, r, m: _at_least_best_sdk(v, r, m, True) and _ratio(v, r, m, "ceiling") >= 0.90,
    ),
    "host:conc1k_rps": ("≥ 60 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.60),
    "host:conc10k_rps": ("≥ 60 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.60),
    "host:stream_ups": ("≥ 50 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.50),
    "host:rss_host_load_mib": ("≤ 45 MiB", lambda v, r, m: v <= 45),
    "cold_start_ms": ("≤ 150 ms", lambda v, r, m: v <= 150),
    "supervisor_cost_ms": ("≤ 30 ms", lambda v, r, m: v <= 30),
    "rss_host_idle_mib": ("≤ 30 MiB", lambda v, r, m: v <= 30),
    "storm_ms": (
        "all answered ≤ 1 s, ledger empty",
        lambda v, r, m: v <= 1000 and r.get("acp-driver", {}).get("storm_ledger_empty") is True,
    ),
    "ignored_s": (
        "resolved ≤ budget",
        lambda v, r, m: v <= float(r.get("acp-driver", {}).get("ignored_budget_s", math.inf)),
    ),
    "hang_s": (
        "SIGKILL at the budget, resolved ≤ budget + 0.1 s",
        lambda v, r, m: v <= float(r.get("acp-driver", {}).get("hang_budget_s", math.inf)) + 0.1,
    ),
}


def _ratio(value: float, results: dict[str, dict[str, Any]], metric: str, other: str) -> float:
    base = results.get(other, {}).get(metric)
    return value / base if isinstance(base, (int, float)) and base else math.nan


CHART_BASE_LABELS = {
    "seq_rps": "sequential\nreq/s",
    "conc1k_rps": "1k concurrent\nreq/s",
    "conc10k_rps": "10k concurrent\nreq/s",
    "stream_ups": "update stream\nupdates/s",
    "cancel_p50_ms": "cancel\np50",
    "cancel_p99_ms": "cancel\np99",
    "cold_start_ms": "cold start",
    "cold_start_direct_ms": "cold start, no supervisor",
    "supervisor_cost_ms": "supervisor cost",
    "rss_host_idle_mib": "host RSS\nidle",
    "rss_host_load_mib": "host RSS\nafter load",
    "rss_agent_idle_mib": "agent RSS\nidle",
    "rss_agent_load_mib": "agent RSS\nafter load",
    "storm_ms": "cancel storm\nall answered",
    "ignored_s": "ignored cancel",
    "hang_s": "hung agent\nkilled",
    "ctrl_c_p50_ms": "Ctrl-C → result\np50",
    "ctrl_c_p99_ms": "Ctrl-C → result\np99",
    **bench_v2.CHART_LABELS,
}
CHART_GROUPS = {
    "pair": "each host with its own agent",
    "host": "host only: every host drives the ceiling agent",
    "agent": "agent only: the ceiling host drives every agent",
    "cli": "acp-driver run (the CLI) drives every agent",
}


def chart_label(metric: str) -> tuple[str, str]:
    """(group, readable label) of a result key for the chart: no raw keys on the axis."""
    group, _, key = metric.rpartition(":")
    group = group or "pair"
    return group, CHART_BASE_LABELS.get(key, key.replace("_", " "))


def rows(cfg: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(metric, workload, label, higher_is_better); host/agent rows have prefixed names."""
    pair = [
        ("seq_rps", "seq", f"1. sequential round trips, req/s (n={cfg['seq']})", True),
        ("conc1k_rps", "conc1k", f"2. {cfg['conc1k']} concurrent requests, req/s", True),
        ("conc10k_rps", "conc10k", f"3. {cfg['conc10k']} concurrent requests, req/s", True),
        ("stream_ups", "stream", f"4. session/update stream, updates/s (n={cfg['stream']})", True),
        ("cancel_p50_ms", "cancel", f"5. session/cancel → cancelled, p50 ms (n={cfg['cancel']})", False),
        ("cancel_p99_ms", "cancel", "5. session/cancel → cancelled, p99 ms", False),
        (
            "cold_start_ms",
            "cold",
            f"6. cold start → initialize answered, ms (median of {cfg['cold']})",
            False,
        ),
        ("cold_start_direct_ms", "cold", "6. cold start without the supervisor, ms", False),
        ("supervisor_cost_ms", "cold", "6. supervisor cost: cold start with minus without, ms", False),
        ("rss_host_idle_mib", "rss", "7. host RSS idle (after initialize), MiB", False),
        ("rss_host_load_mib", "rss", "7. host RSS after the load, MiB", False),
        ("rss_agent_idle_mib", "rss", "7. agent RSS idle, MiB", False),
        ("rss_agent_load_mib", "rss", "7. agent RSS after the load, MiB", False),
        ("storm_ms", "storm", f"8. cancel storm: {cfg['storm']} in flight → all answered, ms", False),
        ("storm_ledger_empty", "storm", "8. cancel storm: ledger empty after the answers", True),
        (
            "ignored_s",
            "ignored",
            f"9. ignored cancel: cancel → resolved (SIGTERM), s (budget {cfg['ignored_budget']} s)",
            False,
        ),
        (
            "hang_s",
            "hang",
            f"10. hung agent: cancel → SIGKILL → resolved, s (budget {cfg['ignored_budget']} s)",
            False,
        ),
    ]
    split = []
    for mode, tag, who in (
        ("host", "H", "host only ↔ ceiling agent"),
        ("agent", "A", "agent only ↔ ceiling host"),
    ):
        p = PREFIX[mode]
        side = "host" if mode == "host" else "agent"
        split += [
            (f"{p}seq_rps", f"{p}seq", f"{tag}1. {who}: sequential round trips, req/s", True),
            (f"{p}conc1k_rps", f"{p}conc1k", f"{tag}2. {who}: {cfg['conc1k']} concurrent, req/s", True),
            (f"{p}conc10k_rps", f"{p}conc10k", f"{tag}3. {who}: {cfg['conc10k']} concurrent, req/s", True),
            (f"{p}stream_ups", f"{p}stream", f"{tag}4. {who}: session/update stream, updates/s", True),
            (f"{p}cancel_p50_ms", f"{p}cancel", f"{tag}5. {who}: cancel → cancelled, p50 ms", False),
            (f"{p}cancel_p99_ms", f"{p}cancel", f"{tag}5. {who}: cancel → cancelled, p99 ms", False),
            (f"{p}rss_{side}_idle_mib", f"{p}rss", f"{tag}7. {who}: {side} RSS idle, MiB", False),
            (f"{p}rss_{side}_load_mib", f"{p}rss", f"{tag}7. {who}: {side} RSS after the load, MiB", False),
            (f"{p}storm_ms", f"{p}storm", f"{tag}8. {who}: cancel storm → all answered, ms", False),
            (f"{p}storm_ledger_empty", f"{p}storm", f"{tag}8. {who}: storm ledger empty", True),
        ]
    cli = [
        (
            "cli:ctrl_c_p50_ms",
            "cli:ctrl_c",
            f"C1. acp-driver run ↔ each agent: Ctrl-C → result line, p50 ms (n={cfg['ctrl_c']})",
            False,
        ),
        (
            "cli:ctrl_c_p99_ms",
            "cli:ctrl_c",
            "C1. acp-driver run ↔ each agent: Ctrl-C → result line, p99 ms",
            False,
        ),
    ]
    return bench_v2.with_rows(pair + split + cli, cfg)  # each v2 row next to its v1 row


# ---------------------------------------------------------------------------- environments


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run_quiet(cmd: list[str], timeout: float = 900, **kw: Any) -> subprocess.CompletedProcess[str]:
    log("$ " + shlex.join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise SystemExit(
            f"[bench] command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path, packages: list[str], check: str) -> Path:
    """A venv under .work with ``packages``; reused when ``check`` (python code) succeeds in it."""
    py = venv_python(venv)
    if (
        py.exists()
        and subprocess.run([str(py), "-c", check], capture_output=True, timeout=120).returncode == 0
    ):
        return py
    if venv.exists():
        shutil.rmtree(venv)
    run_quiet([sys.executable, "-m", "venv", str(venv)])
    run_quiet([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages])
    if subprocess.run([str(py), "-c", check], capture_output=True, timeout=120).returncode != 0:
        raise SystemExit(f"[bench] {venv} does not pass its check after install: {check}")
    return py


def acp_driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    return env


def acp_driver_python() -> Path:
    """The current interpreter if it imports this repo's acp_driver (and orjson); else a bench venv
    with ``pip install -e`` of the repo."""
    check = (
        "import sys, acp_driver, orjson, pathlib; "
        f"sys.exit(0 if pathlib.Path(acp_driver.__file__).resolve().is_relative_to({str(SRC.resolve())!r}) else 1)"
    )
    here = subprocess.run(
        [sys.executable, "-c", check], env=acp_driver_env(), capture_output=True, timeout=120
    )
    if here.returncode == 0:
        return Path(sys.executable)
    return ensure_venv(WORK / "venv-acp-driver", ["-e", str(ROOT)], check)


def sdk_python(version: str) -> Path:
    check = (
        "import importlib.metadata as m, sys, acp, orjson; "
        f"sys.exit(0 if m.version('agent-client-protocol') == {version!r} else 1)"
    )
    return ensure_venv(WORK / f"sdk-{version}", [f"agent-client-protocol=={version}", "orjson"], check)


def node_binary() -> str | None:
    return shutil.which("node")


def ts_sdk_dir() -> Path:
    """npm install of the TypeScript SDK under .work/ts (reused when the version matches)."""
    base = WORK / "ts"
    pkg = base / "node_modules" / "@agentclientprotocol" / "sdk"
    try:
        if json.loads((pkg / "package.json").read_text())["version"] == TS_SDK:
            return pkg
    except (OSError, ValueError, KeyError):
        pass
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("[bench] npm not found: cannot install the TypeScript SDK")
    base.mkdir(parents=True, exist_ok=True)
    (base / "package.json").write_text(
        json.dumps({"name": "acp-bench-ts", "private": True, "type": "module"})
    )
    run_quiet([npm, "install", "--no-audit", "--no-fund", f"{TS_PACKAGE}@{TS_SDK}"], cwd=base)
    return pkg


def chart_python() -> Path:
    check = "import matplotlib"
    if subprocess.run([sys.executable, "-c", check], capture_output=True, timeout=120).returncode == 0:
        return Path(sys.executable)
    return ensure_venv(WORK / "chart", ["matplotlib"], check)


def commands(impls: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The command and environment that runs each implementation's host runner."""
    out: dict[str, tuple[list[str], dict[str, str]]] = {}
    if "acp-driver" in impls or "ceiling" in impls:
        py = str(acp_driver_python())
        env = acp_driver_env()
        out["acp-driver"] = ([py, str(RUNNERS / "acp_driver_host.py")], env)
        out["ceiling"] = ([py, str(RUNNERS / "ceiling_host.py")], env)
    for version in (SDK_OLD, SDK_NEW):
        if f"sdk-{version}" in impls:
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            out[f"sdk-{version}"] = ([str(sdk_python(version)), str(RUNNERS / "sdk_host.py")], env)
    if f"ts-{TS_SDK}" in impls:
        node = node_binary()
        if node is None:
            raise SystemExit(
                "[bench] node not found: cannot run the TypeScript SDK (leave it out with --only)"
            )
        env = dict(os.environ, ACP_TS_SDK_DIR=str(ts_sdk_dir()))
        out[f"ts-{TS_SDK}"] = ([node, str(RUNNERS / "ts_host.mjs")], env)
    return {k: v for k, v in out.items() if k in impls}


def agent_argv(impl: str, host_cmds: dict[str, tuple[list[str], dict[str, str]]]) -> list[str]:
    """The argv of ``impl``'s own agent (what its host runner spawns), for the agent-only rows."""
    interpreter = host_cmds[impl][0][0]
    if impl == "acp-driver":
        return [interpreter, "-m", "acp_driver", "agent"]
    if impl in (f"sdk-{SDK_OLD}", f"sdk-{SDK_NEW}"):
        return [interpreter, str(HERE / "peers" / "sdk_agent.py")]
    if impl == f"ts-{TS_SDK}":
        return [interpreter, str(HERE / "peers" / "ts_agent.mjs")]
    return [interpreter, str(HERE / "peers" / "ceiling_agent.py")]


Job = tuple[str, str, list[str], dict[str, str], dict[str, Any]]
"""(column, mode, command, environment, config additions)."""


def jobs(
    impls: list[str], modes: list[str], host_cmds: dict[str, tuple[list[str], dict[str, str]]]
) -> list[Job]:
    """Every runner process of one round: each column in each pairing (the ceiling: its pair)."""
    ceiling_cmd, ceiling_env = commands(["ceiling"])["ceiling"]
    ceiling_agent = agent_argv("ceiling", {"ceiling": (ceiling_cmd, ceiling_env)})
    out: list[Job] = []
    for impl in impls:
        cmd, env = host_cmds[impl]
        if "cli" in modes:
            # acp-driver's CLI drives this column's agent; the agent gets the variables it needs.
            cli_env = {**ceiling_env, **{k: v for k, v in env.items() if k.startswith("ACP_")}}
            cli_cmd = [ceiling_cmd[0], str(RUNNERS / "ctrl_c.py")]
            out.append((impl, "cli", cli_cmd, cli_env, {"agent": agent_argv(impl, host_cmds)}))
        if impl == "ceiling":
            if "pair" in modes or (len(impls) > 1 and ("host" in modes or "agent" in modes)):
                # the ceiling pair: the reference of every H and A row
                out.append((impl, "pair", cmd, env, {}))
            continue
        if "pair" in modes:
            out.append((impl, "pair", cmd, env, {}))
        if "host" in modes:
            extra = {"agent": ceiling_agent, "echo": "_bench/echo", "sleep": "_bench/sleep"}
            out.append((impl, "host", cmd, env, extra))
        if "agent" in modes:
            echo, sleep = ECHO_SLEEP.get(impl, ("_bench/echo", "_bench/sleep"))
            # The ceiling host spawns the agent with the environment that agent needs.
            agent_env = {**ceiling_env, **{k: v for k, v in env.items() if k.startswith("ACP_")}}
            if impl.startswith("sdk-"):
                agent_env.pop("PYTHONPATH", None)
            extra = {"agent": agent_argv(impl, host_cmds), "echo": echo, "sleep": sleep}
            out.append((impl, "agent", ceiling_cmd, agent_env, extra))
    return out


def split_na(impl: str, mode: str) -> dict[str, str]:
    """Workloads a pairing cannot run, and why."""
    if mode == "agent" and impl == f"sdk-{SDK_OLD}":
        return {"storm": f"the SDK {SDK_OLD} agent does not honour $/cancel_request"}
    return {}


# ---------------------------------------------------------------------------- running


def run_runner(job: Job, cfg: dict[str, Any], rep: int, timeout: float) -> dict[str, Any]:
    impl, mode, cmd, env, extra = job
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    protocol = extra.get("protocol", 1)
    workloads = job_workloads(job, cfg)
    if not cmd:  # a column that cannot run these workloads at all (no v2 in SDK 0.12.1)
        na = {w: why for w, why in extra.get("na", {}).items() if w in workloads}
        return {"impl": impl, "mode": mode, "protocol": protocol, "results": {}, "na": na, "work": {}}
    na = split_na(impl, mode)
    full = [*cmd, "--config", json.dumps(dict(cfg, workloads=[w for w in workloads if w not in na], **extra))]
    log(f"run {rep + 1}: {impl} ({mode})")
    started = time.monotonic()
    try:
        proc = subprocess.run(full, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        return {
            "impl": impl,
            "mode": mode,
            "crashed": f"timed out after {timeout:.0f} s",
            "stderr": str(exc.stderr)[-2000:],
        }
    v2 = "-v2" if protocol == 2 else ""
    (logs / f"{impl}-{mode}{v2}-{rep + 1}.log").write_text(proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {
            "impl": impl,
            "mode": mode,
            "crashed": f"exit status {proc.returncode}",
            "stderr": proc.stderr[-2000:],
        }
    data: dict[str, Any] = json.loads(lines[-1])
    data["impl"] = impl
    data["mode"] = mode
    data["protocol"] = protocol
    data["seconds"] = round(time.monotonic() - started, 2)
    if mode != "pair":
        data["na"] = {w: why for w, why in data.get("na", {}).items() if w in workloads}
        data["na"].update({w: why for w, why in na.items() if w in cfg["workloads"]})
    return data


def job_workloads(job: Job, cfg: dict[str, Any]) -> list[str]:
    """The selected workloads a job runs: its pairing's, of its protocol version."""
    v2 = job[4].get("protocol", 1) == 2
    return [w for w in cfg["workloads"] if w in MODE_WORKLOADS[job[1]] and bench_v2.is_v2(w) == v2]


def prefixed(run: dict[str, Any]) -> dict[str, Any]:
    """A run's results, metric names prefixed with its pairing (``host:seq_rps``)."""
    p = PREFIX[run.get("mode", "pair")]
    return {f"{p}{k}": v for k, v in run.get("results", {}).items()}


def check_work(
    runs: dict[str, list[dict[str, Any]]], cfg: dict[str, Any]
) -> tuple[dict[str, dict[str, list[Any]]], list[str]]:
    """Per column and (prefixed) workload, the counted work of each run; and every run whose
    count differs from what the workload asks of every column (so counts equal across columns)."""
    table: dict[str, dict[str, list[Any]]] = {}
    mismatches: list[str] = []
    for impl, impl_runs in runs.items():
        for run in impl_runs:
            if "crashed" in run:
                continue
            mode = run.get("mode", "pair")
            v2 = run.get("protocol", 1) == 2
            workloads = [w for w in MODE_WORKLOADS[mode] if bench_v2.is_v2(w) == v2]
            skipped = set(run.get("na", {})) | set(run.get("errors", {}))
            for w in workloads:
                if w not in WORK_UNITS or w not in cfg["workloads"] or w in skipped:
                    continue
                unit, expected = WORK_UNITS[w]
                got = run.get("work", {}).get(w, {}).get(unit)
                table.setdefault(impl, {}).setdefault(f"{PREFIX[mode]}{w}", []).append(got)
                if got != expected(cfg):
                    mismatches.append(
                        f"{impl} ({mode}) {w}: {unit} = {got}, every column must have {expected(cfg)}"
                    )
    return table, mismatches


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each (prefixed) metric over the runs (booleans: all true)."""
    values: dict[str, list[Any]] = {}
    for run in runs:
        for key, value in prefixed(run).items():
            if value is not None:
                values.setdefault(key, []).append(value)
    out: dict[str, Any] = {}
    for key, vals in values.items():
        if all(isinstance(v, bool) for v in vals):
            out[key] = all(vals)
        else:
            out[key] = statistics.median(vals)
    return out


# ---------------------------------------------------------------------------- reporting


def fmt(value: Any, metric: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, str):
        return value
    if metric.endswith(("_rps", "_ups")):
        return f"{value:,.0f}"
    if metric.endswith("_ms"):
        return f"{value:.3f}" if value < 10 else f"{value:,.1f}"
    if metric.endswith("_s"):
        return f"{value:.3f}"
    return f"{value:.1f}"


def best_sdk(metric: str, higher: bool, results: dict[str, dict[str, Any]]) -> tuple[str, float] | None:
    cands = [
        (impl, results[impl][metric])
        for impl in SDKS
        if isinstance(results.get(impl, {}).get(metric), (int, float))
    ]
    if not cands:
        return None
    return max(cands, key=lambda c: c[1]) if higher else min(cands, key=lambda c: c[1])


def build_table(
    impls: list[str],
    results: dict[str, dict[str, Any]],
    status: dict[str, dict[str, str]],
    cfg: dict[str, Any],
) -> tuple[list[str], list[list[str]], dict[str, str]]:
    header = ["workload", *impls, "acp ÷ ceiling", "acp ÷ best SDK", "target (acp-driver)", "PASS/FAIL"]
    table: list[list[str]] = []
    verdicts: dict[str, str] = {}
    for metric, workload, label, higher in rows(cfg):
        arrow = "↑" if higher else "↓"
        line = [f"{label} {arrow}"]
        for impl in impls:
            value = results.get(impl, {}).get(metric)
            if value is None:
                line.append(status.get(impl, {}).get(workload, "—"))
            else:
                line.append(fmt(value, metric))
        ours = results.get("acp-driver", {}).get(metric)
        ceiling = results.get("ceiling", {}).get(metric)
        numeric = isinstance(ours, (int, float)) and not isinstance(ours, bool)
        line.append(
            f"{ours / ceiling:.2f}x" if numeric and isinstance(ceiling, (int, float)) and ceiling else "—"
        )
        best = best_sdk(metric, higher, results)
        line.append(f"{ours / best[1]:.2f}x ({best[0]})" if numeric and best and best[1] else "—")
        target = TARGETS.get(metric)
        if target is None:
            line += ["", ""]
        elif not numeric:
            line += [target[0], "—"]
        else:
            ok = bool(target[1](ours, results, metric))
            verdicts[metric] = "PASS" if ok else "FAIL"
            line += [target[0], verdicts[metric]]
        table.append(line)
    return header, table, verdicts


def render_text(header: list[str], table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    sep = "  "
    out = [sep.join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append(sep.join("-" * w for w in widths))
    for row in table:
        out.append(
            sep.join(
                (c.ljust(w) if i == 0 else c.rjust(w))
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(out)


def render_markdown(header: list[str], table: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for row in table:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(out)


def acp_note_lines(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """acp-driver's notes (how the ignored cancel resolved, the storm through the default API...),
    each distinct value once, in run order."""
    notes = [
        {f"{PREFIX[r.get('mode', 'pair')]}{k}": v for k, v in r["notes"].items()}
        for r in runs
        if "notes" in r
    ]
    out = []
    for key in sorted({k for n in notes for k in n}):
        values = list(dict.fromkeys(str(n[key]) for n in notes if key in n))
        out.append((key, " | ".join(values)))
    return out


def machine_info(impl_cmds: dict[str, tuple[list[str], dict[str, str]]]) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "os": platform.platform(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    versions = {}
    for impl, (cmd, _env) in impl_cmds.items():
        if cmd[0].endswith("node"):
            versions[impl] = (
                "node " + subprocess.run([cmd[0], "--version"], capture_output=True, text=True).stdout.strip()
            )
        else:
            out = subprocess.run(
                [cmd[0], "-c", "import platform; print(platform.python_version())"],
                capture_output=True,
                text=True,
            )
            versions[impl] = "Python " + out.stdout.strip()
    info["interpreters"] = versions
    return info


def write_chart(
    impls: list[str],
    results: dict[str, dict[str, Any]],
    verdicts: dict[str, str],
    cfg: dict[str, Any],
    path: Path,
    title: str,
) -> None:
    """One picture: for each row, acp-driver's advantage over each SDK (see chart.py)."""
    sdks = [impl for impl in SDKS if impl in impls]
    chart_rows = []
    for metric, _workload, label, higher in rows(cfg):
        ours = results.get("acp-driver", {}).get(metric)
        if not isinstance(ours, (int, float)) or isinstance(ours, bool) or not ours:
            continue
        ratios: dict[str, float | None] = {}
        for sdk in sdks:
            theirs = results.get(sdk, {}).get(metric)
            usable = isinstance(theirs, (int, float)) and not isinstance(theirs, bool) and theirs
            ratios[sdk] = (ours / theirs if higher else theirs / ours) if usable else None
        if not any(ratios.values()):
            continue
        group, base = chart_label(metric)
        tag = label.split(".", 1)[0]
        target = TARGETS.get(metric)
        chart_rows.append(
            {
                "label": f"{tag}  {base.replace(chr(10), ' ')} {'↑' if higher else '↓'}",
                "group": CHART_GROUPS.get(group, group),
                "ratios": ratios,
                "target": target[0] if target else None,
                "verdict": verdicts.get(metric),
            }
        )
    spec = {"title": title, "sdks": sdks, "rows": chart_rows, "out": str(path)}
    spec_path = WORK / "chart-spec.json"
    spec_path.write_text(json.dumps(spec))
    run_quiet([str(chart_python()), str(HERE / "chart.py"), str(spec_path)])


def update_doc(markdown: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{markdown.strip()}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test); implies --repeat 1")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per implementation; medians are reported (default 3)"
    )
    parser.add_argument(
        "--only", default=None, help=f"comma-separated implementations (default: all of {','.join(IMPLS)})"
    )
    parser.add_argument(
        "--workloads", default=None, help=f"comma-separated workloads (default: all of {','.join(WORKLOADS)})"
    )
    parser.add_argument(
        "--modes",
        default=None,
        help=f"comma-separated pairings (default: all of {','.join(MODES)}): pair = each host with its "
        "own agent, host = each host with the ceiling agent, agent = the ceiling host with each agent",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the whole result document to this file"
    )
    parser.add_argument("--no-chart", action="store_true", help="do not draw docs/benchmarks.png")
    write = parser.add_mutually_exclusive_group()
    write.add_argument(
        "--write", dest="write", action="store_true", default=None, help="write results.json and the docs"
    )
    write.add_argument(
        "--no-write",
        dest="write",
        action="store_false",
        help="write benchmarks/.work/results-partial.json only",
    )
    parser.add_argument(
        "--write-v2",
        action="store_true",
        help="write this run as the ACP v2 comparison: results.json's \"v2\" key and the doc's v2 block",
    )
    parser.add_argument(
        "--src",
        type=Path,
        default=None,
        help="run acp-driver from this source tree instead of the repo's src/ (implies --no-write)",
    )
    opts = parser.parse_args(argv)
    if opts.src is not None:
        global SRC
        SRC = opts.src.resolve()
        if not (SRC / "acp_driver").is_dir():
            parser.error(f"--src {opts.src}: no acp_driver package there")

    impls = (
        IMPLS
        if opts.only is None
        else [ALIASES.get(x.strip(), x.strip()) for x in opts.only.split(",") if x.strip()]
    )
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        parser.error(f"unknown implementation(s) {unknown}; choose from {IMPLS}")
    impls = [i for i in IMPLS if i in impls]  # canonical order
    workloads = (
        WORKLOADS if opts.workloads is None else [w.strip() for w in opts.workloads.split(",") if w.strip()]
    )
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        parser.error(f"unknown workload(s) {bad}; choose from {WORKLOADS}")
    modes = MODES if opts.modes is None else [m.strip() for m in opts.modes.split(",") if m.strip()]
    if [m for m in modes if m not in MODES]:
        parser.error(f"unknown pairing(s) in {modes}; choose from {MODES}")
    repeat = opts.repeat if opts.repeat is not None else (1 if opts.quick else 3)
    cfg = dict(SIZES["quick" if opts.quick else "full"], workloads=workloads)
    official = (
        not opts.quick and impls == IMPLS and workloads == WORKLOADS and modes == MODES and opts.src is None
    )
    write_official = official if opts.write is None else opts.write
    command = "python3 benchmarks/run.py" + (
        "" if not (argv or sys.argv[1:]) else " " + shlex.join(argv or sys.argv[1:])
    )

    WORK.mkdir(parents=True, exist_ok=True)
    # Fresh bytecode for the Python trees the runners import: with PYTHONDONTWRITEBYTECODE set and
    # a source newer than its cached bytecode, every process would compile it again, and the cold
    # start rows would measure the compiler.
    trees = [SRC, HERE / "runners", HERE / "peers"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, trees)], capture_output=True)
    try:
        impl_cmds = commands(impls)
    except subprocess.TimeoutExpired as exc:
        log(f"environment set-up timed out: {exc}")
        return 2
    info = machine_info(impl_cmds)
    log(f"{info['cpu']}, {info['cores']} cores, load {info['loadavg_start']}; sizes: {json.dumps(cfg)}")

    timeout = 180.0 if opts.quick else 1200.0
    ceiling = commands(["ceiling"])["ceiling"]
    round_jobs = [
        job
        for job in [*jobs(impls, modes, impl_cmds), *bench_v2.jobs(impls, modes, impl_cmds, ceiling)]
        if job_workloads(job, cfg)
    ]
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    for rep in range(repeat):
        for job in round_jobs:
            runs[job[0]].append(run_runner(job, cfg, rep, timeout))

    results = {impl: aggregate([r for r in runs[impl] if "crashed" not in r]) for impl in impls}
    if "ceiling" in results:  # the ceiling pair is the reference of the host-only and agent-only rows
        for key, value in list(results["ceiling"].items()):
            if ":" in key:
                continue  # a pairing of its own (cli)
            for mode in ("host", "agent"):
                results["ceiling"][f"{PREFIX[mode]}{key}"] = value
    status: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for impl in impls:
        st: dict[str, str] = {}
        for run in runs[impl]:
            mode = run.get("mode", "pair")
            if "crashed" in run:
                problems.append(f"{impl} ({mode}): runner {run['crashed']}\n{run.get('stderr', '')}")
                continue
            for w in run.get("na", {}):
                st[f"{PREFIX[mode]}{w}"] = "n/a"
            for w, err in run.get("errors", {}).items():
                st[f"{PREFIX[mode]}{w}"] = "error"
                problems.append(f"{impl} ({mode}): {w} failed:\n{err}")
        status[impl] = st
    work, mismatches = check_work(runs, cfg)
    problems += [f"unequal work: {m}" for m in mismatches]
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]

    header, table, verdicts = build_table(impls, results, status, cfg)
    print(render_text(header, table))
    print()
    na_notes = sorted(
        {
            f"{impl} ({run.get('mode', 'pair')}): {w}: {why}"
            for impl in impls
            for run in runs[impl]
            for w, why in run.get("na", {}).items()
        }
    )
    for note in na_notes:
        print(f"n/a  {note}")
    for key, value in acp_note_lines(runs.get("acp-driver", [])):
        print(f"acp-driver {key}: {value}")
    work_line = (
        "work: every column did the same work in every row it ran (answers, updates, ids answered)"
        if not mismatches
        else f"work: UNEQUAL in {len(mismatches)} place(s): " + "; ".join(mismatches)
    )
    print(work_line)
    passed = sum(v == "PASS" for v in verdicts.values())
    print(
        f"\ntargets: {passed} PASS, {len(verdicts) - passed} FAIL   (ratios are acp-driver ÷ other; ↑ higher is better, ↓ lower is better)"
    )
    print(
        f"machine: {info['cpu']}, {info['cores']} cores; load average {info['loadavg_start']} → {info['loadavg_end']}"
    )

    doc = {
        "command": command,
        "machine": info,
        "sizes": cfg,
        "repeat": repeat,
        "implementations": impls,
        "modes": modes,
        "results": results,
        "work": work,
        "work_equal": not mismatches,
        "verdicts": verdicts,
        "status": status,
        "runs": runs,
    }
    if opts.write_v2:
        md = bench_v2.markdown(command, info, doc, header, table, na_notes, rows(cfg), render_markdown)
        bench_v2.write(RESULTS, DOC, doc, md)
        log(f"wrote the v2 comparison into {RESULTS.relative_to(ROOT)} and {DOC.relative_to(ROOT)}")
    if write_official:
        if RESULTS.exists() and "v2" in (old := json.loads(RESULTS.read_text())):
            doc["v2"] = old["v2"]  # the v2 comparison keeps its own run (--write-v2)
        RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
        log(f"wrote {RESULTS.relative_to(ROOT)}")
        chart_note = ""
        if not opts.no_chart and any(impl in SDKS for impl in impls) and "acp-driver" in impls:
            write_chart(
                impls,
                results,
                verdicts,
                cfg,
                CHART,
                f"acp-driver against each official ACP SDK ({info['date']})",
            )
            log(f"wrote {CHART.relative_to(ROOT)}")
            chart_note = (
                "\n![benchmark chart: acp-driver's advantage over each SDK, per row](benchmarks.png)\n"
            )
        interp = ", ".join(f"{k}: {v}" for k, v in info["interpreters"].items())
        md = "\n".join(
            [
                f"Generated by `{command}` on {info['date']}.",
                "",
                f"- Machine: {info['cpu']}, {info['cores']} cores, {info['os']}; load average "
                f"{info['loadavg_start']} at the start, {info['loadavg_end']} at the end (shared, noisy machine).",
                f"- Interpreters: {interp}.",
                f"- Medians of {repeat} runs per implementation (runs interleaved). Sizes: "
                + ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "workloads")
                + ".",
                f"- {work_line[0].upper()}{work_line[1:]}.",
                f"- acp-driver targets: {passed} PASS, {len(verdicts) - passed} FAIL. Ratios are acp-driver ÷ other; "
                "↑ rows: higher is better, ↓ rows: lower is better.",
                "",
                render_markdown(header, table),
                "",
                *[f"- n/a — {n}" for n in na_notes],
                *[f"- acp-driver {k}: {v}" for k, v in acp_note_lines(runs.get("acp-driver", []))],
                chart_note,
            ]
        )
        update_doc(md)
        log(f"wrote {DOC.relative_to(ROOT)}")
    else:
        partial = WORK / "results-partial.json"
        partial.write_text(json.dumps(doc, indent=2) + "\n")
        log(f"wrote {partial.relative_to(ROOT)} (not a full run: results.json and the docs left alone)")
        if not opts.no_chart and any(impl in SDKS for impl in impls) and "acp-driver" in impls:
            write_chart(impls, results, verdicts, cfg, WORK / "benchmarks-partial.png", "partial run")

    if opts.json is not None:
        opts.json.write_text(json.dumps(doc, indent=2) + "\n")
    for problem in problems:
        log("PROBLEM " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
