"""``benchmarks/proxy.py`` runs (tiny counts) and both columns did the same work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_proxy_benchmark_runs_both_columns_with_the_same_work() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "proxy.py"),
            "--requests",
            "50",
            "--chunks",
            "300",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["direct"]["chunks"] == result["proxy"]["chunks"] == 300
    assert result["proxy_rss_mib"] > 0
    assert result["added_p50_us"] == result["proxy"]["p50_us"] - result["direct"]["p50_us"]
