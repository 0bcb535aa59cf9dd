"""Schema conformance of what OUR side put on the wire, checked with the official ACP schema.

The schema comes from an installable source: the pydantic models in ``acp.schema`` of the
official Python package ``agent-client-protocol`` (generated from the ACP ``schema.json``),
pinned to ``SCHEMA_VERSION``. Each outgoing message is checked by its role:

- a request or notification: the JSON-RPC envelope, then ``params`` against the model of its
  method (``session/prompt`` -> ``PromptRequest``...); the method must be one our side of the
  protocol may send (a client never sends ``session/update``) or an extension (``_...``);
- a response: the envelope, then ``result`` against the response model of the method of the
  request it answers (found in the incoming half of the same trace), or ``error`` against the
  JSON-RPC ``Error`` model.

The generated models are lenient where the schema says so (``x-deserialize-default-on-error``:
a malformed optional field silently becomes its default) and ignore unknown fields, so a
message that merely *parses* may still have lost data. After validating, the model is dumped
back (by alias, only the fields that were set) and every field of the original must come back
unchanged: a field dropped or replaced by the model is reported too.

``assert_conforms(lines, side)`` fails the test with the offending message and the pydantic
error for every problem; ``check(lines, side)`` returns the report.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union

import pytest

SCHEMA_PACKAGE = "agent-client-protocol"
SCHEMA_VERSION = "1.0.0rc3"

Side = Literal["client", "agent"]

# method -> (params model, result model); the agent serves these, the client sends them.
AGENT_REQUESTS: dict[str, tuple[str | tuple[str, ...], str]] = {
    "initialize": ("InitializeRequest", "InitializeResponse"),
    "authenticate": ("AuthenticateRequest", "AuthenticateResponse"),
    "logout": ("LogoutRequest", "LogoutResponse"),
    "session/new": ("NewSessionRequest", "NewSessionResponse"),
    "session/load": ("LoadSessionRequest", "LoadSessionResponse"),
    "session/list": ("ListSessionsRequest", "ListSessionsResponse"),
    "session/resume": ("ResumeSessionRequest", "ResumeSessionResponse"),
    "session/fork": ("ForkSessionRequest", "ForkSessionResponse"),
    "session/close": ("CloseSessionRequest", "CloseSessionResponse"),
    "session/delete": ("DeleteSessionRequest", "DeleteSessionResponse"),
    "session/set_mode": ("SetSessionModeRequest", "SetSessionModeResponse"),
    "session/set_config_option": (
        ("SetSessionConfigOptionBooleanRequest", "SetSessionConfigOptionSelectRequest"),
        "SetSessionConfigOptionResponse",
    ),
    "session/prompt": ("PromptRequest", "PromptResponse"),
}
AGENT_NOTIFICATIONS: dict[str, str] = {"session/cancel": "CancelNotification"}
# The client serves these, the agent sends them.
CLIENT_REQUESTS: dict[str, tuple[str | tuple[str, ...], str]] = {
    "session/request_permission": ("RequestPermissionRequest", "RequestPermissionResponse"),
    "fs/read_text_file": ("ReadTextFileRequest", "ReadTextFileResponse"),
    "fs/write_text_file": ("WriteTextFileRequest", "WriteTextFileResponse"),
    "terminal/create": ("CreateTerminalRequest", "CreateTerminalResponse"),
    "terminal/output": ("TerminalOutputRequest", "TerminalOutputResponse"),
    "terminal/release": ("ReleaseTerminalRequest", "ReleaseTerminalResponse"),
    "terminal/wait_for_exit": ("WaitForTerminalExitRequest", "WaitForTerminalExitResponse"),
    "terminal/kill": ("KillTerminalRequest", "KillTerminalResponse"),
}
CLIENT_NOTIFICATIONS: dict[str, str] = {"session/update": "SessionNotification"}
BOTH_NOTIFICATIONS: dict[str, str] = {"$/cancel_request": "CancelRequestNotification"}


def schema_problem() -> str | None:
    """Why the pinned schema package cannot be used in this interpreter, or None."""
    try:
        installed = importlib.metadata.version(SCHEMA_PACKAGE)
        import acp.schema  # noqa: F401
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        return f"{SCHEMA_PACKAGE}=={SCHEMA_VERSION} (acp.schema) is not importable: {exc!r}"
    if installed != SCHEMA_VERSION:
        return f"{SCHEMA_PACKAGE} {installed} is installed; the schema check is pinned to {SCHEMA_VERSION}"
    return None


@cache
def _adapter(spec: str | tuple[str, ...]) -> Any:
    import acp.schema as schema
    from pydantic import TypeAdapter

    names = (spec,) if isinstance(spec, str) else spec
    models = tuple(getattr(schema, name) for name in names)
    return TypeAdapter(models[0] if len(models) == 1 else Union[models])  # noqa: UP007


@dataclass
class Problem:
    message: Any
    error: str

    def __str__(self) -> str:
        return f"{json.dumps(self.message, ensure_ascii=False)}\n    {self.error.replace(chr(10), chr(10) + '    ')}"


@dataclass
class Report:
    side: Side
    checked: Counter[str] = field(default_factory=Counter)
    """How many messages of each kind were checked: ``request session/prompt``, ``result initialize``..."""
    problems: list[Problem] = field(default_factory=list)
    schema: str = "ACP"
    """Which schema judged them (named in the report)."""

    def __str__(self) -> str:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.checked.items()))
        text = f"{sum(self.checked.values())} message(s) from our {self.side} side checked ({kinds})"
        if self.problems:
            text += f"; {len(self.problems)} do(es) not conform to the {self.schema} schema:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        return text


def _id_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def _lost(original: Any, dumped: Any, where: str) -> list[str]:
    """Paths where the model's dump does not give ``original`` back."""
    if isinstance(original, dict):
        if not isinstance(dumped, dict):
            return [f"{where or '.'}: became {dumped!r}"]
        out = []
        for key, value in original.items():
            path = f"{where}.{key}"
            if key not in dumped:
                out.append(f"{path}: dropped by the schema model (unknown field, or invalid and replaced)")
            else:
                out.extend(_lost(value, dumped[key], path))
        return out
    if isinstance(original, list):
        if not isinstance(dumped, list) or len(dumped) != len(original):
            return [f"{where}: list changed by the schema model: {original!r} -> {dumped!r}"]
        return [
            p
            for i, (a, b) in enumerate(zip(original, dumped, strict=True))
            for p in _lost(a, b, f"{where}[{i}]")
        ]
    if original != dumped or isinstance(original, bool) != isinstance(dumped, bool):
        return [f"{where}: {original!r} came back as {dumped!r}"]
    return []


