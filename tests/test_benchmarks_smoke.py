"""Smoke test of the benchmark harness: ``benchmarks/run.py --quick`` for acp-driver and the ceiling.

No network: with ``--only acp-driver,ceiling`` the harness installs nothing (it runs both with this
interpreter and the repo's ``src``), and ``--no-chart --no-write`` leaves results.json and the docs
alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD_ROWS = [
    "1. sequential round trips",
    "concurrent requests",
    "4. session/update stream",
    "5. session/cancel → cancelled, p50",
    "5. session/cancel → cancelled, p99",
    "6. cold start",
    "6. cold start without the supervisor",
    "6. supervisor cost",
    "7. host RSS idle",
    "7. host RSS after the load",
    "7. agent RSS idle",
    "7. agent RSS after the load",
    "8. cancel storm",
    "9. ignored cancel",
]


def test_quick_benchmark_runs_and_prints_every_workload() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            "acp-driver,ceiling",
            "--no-chart",
            "--no-write",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    header = out.splitlines()[0]
    for column in ("acp-driver", "ceiling", "PASS/FAIL"):
        assert column in header, out
    for row in WORKLOAD_ROWS:
        assert row in out, f"no {row!r} row in:\n{out}"
    assert out.count("concurrent requests") == 2, out
    table = out.split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:
        assert " error" not in line, f"a workload failed: {line}\n{proc.stderr}"
    assert "targets:" in out
