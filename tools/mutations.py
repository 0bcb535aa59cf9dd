"""Mutation check: deleting the line that enforces a rule must make a (non-interop) test fail.

Each entry (the table is ``tools/mutation_table/``, one module per area) names a rule, the code
that enforces it and the tests that guard it. For each, the script replaces that code, runs the
tests, expects a failure, and puts the code back.

    python tools/mutations.py            # all
    python tools/mutations.py fence      # entries whose name contains "fence"

Exit status 1 if any mutation survived (the tests still passed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation_table import MUTATIONS, Mutation

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "acp_driver"


def run(mutation: Mutation) -> bool:
    """True if the tests caught the mutation (failed)."""
    path = SRC / mutation.path
    original = path.read_text()
    if original.count(mutation.old) != 1:
        print(f"  ?? {mutation.name}: the code to mutate was not found once in {mutation.path}")
        return False
    path.write_text(original.replace(mutation.old, mutation.new))
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-n",
                "0",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                *mutation.tests,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        path.write_text(original)
    # Only a test failure counts (exit status 1): a collection or usage error (2-5) would call a
    # mutation caught that no test ever ran against. One process (-n 0): under xdist, -x turns a
    # failure into exit status 2 (interrupted).
    if proc.returncode not in (0, 1):
        print(f"  ?? {mutation.name}: pytest exited {proc.returncode} (not a test failure)")
        print(proc.stdout[-2000:], proc.stderr[-2000:])
    return proc.returncode == 1


def main() -> int:
    wanted = sys.argv[1:]
    survived = []
    for mutation in MUTATIONS:
        if wanted and not any(w in mutation.name for w in wanted):
            continue
        caught = run(mutation)
        print(f"{'caught  ' if caught else 'SURVIVED'} {mutation.name}: {mutation.rule}", flush=True)
        if not caught:
            survived.append(mutation.name)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