def _validate(spec: str | tuple[str, ...], value: Any, what: str) -> str | None:
    """None if ``value`` is a faithful instance of the model(s) ``spec``, else the error."""
    from pydantic import ValidationError

    adapter = _adapter(spec)
    try:
        obj = adapter.validate_python(value)
    except ValidationError as exc:
        return f"{what} is not a valid {spec}: {exc}"
    dumped = adapter.dump_python(obj, mode="json", by_alias=True, exclude_unset=True)
    lost = _lost(value, dumped, "")
    if lost:
        return f"{what} is not faithfully a {spec}: " + "; ".join(lost)
    return None


_V2_ONLY_INITIALIZE = frozenset({"info", "capabilities"})


def _asks_both(params: dict[str, Any]) -> bool:
    """An ``initialize`` asking for 2 with both versions' field names (our ``auto``)."""
    return params.get("protocolVersion") == 2 and ("clientInfo" in params or "clientCapabilities" in params)


def _is_id(value: Any) -> bool:
    return type(value) in (int, str)


def _check_one(msg: Any, side: Side, answered: dict[tuple[str, Any], str], report: Report) -> None:
    def problem(error: str) -> None:
        report.problems.append(Problem(msg, error))

    if not isinstance(msg, dict):
        return problem("not a JSON object")
    if msg.get("jsonrpc") != "2.0":
        return problem('"jsonrpc" must be "2.0"')
    if side == "client":
        sends, notifies, serves = AGENT_REQUESTS, AGENT_NOTIFICATIONS, CLIENT_REQUESTS
    else:
        sends, notifies, serves = CLIENT_REQUESTS, CLIENT_NOTIFICATIONS, AGENT_REQUESTS
    method = msg.get("method")
    if method is not None:
        if not isinstance(method, str):
            return problem('"method" must be a string')
        extra = set(msg) - {"jsonrpc", "id", "method", "params"}
        if extra:
            return problem(f"unexpected member(s) {sorted(extra)} in a request/notification")
        is_request = "id" in msg
        if is_request and not _is_id(msg["id"]):
            return problem(f"request id must be an integer or a string, got {msg['id']!r}")
        kind = "request" if is_request else "notification"
        report.checked[f"{kind} {method}"] += 1
        params = msg.get("params")
        if method.startswith("_"):  # extension method: any params object (or none)
            if "params" in msg and not isinstance(params, dict):
                problem(f"extension {kind} params must be an object, got {params!r}")
            return None
        if is_request:
            spec = sends.get(method, (None, None))[0]
        else:
            spec = notifies.get(method) or BOTH_NOTIFICATIONS.get(method)
        if spec is None:
            return problem(
                f"our {side} side may not send the {kind} {method!r} (not an ACP {side}->peer method)"
            )
        if method == "initialize" and isinstance(params, dict) and _asks_both(params):
            # ``protocol="auto"`` asks for 2 carrying v1's field names too (issue 24: a v1 agent
            # can answer): v1 judges its own fields here, the v2 schema the rest (v2 tests).
            params = {k: v for k, v in params.items() if k not in _V2_ONLY_INITIALIZE}
        error = _validate(spec, params, f"params of {method}")
        if error:
            problem(error)
        return None
    # A response.
    if "id" not in msg:
        return problem("neither a request, a notification nor a response (no method, no id)")
    if ("result" in msg) == ("error" in msg):
        return problem('a response must have exactly one of "result" and "error"')
    extra = set(msg) - {"jsonrpc", "id", "result", "error"}
    if extra:
        return problem(f"unexpected member(s) {sorted(extra)} in a response")
    rid = msg["id"]
    if rid is not None and not _is_id(rid):
        return problem(f"response id must be an integer, a string or null, got {rid!r}")
    answers = answered.get(_id_key(rid))
    if "error" in msg:
        report.checked[f"error {answers or '?'}"] += 1
        error = _validate("Error", msg["error"], "error")
        if error:
            problem(error)
        elif type(msg["error"].get("code")) is not int:
            problem("error code must be an integer")
        return None
    report.checked[f"result {answers or '?'}"] += 1
    if answers is None:
        return problem(f"a result for id {rid!r}, which no request we received had")
    if answers.startswith("_"):
        return None  # extension method: any result
    spec = serves.get(answers, (None, None))[1]
    if spec is None:
        return problem(f"a result for {answers!r}, which our {side} side does not serve")
    error = _validate(spec, msg["result"], f"result of {answers}")
    if error:
        problem(error)
    return None


