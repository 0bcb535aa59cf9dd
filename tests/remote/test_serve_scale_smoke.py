"""``benchmarks/remote_scale.py --quick`` runs, passes its own checks, and reports every count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_remote_scale_quick_passes_its_checks() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "remote_scale.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "20 WebSocket connections" in out
    for line in (
        "[ok] every connection streams its turn: 20/20",
        "[ok] every turn answered cancelled: 20/20",
        "[ok] no agent process left after the connections closed: 0 left",
    ):
        assert line in out, out
    assert "serve RSS per connection" in out
    assert "cancel -> cancelled, max (all resolved)" in out
