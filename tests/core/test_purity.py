"""The sans-IO core imports nothing that does I/O or reads a clock."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import acp_driver.core

FORBIDDEN = {"asyncio", "subprocess", "os", "time", "socket", "selectors", "threading", "signal"}
CORE = Path(acp_driver.core.__file__).parent


def test_core_sources_import_nothing_forbidden() -> None:
    found = []
    for path in sorted(CORE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert found == []


def test_importing_the_core_loads_no_forbidden_module() -> None:
    forbidden = sorted(FORBIDDEN - {"os"})
    code = (
        "import sys; before = set(sys.modules); import acp_driver.core as core; "
        "[getattr(core, name) for name in core.__all__]; "  # the package loads its modules lazily
        f"print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {forbidden!r}))"
    )
    # os is always loaded by the interpreter itself; the AST test above covers it.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