def check(lines: Iterable[tuple[str, bytes | str]], side: Side) -> Report:
    """Check every "out" line of a trace (("in"|"out", raw line) pairs, in wire order)."""
    report = Report(side)
    answered: dict[tuple[str, Any], str] = {}
    for direction, raw in lines:
        try:
            msg = json.loads(raw)
        except ValueError as exc:
            if direction == "out":
                report.problems.append(Problem(repr(raw), f"not JSON: {exc}"))
            continue
        if direction == "in":
            if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                answered[_id_key(msg["id"])] = msg["method"]
            continue
        _check_one(msg, side, answered, report)
    return report


def assert_conforms(
    lines: Iterable[tuple[str, bytes | str]], side: Side, *, expect: Iterable[str] = ()
) -> Report:
    """Fail the test unless every message our ``side`` emitted conforms; ``expect``: kinds that
    must have been checked (e.g. ``"request session/prompt"``), so a check cannot pass vacuously."""
    problem = schema_problem()
    if problem is not None:
        pytest.fail(f"cannot check schema conformance: {problem}", pytrace=False)
    report = check(list(lines), side)
    missing = [kind for kind in expect if not report.checked[kind]]
    if report.problems or missing or not report.checked:
        extra = f"\n  expected but not seen: {missing}" if missing else ""
        pytest.fail(f"ACP schema ({SCHEMA_PACKAGE}=={SCHEMA_VERSION}): {report}{extra}", pytrace=False)
    return report
