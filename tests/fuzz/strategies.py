"""Hypothesis strategies for hostile NDJSON input: raw bytes, and structure-aware JSON-RPC.

``lines()`` draws one line (bytes, no newline) from a mix of: the corpus, random bytes, JSON-RPC
messages with fields drawn from the ACP vocabulary and odd values (ids of every JSON type, lone
surrogates, huge numbers), and such messages mutated at the byte level (truncated, a byte
flipped). ``SESSION`` in a drawn string stands for the live session's id (see ``bind``).

``ACP_FUZZ_EXAMPLES`` sets how many examples each fuzzer runs (small by default for CI; e.g.
``ACP_FUZZ_EXAMPLES=5000`` for a long run).
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import strategies as st

from .corpus import CORPUS

EXAMPLES = int(os.environ.get("ACP_FUZZ_EXAMPLES", "30"))

SESSION = "@SESSION@"

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/prompt",
    "session/cancel",
    "session/update",
    "session/set_mode",
    "session/request_permission",
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
    "$/cancel_request",
    "_x/ext",
    "",
]

lone_surrogates = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3
)
strings = st.one_of(st.text(max_size=12), lone_surrogates, st.just(SESSION), st.sampled_from(METHODS))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    strings,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(strings, st.sampled_from(["type", "text"])), children, max_size=4),
    ),
    max_leaves=12,
)
ids = st.one_of(
    st.integers(min_value=-3, max_value=10),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([1.0, 2.0, "1", "2", " 1", True, None, [], {}]),
    strings,
)
content_blocks = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image", "resource_link", "?"])}, optional={"text": strings}
    ),
    max_size=3,
)
acp_params = st.fixed_dictionaries(
    {},
    optional={
        "sessionId": st.one_of(st.just(SESSION), strings, scalars),
        "prompt": st.one_of(content_blocks, strings, json_values),
        "protocolVersion": st.one_of(st.just(1), scalars),
        "cwd": st.one_of(st.just("/"), strings),
        "mcpServers": st.one_of(st.just([]), json_values),
        "requestId": ids,
        "update": st.one_of(
            st.fixed_dictionaries(
                {"sessionUpdate": st.sampled_from(["agent_message_chunk", "tool_call", "plan", "?"])},
                optional={"content": json_values, "toolCallId": strings, "messageId": strings},
            ),
            json_values,
        ),
    },
)
errors = st.one_of(
    st.fixed_dictionaries(
        {"code": st.one_of(st.integers(-32800, -32000), scalars), "message": st.one_of(strings, scalars)},
        optional={"data": json_values},
    ),
    json_values,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), st.just("2.0"), st.just("2.0"), scalars),
        "id": ids,
        "method": st.one_of(st.sampled_from(METHODS), strings, scalars),
        "params": st.one_of(acp_params, json_values),
        "result": json_values,
        "error": errors,
    },
)


def _render(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


@st.composite
def structured(draw: st.DrawFn) -> bytes:
    value: Any = draw(messages)
    if draw(st.integers(0, 9)) == 0:
        value = draw(st.lists(messages, max_size=3))  # a batch
    return _render(value, draw(st.booleans()))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(structured()))
    if not data:
        return bytes(data)
    op = draw(st.sampled_from(["truncate", "flip", "insert"]))
    at = draw(st.integers(0, len(data) - 1))
    if op == "truncate":
        del data[at:]
    elif op == "flip":
        data[at] = draw(st.integers(0, 255))
    else:
        data[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data)


def _one_line(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


def lines() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from([line for _, line in CORPUS]),
        st.binary(max_size=48),
        structured(),
        mutated(),
    ).map(_one_line)


def bind(line: bytes, session_id: str) -> bytes:
    """``line`` with the session placeholder replaced by the live session's id."""
    return line.replace(SESSION.encode(), session_id.encode())


def shape(line: bytes) -> str:
    """``response``, ``request`` (or notification), ``batch`` or ``garbage``, as a peer sees it."""
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject)
    except (ValueError, RecursionError):
        return "garbage"
    if isinstance(value, list):
        return "batch"
    if not isinstance(value, dict):
        return "garbage"
    if "method" not in value and ("result" in value or "error" in value):
        return "response"
    return "request"


def request_ids(line: bytes) -> set[str]:
    """``repr`` of the ids of the request-shaped messages in ``line`` (a peer may answer them)."""
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject)
    except (ValueError, RecursionError):
        return set()
    items = value if isinstance(value, list) else [value]
    return {repr(m["id"]) for m in items if isinstance(m, dict) and "method" in m and "id" in m}


def _reject(name: str) -> Any:
    raise ValueError(name)
