"""``--trace FILE`` on the commands, and ``acp-driver trace FILE [--html OUT]``, as a user runs them."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver.trace import read_trace

from ..waiting import eventually

CLI = [sys.executable, "-m", "acp_driver"]


def events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # rich's tables: one line per row
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def test_check_links_each_verdict_to_the_moments_that_prove_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.ndjson"
    # v1's rules (a prompt answered with its stop reason); test_check_v2.py has v2's.
    done = cli("check", "--json", "--protocol", "1", "--trace", str(path), "--timeout", "5", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = orjson.loads(done.stdout)
    found = {e["id"]: e for e in events(path)}
    for result in report["results"]:
        verdict = found[result["traceEvent"]]
        assert verdict["kind"] == "verdict"
        assert (verdict["rule"], verdict["result"]) == (result["rule"], result["result"])
    trace = read_trace(path)
    by_rule = {v.rule: v for v in trace.verdicts}
    cancel = by_rule["session/cancel answered stopReason cancelled"]
    assert cancel.check == "check_cancel"  # the first probe negotiated the version, as its check's
    proof = [found[eid] for eid in cancel.refs]
    sent = [e for e in proof if e["kind"] == "wire" and e["dir"] == "out"]
    assert any(e["msg"].get("method") == "session/cancel" for e in sent)
    answers = [e for e in proof if e["kind"] == "wire" and e["dir"] == "in" and "result" in e["msg"]]
    assert any(e["msg"]["result"].get("stopReason") == "cancelled" for e in answers)
    assert all(found[eid]["check"] == cancel.check for eid in cancel.refs)  # only its own check's moments
    permission = by_rule["cancel while a permission request is pending ends the prompt cancelled"]
    asked = [
        found[eid]
        for eid in permission.refs
        if found[eid].get("msg", {}).get("method") == "session/request_permission"
    ]
    assert len(asked) == 1
    # the page links each verdict to those moments, drawn with the same ids
    html = tmp_path / "audit.html"
    drawn = cli("trace", str(path), "--html", str(html))
    assert drawn.returncode == 0, drawn.stderr
    page = html.read_text()
    for eid in cancel.refs:
        if found[eid]["kind"] != "check_start":
            assert f'id="e{eid}"' in page
    assert f'href="#e{cancel.refs[0]}"' in page
    assert "verdicts" in drawn.stdout
    # the text output names each verdict's event
    again = tmp_path / "again.ndjson"
    text = cli("check", "--protocol", "1", "--trace", str(again), "--timeout", "5", timeout=300)
    named = [int(n) for n in re.findall(r"\[trace #(\d+)\]", text.stdout)]
    assert len(named) == len(report["results"]), text.stdout
    assert {found_again["kind"] for found_again in events(again) if found_again["id"] in named} == {"verdict"}
    assert f"trace: {again}" in text.stdout


async def test_ctrl_c_is_recorded_as_what_the_cancel_answered(tmp_path: Path) -> None:
    path = tmp_path / "run.ndjson"
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "run",
        "--trace",
        str(path),
        "/stream 500 20",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await eventually(
            lambda: path.exists() and b"agent_message_chunk" in path.read_bytes(), "a chunk traced"
        )
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130
    found = events(path)
    kinds = [e["kind"] for e in found]
    received = kinds.index("signal")
    assert found[received] == {**found[received], "name": "SIGINT", "to": "host", "phase": "turn"}
    assert kinds.index("cancel") > received
    summary = cli("trace", str(path))
    assert summary.returncode == 0
    assert "after SIGINT received" in summary.stdout
    assert "resolved cancelled by session_cancel" in summary.stdout


def test_an_unwritable_trace_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    where = str(tmp_path / "no" / "such" / "dir" / "t.ndjson")
    for args in (["run", "hi"], ["check"], ["chat"]):
        done = cli(*args, "--trace", where)
        assert done.returncode == 2, (args, done.stderr)
        assert "--trace" in done.stderr
        assert "cannot write" in done.stderr
    done = cli("serve", "--port", "0", "--trace", where)
    assert done.returncode == 2
    assert "cannot write" in done.stderr


def test_reading_a_file_that_is_not_a_trace_says_so(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    done = cli("trace", str(junk))
    assert done.returncode == 1
    assert "not an acp-driver trace" in done.stderr
    missing = cli("trace", str(tmp_path / "missing.ndjson"))
    assert missing.returncode == 1
    assert "cannot read" in missing.stderr


def test_a_trace_cut_by_a_crash_is_read_up_to_where_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    whole = cli("run", "--trace", str(path), "/stream 3 0")
    assert whole.returncode == 0
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])  # the last line cut mid-way
    done = cli("trace", str(path))
    assert done.returncode == 0, done.stderr
    assert "1 line(s) that are not trace events were skipped" in done.stdout
    assert "turn 1" in done.stdout


async def test_serve_records_each_connection_and_the_ladder_when_it_ends(tmp_path: Path) -> None:
    pytest.importorskip("websockets")
    path = tmp_path / "serve.ndjson"
    server = await asyncio.create_subprocess_exec(
        *CLI, "serve", "--port", "0", "--cancel-budget", "1", "--trace", str(path), "--",
        sys.executable, "-m", "acp_driver", "agent", "--behavior", "ignore-cancel",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        async with asyncio.timeout(60):
            line = (await server.stderr.readline()).decode()
        url = line.split("listening on ")[1].strip().replace("http://", "ws://")
        client_trace = tmp_path / "client.ndjson"
        client = await asyncio.create_subprocess_exec(
            *CLI, "run", "--protocol", "1", "--agent", url, "--header", "Authorization: Bearer sekrit-token",
            "--trace", str(client_trace), "/stream 500 20",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert client.stdout is not None
        async with asyncio.timeout(60):
            await client.stdout.readline()  # streaming
        client.kill()  # the client vanishes mid-turn: the server's ladder ends the agent's turn
        await client.wait()
        await eventually(lambda: b'"kind":"exit"' in path.read_bytes(), "the agent's exit traced", timeout=30)
    finally:
        server.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await server.wait()
    found = events(path)
    assert found[0]["role"] == "server"
    conn = next(e["conn"] for e in found if e["kind"] == "connection_start")
    mine = [e for e in found if e.get("conn") == conn]
    kinds = [e["kind"] for e in mine]
    assert kinds[:2] == ["connection_start", "spawn"]
    end = next(e for e in mine if e["kind"] == "cancel")
    assert (end["scope"], end["by"]) == ("connection", "server")
    rungs = [e["rung"] for e in mine if e["kind"] == "rung"]
    assert rungs[:1] == ["session_cancel"]
    by_server = [e["msg"]["method"] for e in mine if e["kind"] == "wire" and e.get("by") == "server"]
    assert "session/cancel" in by_server
    assert "exit" in kinds
    assert "resolved" in kinds
    # the client's own trace (a remote agent), cut by its SIGKILL: every line written is there
    theirs = events(client_trace)
    assert theirs[0]["agent"] == [url]
    assert theirs[0]["headers"] == ["Authorization"]
    assert b"sekrit-token" not in client_trace.read_bytes()
    assert any(e["kind"] == "wire" and e["msg"].get("method") == "session/update" for e in theirs)
    trace = read_trace(path)
    (turn,) = trace.peers[conn].turns
    assert any(m.kind == "session_cancel" for m in turn.markers)
    assert os.stat(path).st_mode & 0o077 == 0


def test_a_v2_trace_ends_each_turn_at_its_idle(tmp_path: Path) -> None:
    """v2: the prompt's answer only says it was inserted; the reader ends the turn at the idle
    (with its stop reason), and a held prompt is a turn of its own."""
    path = tmp_path / "v2.ndjson"
    done = subprocess.run(
        [*CLI, "run", "--protocol", "2", "--trace", str(path), "/stream 3 20"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    trace = read_trace(path)
    (peer,) = trace.peers.values()
    assert peer.version == 2
    (turn,) = peer.turns
    assert turn.stop_reason == "end_turn"
    assert turn.end is not None
    assert [m.label for m in turn.updates].count("agent_message_chunk") == 3
    assert all(not t.late for t in peer.turns)


def test_an_export_that_cannot_be_written_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    assert cli("run", "--trace", str(path), "/stream 2 0").returncode == 0
    for option in ("--chrome", "--html"):
        done = cli("trace", str(path), option, str(tmp_path))  # a directory
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith(f"acp-driver trace: cannot write {str(tmp_path)!r}")
        assert "Traceback" not in done.stderr
    done = cli("trace", str(path), "--chrome", str(tmp_path / "t.json"))
    assert done.returncode == 0
    assert "verdict: completed (end_turn)" in done.stdout
    assert orjson.loads((tmp_path / "t.json").read_bytes())["traceEvents"]
