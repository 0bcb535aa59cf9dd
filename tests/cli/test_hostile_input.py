"""Odd and hostile input to the CLI: bad option values, bytes that are not UTF-8, stdin that is
a file, agents that misreport their turns. Every case runs the CLI as a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import AGENT, CLI, group_gone, json_lines, run

QUIRKY = f"{sys.executable} {Path(__file__).with_name('quirky_agent.py')}"


def run_bytes(
    args: list[str | bytes], *, stdin: bytes | None = None, cwd: Path | bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


def assert_usage_error(result: subprocess.CompletedProcess[bytes], reason: str) -> None:
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, err
    assert "Traceback" not in err
    assert result.stdout == b""  # no agent was started
    last = err.strip().splitlines()[-1]
    assert last.startswith("acp-driver"), err
    assert ": error: " in last, err
    assert reason in last, err


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--turn-timeout", "nan"], "--turn-timeout: not a finite number of seconds"),
        (["--turn-timeout", "inf"], "--turn-timeout: not a finite number of seconds"),
        (["--cancel-grace", "nan"], "--cancel-grace: not a finite number of seconds"),
        (["--cancel-grace", "inf"], "--cancel-grace: not a finite number of seconds"),
        (["--agent", "foo 'bar"], "No closing quotation"),
        (["--agent", ""], "--agent is empty"),
        (["--agent", "  "], "--agent is empty"),
    ],
)
def test_bad_option_values_exit_2_with_a_one_line_reason(args: list[str], reason: str) -> None:
    assert_usage_error(run_bytes(["run", *args, "hello"]), reason)


def test_check_refuses_nan_seconds() -> None:
    assert_usage_error(run_bytes(["check", "--busy-after", "nan"]), "--busy-after")


def test_a_directory_whose_name_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    odd = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(odd)
    assert_usage_error(run_bytes(["run", "--cwd", odd, "hello"]), "is not valid UTF-8")
    # The current directory (the default --cwd) too; a valid --cwd then works from there.
    assert_usage_error(run_bytes(["run", "hello"], cwd=odd), "(pass --cwd)")
    ok = run_bytes(["run", "--cwd", os.fsencode(tmp_path), "hello"], cwd=odd)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == b"hello\n"


def test_a_prompt_that_is_not_utf8_runs_with_replacement_characters() -> None:
    """As an argument and on stdin: decoded as Python's tools do (U+FFFD), sent, exit 0."""
    argument = run_bytes(["run", b"caf\xe9"])
    assert argument.returncode == 0, argument.stderr
    assert argument.stdout.decode() == "caf\ufffd\n"  # the agent echoes what it received
    piped = run_bytes(["run"], stdin=b"caf\xe9 \xff")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.decode() == "caf\ufffd \ufffd\n"


