"""Each protocol version's ``Requirements`` (what the agent runtime requires of a client's params,
``core/_requirements.py``) equal that version's schema: read from the vendored ``schema.json``
(``tests/schemas``), for every method an agent serves and every prompt content block type."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import PROFILES

SCHEMAS = Path(__file__).parent.parent / "schemas"


@cache
def definitions(version: int) -> dict[str, Any]:
    defs: dict[str, Any] = json.loads((SCHEMAS / f"v{version}" / "schema.json").read_text())["$defs"]
    return defs


def json_type(defs: dict[str, Any], node: dict[str, Any]) -> str:
    """The JSON type a schema node allows (``any`` when it allows several)."""
    if "$ref" in node:
        return json_type(defs, defs[node["$ref"].rsplit("/", 1)[-1]])
    kind = node.get("type")
    if isinstance(kind, str):
        return kind
    if kind is None:
        for key in ("allOf", "anyOf", "oneOf"):
            if key in node:
                kinds = {json_type(defs, branch) for branch in node[key]}
                if len(kinds) == 1:
                    return kinds.pop()
    return "any"


def resolved(defs: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    return defs[node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else node


def required(defs: dict[str, Any], definition: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The members ``definition`` requires, with their JSON types: its own ``required`` list, then
    the members every variant of its union requires (sorted)."""
    members = [(m, json_type(defs, definition["properties"][m])) for m in definition.get("required", ())]
    for key in ("anyOf", "oneOf"):
        branches = [resolved(defs, b) for b in definition.get(key, ())]
        if not branches:
            continue
        shared = set.intersection(*(set(b.get("required", ())) for b in branches))
        for member in sorted(shared - {m for m, _ in members}):
            kinds = {json_type(defs, b["properties"][member]) for b in branches}
            members.append((member, kinds.pop() if len(kinds) == 1 else "any"))
    return tuple(members)


def served_by_the_agent(defs: dict[str, Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    return {
        d["x-method"]: required(defs, d)
        for name, d in defs.items()
        if d.get("x-side") == "agent" and name.endswith(("Request", "Notification"))
    }


def content_blocks(defs: dict[str, Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    block = defs["ContentBlock"]
    found = {}
    for variant in block.get("oneOf", block.get("anyOf", ())):
        kind = variant.get("properties", {}).get("type", {}).get("const")
        if kind is None:  # v2's "other": custom or future blocks
            continue
        (ref,) = variant["allOf"]
        found[kind] = required(defs, resolved(defs, ref))
    return found


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_the_required_members_of_every_method_are_the_schemas(version: int) -> None:
    defs = definitions(version)
    table = PROFILES[version].requirements.methods
    expected = served_by_the_agent(defs)
    assert len(expected) > 10  # the schema was read
    assert dict(table) == expected


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_the_required_members_of_every_content_block_are_the_schemas(version: int) -> None:
    table = PROFILES[version].requirements.content_blocks
    assert dict(table) == content_blocks(definitions(version))
