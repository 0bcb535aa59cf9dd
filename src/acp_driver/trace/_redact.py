"""What a trace never holds: credentials and environments.

Rules, applied to every message before it is written (and to lifecycle fields that carry a
command line or headers):

- the params of an authentication request (``authenticate``, ``auth/login``, any ``auth/...``)
  keep only ``methodId``; the result answering it is replaced whole;
- a value under a key that names a secret (``authorization``, ``token``, ``apiKey``,
  ``password``, ``secret``, ``cookie``, ``credential``...; any case, any ``_``/``-``) is
  replaced, at any depth, unless it is a number, a boolean or null (``inputTokens: 120``);
- environments: ``env`` (an MCP server's or a terminal's, ``[{name, value}]`` or a mapping) keep
  the names, never the values; so do ``headers`` (an MCP server's HTTP headers);
- text that carries a bearer token (``Bearer abc...``) keeps the word, not the token;
- a command line keeps its words but the value after an option naming a secret
  (``--token X``, ``--api-key=X``) and ``NAME=value`` words whose name does.

A cheap test comes first: a message with none of the words these rules look for (most of a
stream's updates) is not walked at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(authori[sz]ation|token|api[_-]?key|apikey|password|passwd|secret|cookie|credential|private[_-]?key)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_SCAN = re.compile(
    rb"authori[sz]|token|api[_-]?key|apikey|passw|secret|cookie|credential|private[_-]?key|"
    rb"\"env\"|\"headers\"|bearer|basic |auth"
)
"""Any of these bytes in a message (lowered): it is walked (otherwise written as it is)."""


def is_auth_method(method: object) -> bool:
    """``authenticate``, ``auth/login``, ``auth/logout``...: requests whose params are credentials."""
    return isinstance(method, str) and (method == "authenticate" or method.startswith("auth/"))


def needs_scan(data: bytes) -> bool:
    """Whether a message's text may hold something to redact."""
    return _SCAN.search(data.lower()) is not None  # lowered: ~4x faster than a case-blind pattern


def redact_message(message: Any) -> Any:
    """A copy of a JSON-RPC message (or batch) with secrets replaced (see the module docstring)."""
    if isinstance(message, list):
        return [redact_message(item) for item in message]
    if not isinstance(message, dict):
        return redact_value(message)
    out = redact_value(message)
    if is_auth_method(message.get("method")) and isinstance(message.get("params"), dict):
        params = message["params"]
        kept = {"methodId": params["methodId"]} if "methodId" in params else {}
        out["params"] = {**kept, **{k: REDACTED for k in params if k != "methodId"}}
    return out


def redact_value(value: Any) -> Any:
    """``value`` with secret-named keys, environments, headers and bearer tokens replaced."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and _SECRET_KEY.search(key) and not _is_count(item):
                out[key] = REDACTED
            elif key in ("env", "environment", "headers"):
                out[key] = _names_only(item)
            else:
                out[key] = redact_value(item)
        return out
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, str) and ("earer" in value or "asic " in value):
        return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", value)
    return value


def _is_count(value: Any) -> bool:
    """Numbers, booleans and null are not secrets (``inputTokens: 120`` stays)."""
    return value is None or isinstance(value, (int, float))


def _names_only(value: Any) -> Any:
    """An environment or a header list: the names stay, every value goes."""
    if isinstance(value, list):
        return [
            {**{k: v for k, v in item.items() if k == "name"}, "value": REDACTED}
            if isinstance(item, dict)
            else REDACTED
            for item in value
        ]
    if isinstance(value, dict):
        return dict.fromkeys(value, REDACTED)
    return REDACTED if value is not None else None


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret-named options and ``NAME=value`` words replaced."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _value = word.partition("=")
        if eq and _SECRET_KEY.search(name):
            out.append(f"{name}={REDACTED}")
        elif word.startswith("-") and _SECRET_KEY.search(word):
            out.append(word)
            hide_next = True
        else:
            out.append(redact_value(word))
    return out