def test_chat_reads_stdin_from_a_file_and_from_dev_null(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes(b"first\nsecond \xff\n")
    with prompts.open("rb") as stdin:
        result = subprocess.run(
            [*CLI, "chat"], stdin=stdin, capture_output=True, timeout=60, env={**os.environ, "NO_COLOR": "1"}
        )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert "Traceback" not in err
    assert result.stdout.decode() == "first\nsecond \ufffd\n"
    assert err.count("turn completed") == 2
    empty = run_bytes(["chat"])  # stdin is /dev/null
    assert empty.returncode == 0, empty.stderr
    assert b"Traceback" not in empty.stderr
    closed = subprocess.run(  # no stdin at all (``<&-``): Python's sys.stdin is None
        [*CLI, "chat"],
        stdin=None,
        capture_output=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
        preexec_fn=lambda: os.close(0),
    )
    assert closed.returncode == 0, closed.stderr
    assert b"Traceback" not in closed.stderr


def test_chat_shows_every_turn_when_the_agent_reuses_a_message_id(tmp_path: Path) -> None:
    """Each turn's chunks carry the same messageId as the previous turn's: all are shown."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello\nhello\nhello\n")
    with prompts.open("rb") as stdin:
        result = subprocess.run(
            [*CLI, "chat", "--agent", f"{QUIRKY} --message-id m1"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NO_COLOR": "1"},
        )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("turn completed") == 3
    assert result.stdout.count("hello") == 3


def test_an_agent_that_cancels_unasked_is_named() -> None:
    as_json = run("run", "--json", "/stop cancelled")
    assert as_json.returncode == 0, as_json.stderr
    last = json_lines(as_json.stdout)[-1]
    assert last["resolution"] == "cancelled"
    assert last["cancelledBy"] == "agent"
    assert "cancel" not in last  # this host never cancelled
    human = run("run", "/stop cancelled")
    assert "turn cancelled (stop reason cancelled; cancelled by the agent, nobody here asked" in human.stderr


def test_a_host_cancel_says_which_step_took_effect() -> None:
    result = run("run", "--turn-timeout", "0.3", "/sleep 30000")
    assert result.returncode == 124
    assert "cancelled by this host, session/cancel took effect" in result.stderr
    as_json = run("run", "--json", "--turn-timeout", "0.3", "/sleep 30000")
    last = json_lines(as_json.stdout)[-1]
    assert last["cancelledBy"] == "host"
    assert last["cancel"]["resolvedBy"] == "session_cancel"


def test_a_cancel_the_agent_ignored_is_reported_ignored() -> None:
    """The agent ends the turn end_turn after the cancel: the cancel did not take effect."""
    agent = f"{AGENT} --behavior end-turn-on-cancel"
    as_json = run("run", "--json", "--turn-timeout", "0.3", "--agent", agent, "/sleep 30000")
    assert as_json.returncode == 124, as_json.stderr
    last = json_lines(as_json.stdout)[-1]
    assert last["resolution"] == "completed"
    assert last["stopReason"] == "end_turn"
    assert last["cancelledBy"] is None
    assert last["cancel"]["resolvedBy"] == "ignored"
    human = run("run", "--turn-timeout", "0.3", "--agent", agent, "/sleep 30000")
    assert "the cancel did not take effect: the agent ended the turn on its own" in human.stderr


def test_an_error_answer_is_reported_once_without_a_doubled_prefix() -> None:
    result = run("run", "/fail boom")
    assert result.returncode == 4
    assert "error: the agent answered the prompt with an error: boom" in result.stderr
    assert "error: error" not in result.stderr


def test_deny_decisions_are_labelled_deny() -> None:
    denied = run("run", "--json", "--deny", "/permission")
    perm = next(e for e in json_lines(denied.stdout) if e["type"] == "permission")
    assert perm["outcome"] == {"outcome": "selected", "optionId": "reject"}
    assert perm["decidedBy"] == "--deny"
    human = run("run", "--deny", "/permission")
    assert "(--deny)" in human.stderr
    assert "not a TTY" not in human.stderr


def test_an_agent_that_closes_its_stdout_is_reported_with_the_reason() -> None:
    result = run("run", "--agent", f"{QUIRKY} --close-stdout", "hello")
    assert result.returncode == 3
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert "closed its stdout" in error, result.stderr


@pytest.mark.parametrize("json_mode", [False, True], ids=["console", "json"])
def test_a_reader_that_goes_away_is_a_sigpipe_not_a_traceback(json_mode: bool) -> None:
    # `acp-driver run … | head -1`: stdout's reader exits mid-turn. The turn is cancelled
    # through the ladder, the agent reaped, and the exit status is 128 + SIGPIPE.
    args = [*CLI, "run", *(["--json"] if json_mode else []), "/stream 1000 20"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first, "no output before the pipe was closed"
        proc.stdout.close()  # the reader is gone: the next write gets EPIPE
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    text = err.decode(errors="replace")
    assert proc.returncode == 128 + signal.SIGPIPE, text
    assert "Traceback" not in text
    if not json_mode:
        assert "cancelling the turn (SIGPIPE)" in text
        pid = int(text.split("(pid ", 1)[1].split(")", 1)[0])
        assert group_gone(pid)
