"""Text from the agent, made safe to show: one rule for every path that prints or serialises it.

Everything an agent sends is data. It is never parsed as rich markup (the console renderer
builds ``rich.text.Text`` from the agent's strings, never markup strings), and it never reaches a
terminal as control: whatever the path (``run``, ``chat``, ``check``, error lines, log lines).

On a console, ``shown(text)``:

- C0 controls and DEL become their Unicode control pictures: ESC is shown as ``␛`` (U+241B), BEL
  as ``␇``, so an escape sequence is visible and inert; a tab stays a tab.
- A line feed stays one in multi-line text (message and thought chunks, ``lines=True``, where
  CR LF becomes LF); in a one-line field (a tool's title, kind or status, a plan entry, a name) it
  is shown as ``␊``, so that an agent cannot forge a line of the CLI's own.
- C1 controls (U+0080 to U+009F: 8-bit CSI and OSC, which some terminals obey) become U+FFFD:
  they have no picture. So does a lone surrogate (``"\\ud800"``: valid JSON, which JavaScript
  agents emit, but not Unicode, and no encoding can write it): the core's ``printable``.
- Explicit bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069)
  become U+FFFD too: on a terminal that applies them, an override reorders what follows it (a
  tool's title ``rm -rf /\u202e...`` shown as something else). The implicit marks (LRM, RLM,
  ALM), which right-to-left text uses, stay.

As JSON (``--json`` events, ``check --json``), ``json_text(value)`` keeps the agent's data exact,
by the core's rule for relayed text (``encode_relayed``): a lone surrogate is written as its
``\\udXXX`` escape, the same JSON text the agent sent; integers beyond 64 bits are kept too. C1
controls are written as ``\\u0080``-style escapes (JSON allows them raw, a terminal showing the
output might obey them); every other control is escaped by JSON itself.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import orjson

from ..core import encode_relayed, printable

_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)}
_PICTURES[0x7F] = "\u2421"
_REPLACED = {code: "\ufffd" for code in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_ONE_LINE = {**_PICTURES, **_REPLACED}
del _ONE_LINE[0x09]  # a tab is harmless
_MULTI_LINE = dict(_ONE_LINE)
del _MULTI_LINE[0x0A]

_UNSAFE_ONE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_MULTI_LINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_C1 = re.compile("[\x80-\x9f]")


def shown(value: object, *, lines: bool = False) -> str:
    """``value`` (the agent's, any type: ``str()`` of it) as text a terminal shows as text.

    ``lines``: line feeds are kept (a message or a thought); otherwise shown as ``␊``.
    """
    text = value if isinstance(value, str) else str(value)
    if lines:
        if _UNSAFE_MULTI_LINE.search(text) is None:
            return text
        return printable(text.replace("\r\n", "\n")).translate(_MULTI_LINE)
    if _UNSAFE_ONE_LINE.search(text) is None:
        return text
    return printable(text).translate(_ONE_LINE)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any, *, indent: bool = False) -> str:
    """``value`` as JSON text (one line unless ``indent``), whatever strings or numbers the agent
    sent: never an exception for data that came from a JSON message."""
    if indent:
        try:
            text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
        except TypeError:  # what encode_relayed's fallback does, laid out
            text = json.dumps(value, ensure_ascii=True, indent=2, allow_nan=False)
    else:
        text = encode_relayed(value).decode()
    if _C1.search(text) is None:
        return text
    # Inside JSON text a C1 control can only be in a string: its escape means the same.
    return _C1.sub(_escape, text)


def excerpt(value: Any, limit: int = 60) -> str:
    """A JSON value the agent sent, as JSON text cut at ``limit`` characters (for evidence)."""
    text = json_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ShownFormatter(logging.Formatter):
    """Log lines quote agents (their stderr, their messages): shown by the same rule."""

    def format(self, record: logging.LogRecord) -> str:
        return shown(super().format(record), lines=True)
