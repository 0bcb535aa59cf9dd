"""The packages' import graph, read from the source (AST), not trusted to review and grep:

- no package imports another package's private module (``from ..driver._agent import ...``):
  what a package shares, its ``__init__`` exports;
- no cycle between packages at run time (imports under ``if TYPE_CHECKING:`` do not count;
  imports inside functions do: they run).

The top-level package's own modules (``acp_driver._lazy``, ``acp_driver.protocol``...) are
shared by every subpackage.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "acp_driver"
ROOT = "acp_driver"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = SRC.parent / name.replace(".", "/")
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module imported, line) for every run-time import in ``path``."""
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == ROOT or target.startswith(ROOT + "."):
                for alias in node.names:  # ``from .. import protocol`` imports a module
                    candidate = f"{target}.{alias.name}"
                    found.append((candidate if _is_module(candidate) else target, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names if alias.name.startswith(ROOT))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _package_of(module: str) -> str:
    """``acp_driver.driver._agent`` -> ``driver``; the top level's own modules -> ``""``."""
    parts = module.split(".")
    if len(parts) >= 2 and (SRC / parts[1]).is_dir():
        return parts[1]
    return ""


def _edges() -> list[tuple[str, str, str, int, str]]:
    """(from package, to package, file, line, imported module) for every cross-package import."""
    edges = []
    for path in sorted(SRC.rglob("*.py")):
        source = _package_of(_module_name(path))
        for target, line in _imports(path):
            dest = _package_of(target)
            if dest and dest != source:
                edges.append((source or "(top)", dest, str(path.relative_to(SRC)), line, target))
    return edges


def test_no_package_imports_another_packages_private_module() -> None:
    private = [
        f"{file}:{line} imports {target}"
        for _source, _dest, file, line, target in _edges()
        if any(part.startswith("_") for part in target.split(".")[2:])
    ]
    assert private == []


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for source, dest, *_ in _edges():
        graph.setdefault(source, set()).add(dest)
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycle = [*path[path.index(nxt) :], nxt]
                if min(cycle[:-1]) == cycle[0]:  # each cycle once, from its smallest member
                    cycles.append(cycle)
            else:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    assert cycles == []


def test_the_graph_is_read_at_all() -> None:
    """The checks above see the imports they are about (a broken reader would pass them)."""
    edges = {(s, d) for s, d, *_ in _edges()}
    assert ("driver", "aio") in edges
    assert ("driver", "core") in edges
    assert ("remote", "net") in edges
    assert ("cli", "driver") in edges
