"""Schema conformance of what OUR side put on the wire in ACP v2, checked with the newest v2 schema.

The v1 check (``schema_check.py``) uses the Python SDK's pydantic models; for v2 those are
generated from an older draft (alpha.5, ``acp.experimental.v2``) and drop the newer schema's fields
(``background`` on a ``state_update``). So v2 messages are checked against the JSON Schema itself:
``schema/v2/schema.json`` as the TypeScript SDK 2.4.0 ships it (an installed peer: the same file
the spec's newest generation is), with ``jsonschema`` (draft 2020-12).

Each method's types come from the schema: a definition with ``x-method`` names the method and
``x-side`` the side that serves it; ``FooRequest``/``FooResponse``/``FooNotification`` are its
params and result. Each outgoing message is checked by its role, as in v1: a request or
notification must be one our side may send (a client never sends ``session/update``), its
``params`` valid for the method; a response is checked against the result type of the method of
the request it answers (found in the incoming half of the same trace), or as the JSON-RPC
``Error``. JSON Schema ignores unknown fields, so the top-level members of each ``params`` and
``result``, and every ``session/update``'s ``update``, must also be fields the schema defines: a
misspelt field is reported (``ALLOWED_EXTRA`` lists the ones we send on purpose).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from .schema_check import Problem, Report, Side

SCHEMA_IN_PACKAGE = Path("node_modules", "@agentclientprotocol", "sdk", "schema", "v2", "schema.json")
"""Where the TypeScript SDK's npm package keeps the v2 schema (under its install folder)."""

ALLOWED_EXTRA: dict[str, frozenset[str]] = {
    # A host that speaks both versions asks for 2 with v1's names too, so that a v1 agent can
    # answer it (issue 24; every parser ignores unknown keys): deliberate, not a typo.
    "request initialize": frozenset({"clientInfo", "clientCapabilities"}),
}


@dataclass(frozen=True)
class Methods:
    """Per method: its params and result definitions, and which side serves it."""

    requests: dict[str, tuple[str, str, str]]
    """method -> (params def, result def, serving side)"""
    notifications: dict[str, tuple[str, str]]
    """method -> (params def, receiving side: ``agent``, ``client`` or ``protocol``)"""


