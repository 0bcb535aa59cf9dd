"""One entry of the mutation table: a rule, the code that enforces it, the tests that guard it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """``old`` (in ``src/acp_driver/<path>``) is replaced by ``new``; one of ``tests`` must fail."""

    name: str
    rule: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
