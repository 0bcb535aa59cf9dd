"""The CLI's modules: one concept each, none over 600 lines, and no import cycle among them (the
exit codes and shared helpers live in modules that import no command)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "acp_driver" / "cli"
MODULES = sorted(p for p in CLI.glob("*.py"))


def cli_imports(path: Path) -> set[str]:
    """The ``acp_driver.cli`` modules ``path`` imports (relative imports, at any depth)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:  # from . import _codes
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_module_is_over_600_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


def test_no_import_cycle_among_the_cli_modules() -> None:
    graph = {path.stem: cli_imports(path) for path in MODULES}
    assert graph, "no modules found"
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", f"import cycle: {' -> '.join([*trail, module])}"
        state[module] = "open"
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*trail, module])
        state[module] = "done"

    for module in graph:
        visit(module, [])


def test_only_the_entry_point_imports_the_dispatcher() -> None:
    importers = sorted(path.name for path in MODULES if "_main" in cli_imports(path))
    assert importers == ["__init__.py"]