class V2Schema:
    """The v2 schema, loaded once per file; ``check`` a trace with it."""

    def __init__(self, path: Path) -> None:
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

        self.path = path
        self.document: dict[str, Any] = json.loads(path.read_text())
        self.defs: dict[str, Any] = self.document["$defs"]
        self._validator_class = Draft202012Validator
        self._branches: dict[int, Any] = {}
        self.methods = self._methods()

    def _methods(self) -> Methods:
        requests: dict[str, tuple[str, str, str]] = {}
        notifications: dict[str, tuple[str, str]] = {}
        for name, definition in self.defs.items():
            method, side = definition.get("x-method"), definition.get("x-side")
            if not isinstance(method, str) or not isinstance(side, str):
                continue
            if name.endswith("Request"):
                base = name.removesuffix("Request")
                requests[method] = (name, f"{base}Response", side)
            elif name.endswith("Notification"):
                notifications[method] = (name, side)
        return Methods(requests, notifications)

    @cache  # noqa: B019 - one schema object per test session
    def _validator(self, name: str) -> Any:
        schema = {"$ref": f"#/$defs/{name}", "$defs": self.defs}
        return self._validator_class(schema)

    def error(self, name: str, value: Any) -> str | None:
        """None if ``value`` is a valid ``name``, else the validation errors."""
        errors = sorted(self._validator(name).iter_errors(value), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        return "; ".join(
            f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message[:300]}" for e in errors[:5]
        )

    def known_fields(self, schema: Any, value: Any) -> set[str] | None:
        """The property names ``schema`` defines for ``value`` (following ``$ref``, ``allOf``, and
        the ``anyOf``/``oneOf`` branches ``value`` is valid for); None: any name is allowed."""
        if not isinstance(schema, dict):
            return set()
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.known_fields(self.defs[ref.rsplit("/", 1)[-1]], value)
        if schema.get("additionalProperties") not in (None, False):
            return None
        names: set[str] = set(schema.get("properties", {}))
        for sub in schema.get("allOf", []):
            more = self.known_fields(sub, value)
            if more is None:
                return None
            names |= more
        for key in ("anyOf", "oneOf"):
            branches = [b for b in schema.get(key, []) if self._valid_for(b, value)]
            for branch in branches:
                more = self.known_fields(branch, value)
                if more is None:
                    return None
                names |= more
        return names

    def _valid_for(self, branch: Any, value: Any) -> bool:
        validator = self._branches.get(id(branch))
        if validator is None:
            validator = self._branches[id(branch)] = self._validator_class({**branch, "$defs": self.defs})
        return bool(validator.is_valid(value))

    def unknown(self, name: str, value: Any) -> list[str]:
        if not isinstance(value, dict):
            return []
        known = self.known_fields(self.defs[name], value)
        return [] if known is None else sorted(set(value) - known)

    def check(self, lines: Iterable[tuple[str, bytes | str | dict[str, Any]]], side: Side) -> Report:
        """Check every ``out`` message of a trace (("in"|"out", raw line or message) pairs)."""
        report = Report(side, schema="ACP v2")
        answered: dict[tuple[str, Any], str] = {}
        lines = list(lines)
        # What each request id was, in wire order; a response recorded before its request (an
        # HTTP client's observer may see the POST's inline answer first) is matched afterwards.
        later: dict[tuple[str, Any], str] = {}
        for direction, raw in lines:
            msg = raw if isinstance(raw, dict) else _loads(raw)
            if (
                direction == "in"
                and isinstance(msg, dict)
                and isinstance(msg.get("method"), str)
                and "id" in msg
            ):
                later.setdefault((type(msg["id"]).__name__, msg["id"]), msg["method"])
        for direction, raw in lines:
            try:
                msg = raw if isinstance(raw, dict) else json.loads(raw)
            except ValueError as exc:
                if direction == "out":
                    report.problems.append(Problem(repr(raw), f"not JSON: {exc}"))
                continue
            if direction == "in":
                if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                    answered[(type(msg["id"]).__name__, msg["id"])] = msg["method"]
                continue
            self._check_one(msg, side, answered, later, report)
        return report

    def _check_one(
        self,
        msg: Any,
        side: Side,
        answered: dict[tuple[str, Any], str],
        later: dict[tuple[str, Any], str],
        report: Report,
    ) -> None:
        def problem(error: str) -> None:
            report.problems.append(Problem(msg, error))

        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return problem('not a JSON-RPC 2.0 object ("jsonrpc": "2.0")')
        peer = "agent" if side == "client" else "client"
        method = msg.get("method")
        if isinstance(method, str):
            is_request = "id" in msg
            kind = "request" if is_request else "notification"
            label = f"{kind} {method}"
            report.checked[label] += 1
            if set(msg) - {"jsonrpc", "id", "method", "params"}:
                return problem(f"unexpected members in a {kind}")
            if method.startswith("_"):
                return None  # an extension: any params object
            params = msg.get("params")
            if is_request:
                found = self.methods.requests.get(method)
                if found is None or found[2] != peer:
                    return problem(f"our {side} side may not send the request {method!r}")
                name = found[0]
            else:
                note = self.methods.notifications.get(method)
                if note is None or note[1] not in (peer, "protocol"):
                    return problem(f"our {side} side may not send the notification {method!r}")
                name = note[0]
            self._check_value(name, params, f"params of {method}", label, problem)
            if method == "session/update" and isinstance(params, dict):
                update = params.get("update")
                extra = self.unknown("SessionUpdate", update) if isinstance(update, dict) else []
                if extra:
                    problem(f"update fields the schema does not define: {extra}")
            return None
        if "id" not in msg or ("result" in msg) == ("error" in msg):
            return problem("neither a request, a notification nor a response with one of result/error")
        key = (type(msg["id"]).__name__, msg["id"])
        answers = answered.get(key) or later.get(key)
        if "error" in msg:
            report.checked[f"error {answers or '?'}"] += 1
            error = self.error("Error", msg["error"])
            if error:
                problem(error)
            return None
        report.checked[f"result {answers or '?'}"] += 1
        if answers is None:
            return problem("a result for an id no request we received had")
        if answers.startswith("_"):
            return None
        found = self.methods.requests.get(answers)
        if found is None or found[2] != side:
            return problem(f"a result for {answers!r}, which our {side} side does not serve")
        self._check_value(found[1], msg["result"], f"result of {answers}", f"result {answers}", problem)
        return None

    def _check_value(self, name: str, value: Any, what: str, label: str, problem: Any) -> None:
        error = self.error(name, value)
        if error:
            problem(f"{what} is not a valid {name}: {error}")
            return
        extra = [f for f in self.unknown(name, value) if f not in ALLOWED_EXTRA.get(label, ())]
        if extra:
            problem(f"{what}: fields {name} does not define: {extra}")


def _loads(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


@cache
def load(path: Path) -> V2Schema:
    return V2Schema(path)


def assert_conforms_v2(
    schema: V2Schema,
    lines: Iterable[tuple[str, bytes | str | dict[str, Any]]],
    side: Side,
    *,
    expect: Iterable[str] = (),
) -> Report:
    """Fail the test unless every message our ``side`` emitted conforms; ``expect``: kinds that
    must have been checked (``"request session/prompt"``, ``"notification session/update"``...),
    so that the check cannot pass vacuously."""
    report = schema.check(list(lines), side)
    missing = [kind for kind in expect if not report.checked[kind]]
    if report.problems or missing or not report.checked:
        extra = f"\n  expected but not seen: {missing}" if missing else ""
        pytest.fail(f"ACP v2 schema ({schema.path.name}): {report}{extra}", pytrace=False)
    return report
