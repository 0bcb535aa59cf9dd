"""The trace file: one event a line, redacted, bounded, flushed per event (docs/trace.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver.trace import REDACTED, SCHEMA_VERSION, TraceRecorder, bind, read_trace


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def wire(recorder: TraceRecorder, direction: str, message: Any) -> None:
    recorder.wire(direction, orjson.dumps(message) + b"\n")


def test_the_header_names_the_schema_version_and_every_line_has_an_id_and_a_time(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path, role="host", agent=["my-agent"]) as recorder:
        wire(recorder, "out", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        assert recorder.event("cancel", scope="current_turn", by="host") == 2
    found = lines(path)
    assert found[0]["kind"] == "trace"
    assert found[0]["v"] == SCHEMA_VERSION == 1
    assert found[0]["role"] == "host"
    assert [e["id"] for e in found] == [0, 1, 2]
    assert all(isinstance(e["t"], float) for e in found)
    assert found[1] == {**found[1], "kind": "wire", "dir": "out"}
    assert found[1]["msg"]["method"] == "initialize"


def test_credentials_and_environments_never_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    secret = "s3cr3t-value-123"
    with TraceRecorder(path, agent=["agent", "--api-key", secret, f"TOKEN={secret}", "--verbose"]) as rec:
        wire(
            rec,
            "out",
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "authenticate",
                "params": {"methodId": "key", "apiKey": secret},
            },
        )
        wire(rec, "in", {"jsonrpc": "2.0", "id": 3, "result": {"session": secret}})
        wire(
            rec,
            "out",
            {"jsonrpc": "2.0", "id": 4, "method": "auth/login", "params": {"methodId": "m", "code": secret}},
        )
        new = {
            "cwd": "/w",
            "mcpServers": [
                {
                    "name": "a",
                    "command": "x",
                    "args": [],
                    "env": [{"name": "OPENAI_API_KEY", "value": secret}],
                },
                {
                    "name": "b",
                    "url": "http://h",
                    "headers": [{"name": "Authorization", "value": f"Bearer {secret}"}],
                },
            ],
        }
        wire(rec, "out", {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": new})
        wire(
            rec,
            "in",
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "terminal/create",
                "params": {"command": "ls", "env": {"HOME": secret}},
            },
        )
        text = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": f"use Bearer {secret} now"},
        }
        wire(
            rec,
            "in",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": text}},
        )
        usage = {
            "sessionUpdate": "usage_update",
            "used": 10,
            "size": 100,
            "inputTokens": 42,
            "accessToken": secret,
        }
        wire(
            rec,
            "in",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": usage}},
        )
        rec.event("spawn", argv=["agent", "--token", secret], headers={"Authorization": secret})
    raw = path.read_bytes()
    assert secret.encode() not in raw
    found = lines(path)
    assert found[0]["agent"] == ["agent", "--api-key", REDACTED, f"TOKEN={REDACTED}", "--verbose"]
    assert found[1]["msg"]["params"] == {"methodId": "key", "apiKey": REDACTED}
    assert found[2]["msg"]["result"] == REDACTED  # the answer to authenticate, whole
    assert found[3]["msg"]["params"] == {"methodId": "m", "code": REDACTED}
    servers = found[4]["msg"]["params"]["mcpServers"]
    assert servers[0]["env"] == [{"name": "OPENAI_API_KEY", "value": REDACTED}]
    assert servers[1]["headers"] == [{"name": "Authorization", "value": REDACTED}]
    assert found[5]["msg"]["params"]["env"] == {"HOME": REDACTED}
    assert found[6]["msg"]["params"]["update"]["content"]["text"] == f"use Bearer {REDACTED} now"
    kept = found[7]["msg"]["params"]["update"]
    assert (kept["inputTokens"], kept["accessToken"]) == (42, REDACTED)  # counts are not secrets
    assert found[8]["argv"] == ["agent", "--token", REDACTED]
    assert found[8]["headers"] == ["Authorization"]


def test_a_message_over_the_limit_keeps_its_skeleton(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    big = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x" * 5000}}
    with TraceRecorder(path, max_message_bytes=1000) as rec:
        wire(
            rec,
            "in",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": big}},
        )
    event = lines(path)[1]
    assert event["cut"] > 5000
    assert event["msg"] == {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}},
    }


def test_the_file_stops_at_its_size_cap_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    cap = 4096
    with TraceRecorder(path, max_bytes=cap) as rec:
        for i in range(200):
            wire(
                rec,
                "in",
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "n": i}},
            )
        assert rec.cut
        assert rec.dropped > 0
        rec.event("exit", status=0)  # dropped too: the note is the last line
    assert path.stat().st_size <= cap
    found = lines(path)
    assert found[-1]["kind"] == "truncated"
    assert "size cap" in found[-1]["note"]
    assert read_trace(path).truncated


def test_what_is_not_json_is_recorded_as_text(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path) as rec:
        rec.wire("in", b"Starting server on port 3000...\n")
        rec.wire("in", b'{"jsonrpc": "2.0",\n "method": "x"}')  # whitespace with a newline: still one line
    found = lines(path)
    assert found[1]["raw"] == "Starting server on port 3000..."
    assert found[2]["msg"] == {"jsonrpc": "2.0", "method": "x"}


def test_an_event_after_close_is_appended_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    rec = TraceRecorder(path)
    rec.event("connection_end", reason="closed")
    rec.close()
    rec.event("exit", status=0)  # the process exited after its connection closed
    assert [e["kind"] for e in lines(path)] == ["trace", "connection_end", "exit"]


def test_bound_fields_go_on_every_event(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path) as rec:
        sink = bind(bind(rec, conn="c1"), check="x")
        sink.wire("out", b'{"jsonrpc":"2.0","method":"m"}\n')
        sink.event("rung", rung="kill")
    found = lines(path)
    assert (found[1]["conn"], found[1]["check"], found[2]["conn"]) == ("c1", "x", "c1")


def test_every_line_written_survives_the_recording_process_being_killed(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    code = (
        "import os, signal, sys\n"
        "from acp_driver.trace import TraceRecorder\n"
        "rec = TraceRecorder(sys.argv[1])\n"
        "for i in range(50):\n"
        '    rec.wire(\'in\', b\'{"jsonrpc":"2.0","method":"session/update","params":{"n":%d}}\' % i)\n'
        "rec.event('cancel', scope='current_turn')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    found = lines(path)
    assert len(found) == 52
    assert found[-1]["kind"] == "cancel"


def test_a_trace_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    TraceRecorder(path).close()
    assert os.stat(path).st_mode & 0o077 == 0


@pytest.mark.parametrize("cap", [10, 100])
def test_a_cap_too_small_for_the_note_is_refused(tmp_path: Path, cap: int) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        TraceRecorder(tmp_path / "t.ndjson", max_bytes=cap)
