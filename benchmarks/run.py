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

# The code is the package benchmarks/harness/: matrix.py (columns, workloads, pairings, sizes, work
# units), environment.py (venvs, the SDKs' and node's installs, each column's commands, machine
# info), report.py (rows, targets, tables, the chart, docs/benchmarks.md) and runs.py (jobs,
# runners, medians, the equal-work check, main). This file is the command, and keeps the names
# other scripts (counts.py, profile.py, the tests) import from ``run``.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import v2 as bench_v2
from harness import environment
from harness.environment import (
    HERE,
    ROOT,
    RUNNERS,
    WORK,
    agent_argv,
    commands,
    ensure_venv,
    log,
    machine_info,
    run_quiet,
    use_src,
)
from harness.matrix import (
    ALIASES,
    IMPLS,
    MODE_WORKLOADS,
    MODES,
    PREFIX,
    SDK_NEW,
    SDK_OLD,
    SDKS,
    SIZES,
    SPLIT_WORKLOADS,
    TS_SDK,
    WORK_UNITS,
    WORKLOADS,
)
from harness.report import (
    TARGETS,
    acp_note_lines,
    best_sdk,
    build_table,
    chart_label,
    fmt,
    render_markdown,
    render_text,
    rows,
    update_doc,
    write_chart,
)
from harness.runs import (
    Job,
    aggregate,
    check_work,
    job_workloads,
    jobs,
    run_runner,
)
from harness.runs import main as _main

__all__ = [
    "ALIASES",
    "HERE",
    "IMPLS",
    "MODES",
    "MODE_WORKLOADS",
    "PREFIX",
    "ROOT",
    "RUNNERS",
    "SDKS",
    "SDK_NEW",
    "SDK_OLD",
    "SIZES",
    "SPLIT_WORKLOADS",
    "TARGETS",
    "TS_SDK",
    "WORK",
    "WORKLOADS",
    "WORK_UNITS",
    "Job",
    "acp_note_lines",
    "agent_argv",
    "aggregate",
    "bench_v2",
    "best_sdk",
    "build_table",
    "chart_label",
    "check_work",
    "commands",
    "ensure_venv",
    "environment",
    "fmt",
    "job_workloads",
    "jobs",
    "log",
    "machine_info",
    "main",
    "render_markdown",
    "render_text",
    "rows",
    "run_quiet",
    "run_runner",
    "update_doc",
    "use_src",
    "write_chart",
]


def main(argv: list[str] | None = None) -> int:
    """The command line above (``harness.runs.main`` with this file's docstring as its help)."""
    return _main(argv, description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
