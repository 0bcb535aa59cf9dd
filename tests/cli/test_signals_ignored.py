"""A signal the CLI inherited ignored stays ignored, in every command.

``nohup`` starts a command with SIGHUP ignored, a non-interactive shell starts a background job
(``cmd &``) with SIGINT ignored, a script's ``trap '' TERM`` ignores SIGTERM for what it runs.
Each test starts the real CLI that way (``spawn_cli(ignoring=...)``), sends the ignored signal
mid-work, sees the work go on, then ends it with a signal that is not ignored: that one behaves
as it always does (the turn cancelled through the ladder, exit 128 + N, nothing left running).

Whether the ignored signal did anything is read from what the command does next, never from
waiting for something not to happen: the work goes on past it (three more chunks of the turn, a
second answer), and the signal that ends the command is the only cause anywhere (its exit code,
one ``cancel`` naming it, no "again: killing the agent"). An ignored signal is dropped by the
kernel when it is sent, so nothing of it can come later."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from ..procs import descendants
from .clean import assert_clean
from .test_signals import finish, gone, read_events, spawn_cli, stub, wait_for_file

STREAM = "/stream 1000 20"
"""A 20 s turn at most: a lost signal ends the test as a turn completed, never a hang."""


def _what(sig: signal.Signals) -> str:
    """How the CLI names the cause of a cancel (``cancel`` events: ``interrupt`` for Ctrl-C)."""
    return "interrupt" if sig == signal.SIGINT else sig.name


@pytest.mark.parametrize(
    ("ignored", "ender"),
    [
        (signal.SIGINT, signal.SIGTERM),  # a background job: Ctrl-C at the terminal is not for it
        (signal.SIGHUP, signal.SIGTERM),  # nohup: the terminal closing is not for it
        (signal.SIGTERM, signal.SIGINT),  # trap '' TERM: a group-wide SIGTERM is not for it
    ],
    ids=["SIGINT", "SIGHUP", "SIGTERM"],
)
def test_run_keeps_an_inherited_ignore_mid_turn(ignored: signal.Signals, ender: signal.Signals) -> None:
    proc = spawn_cli("run", "--json", STREAM, ignoring=[ignored])
    events = read_events(proc, lambda e: e["type"] == "update")  # the turn streams
    below = descendants(proc.pid)  # the agent and its supervisor
    assert below
    proc.send_signal(ignored)
    streamed = read_events(
        proc, lambda e: e["type"] != "update" or e["update"]["content"]["text"] == "chunk 4/1000\n"
    )
    assert streamed[-1]["type"] == "update", streamed  # three more chunks: the turn goes on
    events += streamed
    proc.send_signal(ender)
    out, err = finish(proc)
    events += [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 128 + ender, err
    assert [e for e in events if e["type"] == "cancel"] == [{"type": "cancel", "reason": _what(ender)}]
    assert [e for e in events if e["type"] == "note"] == []  # no "... again: killing the agent"
    assert events[-1]["type"] == "result"
    assert events[-1]["resolution"] == "cancelled"
    assert events[-1]["stopReason"] == "cancelled"
    assert_clean(err)
    assert [pid for pid in below if not gone(pid)] == []


def test_chat_keeps_an_inherited_ctrl_c_ignore_mid_turn() -> None:
    """``acp-driver chat < script &``: Ctrl-C neither cancels the turn nor ends the chat;
    SIGTERM still does both. (The script ends after its one prompt: a chat whose turn a Ctrl-C
    did cancel would read that end and exit at once, never hang this test.)"""
    script, writer = os.pipe()
    os.write(writer, f"{STREAM}\n".encode())
    os.close(writer)
    proc = spawn_cli("chat", stdin=script, ignoring=[signal.SIGINT])
    os.close(script)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "chunk 1/1000\n"  # the turn streams
    below = descendants(proc.pid)
    assert below
    proc.send_signal(signal.SIGINT)
    assert [proc.stdout.readline() for _ in range(3)] == [f"chunk {n}/1000\n" for n in (2, 3, 4)]
    proc.send_signal(signal.SIGTERM)
    _out, err = finish(proc)
    assert proc.returncode == 143, err
    assert "cancelling the turn (SIGTERM)" in err
    assert "Ctrl-C" not in err
    assert "turn cancelled" in err
    assert_clean(err)
    assert [pid for pid in below if not gone(pid)] == []


@pytest.mark.parametrize(
    ("ignored", "ender"),
    [(signal.SIGHUP, signal.SIGTERM), (signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT)],
    ids=["SIGHUP", "SIGINT", "SIGTERM"],
)
def test_check_keeps_an_inherited_ignore_mid_audit(
    ignored: signal.Signals, ender: signal.Signals, tmp_path: Path
) -> None:
    """The audit's agent is up: the ignored signal changes nothing; the other one stops the audit
    (with SIGINT ignored, asyncio has no Ctrl-C handler to lend SIGTERM: check ends it anyway)."""
    pidfile = tmp_path / "agent.pid"
    proc = spawn_cli(
        "check", "--json", "--", *stub("--ignore-eof", "--pidfile", str(pidfile)).split(), ignoring=[ignored]
    )
    agent = int(wait_for_file(pidfile, proc))
    proc.send_signal(ignored)
    proc.send_signal(ender)
    _out, err = finish(proc)
    assert proc.returncode == 128 + ender, err
    assert "interrupted; every agent process it started was stopped" in err
    assert_clean(err)
    assert gone(agent)


def test_the_reference_agent_keeps_an_inherited_ctrl_c_ignore() -> None:
    """Run by hand Ctrl-C kills ``acp-driver agent``; started with SIGINT ignored it serves on."""
    proc = spawn_cli("agent", stdin=subprocess.PIPE, ignoring=[signal.SIGINT])
    assert proc.stdin is not None
    assert proc.stdout is not None
    for request_id in (1, 2):
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == request_id  # serving (still, after Ctrl-C)
        proc.send_signal(signal.SIGINT)  # SIGINT's default action would kill it at once
    _out, err = finish(proc)  # closes its stdin
    assert proc.returncode == 0  # its stdin ended
    assert err == ""
