"""The benchmark harness's run: the jobs of a round (each column in each pairing), running one
runner process, the medians over the runs, the check that every column did the same work, and
``main`` (the command line of ``benchmarks/run.py``)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import v2 as bench_v2  # the ACP v2 rows (benchmarks/v2.py)

from . import environment
from .environment import HERE, ROOT, RUNNERS, WORK, agent_argv, commands, log, machine_info
from .matrix import (
    ALIASES,
    ECHO_SLEEP,
    IMPLS,
    MODE_WORKLOADS,
    MODES,
    PREFIX,
    SDK_OLD,
    SDKS,
    SIZES,
    WORK_UNITS,
    WORKLOADS,
)
from .report import (
    CHART,
    DOC,
    RESULTS,
    acp_note_lines,
    build_table,
    render_markdown,
    render_text,
    results_markdown,
    rows,
    update_doc,
    write_chart,
)

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


def main(argv: list[str] | None = None, description: str | None = None) -> int:
    """``benchmarks/run.py``'s command line (``description``: its ``--help`` text)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
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
        environment.use_src(opts.src.resolve())
        if not (environment.SRC / "acp_driver").is_dir():
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
    trees = [environment.SRC, HERE / "runners", HERE / "peers"]
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
        md = results_markdown(doc, header, table, na_notes, work_line, chart_note)
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
