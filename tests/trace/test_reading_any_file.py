"""``acp-driver trace FILE`` reads any file without a traceback or a hang: odd shapes a real
recording (or a hostile peer) holds are read, an unknown schema version and what is not a trace
are refused with one line, and the read is bounded (docs/trace.md, "Reading a trace")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_driver.trace import TraceFormatError, read_trace, render_html, summarize

from ..fuzz.strategies import EXAMPLES

CLI = [sys.executable, "-m", "acp_driver", "trace"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False)


def write(path: Path, *events: dict[str, Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def header(**fields: Any) -> dict[str, Any]:
    return {"id": 0, "t": 0.0, "kind": "trace", "v": 1, "role": "host", "agent": ["a"], **fields}


def wire(eid: int, direction: str, message: Any) -> dict[str, Any]:
    return {"id": eid, "t": eid / 10, "kind": "wire", "dir": direction, "msg": message}


def read_back(path: Path) -> str:
    """The summary and the page, through the real command: exit 0, nothing on stderr but the
    page's path."""
    page = path.with_suffix(".html")
    done = cli(str(path), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"acp-driver trace: timeline written to {page}\n"
    return done.stdout


def refused(*args: str) -> str:
    """The command's one line of error (exit 1, no traceback)."""
    done = cli(*args)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("rid", [{"n": 1}, [1, 2], {"a": [{}]}])
def test_requests_whose_id_is_an_object_or_an_array_are_read(tmp_path: Path, rid: Any) -> None:
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
    path = write(
        tmp_path / "t.ndjson",
        header(),
        wire(1, "out", {"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": prompt}),
        wire(2, "in", {"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": {
            "sessionId": "s", "toolCall": {"title": "t"}, "options": []}}),
        wire(3, "out", {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}}),
        wire(4, "out", {"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}}),
        wire(5, "in", {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "cancelled"}}),
        wire(6, "in", {"jsonrpc": "2.0", "id": [rid], "result": {}}),
    )  # fmt: skip
    summary = read_back(path)
    assert "turn 1: 'hi'" in summary
    (turn,) = read_trace(path).turns
    assert turn.stop_reason == "cancelled"
    assert [p.outcome for p in turn.permissions] == ["cancelled"]


def test_a_v2_update_that_is_not_an_object_is_read(tmp_path: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}}
    prompt = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": []},
    }
    path = write(
        tmp_path / "t.ndjson",
        header(),
        wire(1, "out", init),
        wire(2, "in", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2}}),
        wire(3, "out", prompt),
        wire(4, "in", {"jsonrpc": "2.0", "id": 1, "result": {"messageId": "m"}}),
        *(wire(5 + i, "in", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": odd}}) for i, odd in enumerate([[1], "idle", 7, None])),
    )  # fmt: skip
    read_back(path)
    assert read_trace(path).peers[""].version == 2


@pytest.mark.parametrize("agent", ["my-agent --flag", 42, {"cmd": "x"}, None, True])
def test_a_header_whose_agent_is_not_a_list_is_read(tmp_path: Path, agent: Any) -> None:
    path = write(tmp_path / "t.ndjson", header(agent=agent))
    summary = read_back(path)
    if isinstance(agent, str):
        assert agent in summary


@pytest.mark.parametrize("version", [99, 0, "1", 1.0, True, None, [1]])
def test_a_schema_version_this_reader_does_not_know_is_refused(tmp_path: Path, version: Any) -> None:
    path = write(tmp_path / "t.ndjson", header(v=version), wire(1, "out", {"jsonrpc": "2.0", "method": "m"}))
    line = refused(str(path))
    assert "is not one this reader knows (1)" in line
    with pytest.raises(TraceFormatError, match="schema version"):
        read_trace(path)


def test_dev_zero_is_refused_after_a_bounded_read() -> None:
    """No newline, ever: the first line is read up to its bound (64 MiB), then refused."""
    line = refused("/dev/zero")
    assert "not an acp-driver trace" in line


def test_dev_urandom_is_refused_at_its_first_line() -> None:
    """An endless file: its first line is not a header, and nothing after it is read."""
    line = refused("/dev/urandom")
    assert "not an acp-driver trace" in line


def test_a_file_over_the_read_bound_is_refused(tmp_path: Path) -> None:
    events = [header(), *(wire(i, "in", {"jsonrpc": "2.0", "method": "x"}) for i in range(1, 200))]
    path = write(tmp_path / "t.ndjson", *events)
    size = os.path.getsize(path)
    assert len(read_trace(path, max_bytes=size).events) == 200  # exactly at the bound: read
    with pytest.raises(TraceFormatError, match=f"over {size - 1} bytes"):
        read_trace(path, max_bytes=size - 1)


def test_a_first_line_that_is_not_a_header_is_refused_at_once(tmp_path: Path) -> None:
    """Only the first line is read: a trace never starts with anything but its header."""
    path = tmp_path / "t.ndjson"
    path.write_bytes(b"junk\n" + orjson.dumps(header()) + b"\n")
    lines_read = []

    def counted() -> Any:
        with open(path, "rb") as f:
            for line in f:
                lines_read.append(line)
                yield line

    from acp_driver.trace._read import parse_trace

    with pytest.raises(TraceFormatError, match="not an acp-driver trace"):
        parse_trace(counted())
    assert lines_read == [b"junk\n"]


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_KINDS = ["wire", "cancel", "rung", "resolved", "signal", "exit", "spawn", "timeout", "verdict",
          "check_start", "connection_start", "connection_end", "truncated", "oversized", "x"]  # fmt: skip
_METHODS = ["session/prompt", "session/update", "session/cancel", "$/cancel_request", "initialize",
            "session/request_permission", "auth/login", None, 5]  # fmt: skip
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "id": _JSON,
        "method": st.sampled_from(_METHODS),
        "params": _JSON | st.fixed_dictionaries({}, optional={
            "sessionId": st.sampled_from(["s", 1, None]), "update": _JSON, "requestId": _JSON,
            "prompt": _JSON, "toolCall": _JSON}),
        "result": _JSON | st.fixed_dictionaries({}, optional={
            "stopReason": _JSON, "protocolVersion": st.sampled_from([1, 2, "2", None]),
            "outcome": _JSON, "messageId": _JSON}),
        "error": _JSON,
    },
)  # fmt: skip
_EVENT = st.fixed_dictionaries(
    {"kind": st.sampled_from(_KINDS), "t": st.floats(min_value=0, max_value=1e6)},
    optional={
        "dir": st.sampled_from(["in", "out", 3]),
        "msg": _MESSAGE | st.lists(_MESSAGE, max_size=2) | _JSON,
        "raw": _JSON,
        **{k: _JSON for k in ("session", "scope", "by", "rung", "due", "resolution", "name", "to",
                              "status", "description", "reason", "rule", "level", "result",
                              "evidence", "conn", "check", "after", "pid", "argv")},
    },
)  # fmt: skip


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries({}, optional={"role": _JSON, "agent": _JSON, "headers": _JSON, "started": _JSON}),
    st.lists(_EVENT, max_size=12),
)
def test_whatever_events_a_file_holds_it_is_summarized_and_drawn(
    head: dict[str, Any], events: list[Any]
) -> None:
    lines = [orjson.dumps(header(**head))]
    lines += [
        orjson.dumps({**event, "id": i}, option=orjson.OPT_NON_STR_KEYS) for i, event in enumerate(events, 1)
    ]
    from acp_driver.trace._read import parse_trace

    trace = parse_trace(line + b"\n" for line in lines)
    summarize(trace)
    render_html(trace)
