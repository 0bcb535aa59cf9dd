"""JSON text in and out: one rule for every place a message is parsed, relayed or printed.

- **Parse** (``parse_json``): orjson first; a text it rejects is parsed again by the standard
  library, which accepts what orjson refuses but JSON allows -- lone-surrogate escapes
  (``"\\ud800"``), which JavaScript's ``JSON.stringify`` emits. NaN and Infinity stay refused.
  Nesting too deep for either parser (``[`` x 100 000) is a parse error like any other
  (``ValueError``), never a ``RecursionError``.
- **Relay** (``encode_relayed``): a peer's message we must re-encode keeps its text exactly,
  lone surrogates included (escaped again, so the output is still valid JSON).
- **Send our own** (``encode_json``): we never put a lone surrogate on the wire (strict peers reject
  it): a string that holds one -- typically a peer's text echoed back -- is sent with each lone
  surrogate replaced by U+FFFD. A value nested too deep to encode is ``TypeError`` (not JSON we
  can send), never a ``RecursionError``: the caller answers with an error instead.
- **Print** (``printable``): the same replacement for text shown to a user or written as UTF-8.

The fast path is orjson alone: the fallbacks run only for the texts it refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads_lenient(text: bytes | str) -> Any:
    """The fallback parser, for texts orjson rejects: the standard library's, which accepts
    lone-surrogate escapes. Raises ``ValueError`` (``UnicodeDecodeError`` for bad UTF-8)."""
    decoded = text.decode("utf-8") if isinstance(text, bytes) else text
    try:
        return json.loads(decoded, parse_constant=_reject_constant)
    except RecursionError:  # deeper than the interpreter's stack: a parse error, not a crash
        raise ValueError("JSON nested too deeply") from None


def parse_json(text: bytes | str) -> Any:
    """Parse one JSON text (see the module docstring). Raises ``ValueError`` with orjson's
    message when neither parser accepts it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        try:
            return loads_lenient(text)
        except ValueError:
            raise exc from None


def printable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (encodable as UTF-8)."""
    return _LONE_SURROGATE.sub(REPLACEMENT, text)


def scrub(value: Any) -> Any:
    """A copy of a JSON value whose strings (keys included) hold no lone surrogate."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def encode_json(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """Our own message as JSON: orjson; a string with a lone surrogate is sent with U+FFFD in
    its place. Raises ``TypeError`` for a value that is not JSON at all."""
    try:
        return orjson.dumps(value, default=default)
    except TypeError:
        try:
            return orjson.dumps(scrub(value), default=default)
        except (TypeError, RecursionError):  # not JSON, or nested too deep for scrub as well
            pass
        raise


def encode_relayed(value: Any) -> bytes:
    """A peer's parsed message encoded again without changing its text (lone surrogates are
    escaped as they came)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        try:
            return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode(
                "ascii"
            )
        except RecursionError:
            raise TypeError("JSON nested too deeply to encode") from None
