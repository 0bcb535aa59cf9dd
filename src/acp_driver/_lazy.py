"""Lazy package exports (PEP 562): a package names what it exports, and the submodule that
defines a name is imported the first time the name is used.

A process pays only for the layers it touches at start-up: an agent does not import the host's
process supervision, nor the host's turn machine (``acp-driver agent`` starts in fewer
milliseconds; docs/benchmarks.md, cold start).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]], *, defined: tuple[str, ...] = ()
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``.

    ``modules`` maps a submodule (relative, ``"._ledger"``) to the names it exports; ``defined``
    names what the package's own ``__init__`` defines and exports.
    """
    where = {name: module for module, names in modules.items() for name in names}
    namespace = sys.modules[package].__dict__
    exported = sorted([*where, *defined])

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        full = package + module
        __import__(full)  # not importlib.import_module: -X importtime would not see it
        value = getattr(sys.modules[full], name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return exported

    return exported, __getattr__, __dir__
