"""The CLI as a user runs it: real processes, real signals, real pipes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ..procs import group_alive

CLI = [sys.executable, "-m", "acp_driver"]
AGENT = f"{sys.executable} -m acp_driver agent"


def run(*args: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.update(kwargs.pop("env", {}))
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def group_gone(pid: int) -> bool:
    return not group_alive(pid)


def test_version_and_help() -> None:
    version = run("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("acp-driver ")
    helped = run("--help")
    assert helped.returncode == 0
    assert "examples:" in helped.stdout
    assert "exit codes" in helped.stdout
    for sub in ("run", "chat", "check", "agent"):
        assert run(sub, "--help").returncode == 0


def test_no_command_prints_help_and_exits_2() -> None:
    result = run()
    assert result.returncode == 2
    assert "usage:" in result.stdout


def test_run_echoes_the_prompt_on_stdout_and_exits_0() -> None:
    result = run("run", "hello world")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello world\n"
    assert "turn completed" in result.stderr
    assert "\x1b[" not in result.stdout + result.stderr  # no colour off a TTY


def test_run_streams_chunks_and_reports_tools_on_stderr() -> None:
    result = run("run", "/stream 3 0\n/tool grep\n/think hmm")
    assert result.returncode == 0
    assert result.stdout == "chunk 1/3\nchunk 2/3\nchunk 3/3\n"
    assert "grep" in result.stderr
    assert "completed" in result.stderr
    assert "thinking: hmm" in result.stderr


def test_quiet_keeps_only_the_answer() -> None:
    result = run("run", "-q", "/tool grep\nanswer")
    assert result.returncode == 0
    assert result.stdout == "answer\n"
    assert result.stderr == ""


def test_prompt_from_stdin() -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run(
        [*CLI, "run"], input="from stdin", capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0
    assert result.stdout == "from stdin\n"


def test_json_lines_end_with_the_result() -> None:
    result = run("run", "--json", "/stream 2 0")
    assert result.returncode == 0
    events = json_lines(result.stdout)
    assert [e["type"] for e in events[:2]] == ["agent", "session"]
    updates = [e for e in events if e["type"] == "update"]
    assert [u["update"]["content"]["text"] for u in updates] == ["chunk 1/2\n", "chunk 2/2\n"]
    last = events[-1]
    assert last["type"] == "result"
    assert last["stopReason"] == "end_turn"
    assert last["resolution"] == "completed"
    assert last["elapsedMs"] >= 0


def test_permission_defaults_to_deny_off_a_tty_and_yes_allows() -> None:
    denied = run("run", "--json", "/permission")
    perm = next(e for e in json_lines(denied.stdout) if e["type"] == "permission")
    assert perm["outcome"] == {"outcome": "selected", "optionId": "reject"}
    assert perm["decidedBy"] == "not a TTY"
    allowed = run("run", "/permission", "--yes")
    assert "permission outcome: selected allow" in allowed.stdout


def test_turn_timeout_cancels_and_exits_124() -> None:
    result = run("run", "--json", "--turn-timeout", "0.5", "/sleep 30000")
    assert result.returncode == 124
    events = json_lines(result.stdout)
    assert {"type": "cancel", "reason": "timeout"} in events
    last = events[-1]
    assert last["type"] == "result"
    assert last["stopReason"] == "cancelled"
    assert last["resolution"] == "cancelled"
    assert last["cancel"]["resolvedBy"] == "session_cancel"


def test_turn_timeout_on_an_agent_that_ignores_cancel_kills_it() -> None:
    result = run(
        "run",
        "--json",
        "--turn-timeout",
        "0.3",
        "--cancel-grace",
        "1",
        "--agent",
        f"{AGENT} --behavior ignore-cancel",
        "/sleep 30000",
    )
    assert result.returncode == 124
    events = json_lines(result.stdout)
    steps = [e["step"] for e in events if e["type"] == "ladder"]
    assert steps == ["session_cancel", "cancel_request", "terminate"]
    assert events[-1]["resolution"] == "killed"
    pid = next(e["pid"] for e in events if e["type"] == "agent")
    assert group_gone(pid)


def spawn_cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def wait_for_line(proc: subprocess.Popen[str], predicate: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Read JSON lines from the CLI until ``predicate(event)``; returns the events read."""
    assert proc.stdout is not None
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        events.append(json.loads(line))
        if predicate(events[-1]):
            return events
    raise AssertionError(f"expected event not seen; got {events}")


def test_ctrl_c_cancels_the_turn_and_exits_130() -> None:
    proc = spawn_cli("run", "--json", "/stream 1000 20")
    try:
        before = wait_for_line(proc, lambda e: e["type"] == "update")
        proc.send_signal(signal.SIGINT)
        out, _err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    events = before + json_lines(out)
    assert proc.returncode == 130
    assert {"type": "cancel", "reason": "interrupt"} in events
    assert events[-1]["resolution"] == "cancelled"
    assert events[-1]["stopReason"] == "cancelled"
    pid = next(e["pid"] for e in events if e["type"] == "agent")
    assert group_gone(pid)


def test_second_ctrl_c_kills_a_hung_agent() -> None:
    proc = spawn_cli("run", "--json", "--cancel-grace", "60", "--agent", f"{AGENT} --behavior hang", "x")
    try:
        events = wait_for_line(proc, lambda e: e["type"] == "prompt")  # the turn is on
        proc.send_signal(signal.SIGINT)
        events += wait_for_line(proc, lambda e: e["type"] == "ladder")
        proc.send_signal(signal.SIGINT)
        out, _err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    events += json_lines(out)
    assert proc.returncode == 130
    steps = [e["step"] for e in events if e["type"] == "ladder"]
    assert steps == ["session_cancel", "kill"]
    assert events[-1]["resolution"] == "killed"
    assert events[-1]["elapsedMs"] < 30_000  # far less than the 60 s budget
    pid = next(e["pid"] for e in events if e["type"] == "agent")
    assert group_gone(pid)


def test_agent_that_cannot_start_exits_1_with_a_reason() -> None:
    result = run("run", "--agent", "/nonexistent/agent-binary --acp", "hi")
    assert result.returncode == 1
    assert "agent failed to start" in result.stderr
    assert "/nonexistent/agent-binary" in result.stderr


def test_agent_error_exits_4() -> None:
    result = run("run", "/fail out of tokens")
    assert result.returncode == 4
    assert "out of tokens" in result.stderr


def test_agent_error_exits_4_in_v2_too() -> None:
    """v2 reports a failed turn as an idle with stop reason ``error``: a turn error, exit 4."""
    result = run("run", "--protocol", "2", "/fail out of tokens")
    assert result.returncode == 4, result.stderr
    assert "turn error (stop reason error" in result.stderr


def test_agent_dying_mid_turn_exits_3(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if msg.get('method') == 'initialize':\n"
        "        print(json.dumps({'jsonrpc':'2.0','id':msg['id'],'result':{'protocolVersion':1}}), flush=True)\n"
        "    elif msg.get('method') == 'session/new':\n"
        "        print(json.dumps({'jsonrpc':'2.0','id':msg['id'],'result':{'sessionId':'s1'}}), flush=True)\n"
        "    elif msg.get('method') == 'session/prompt':\n"
        "        sys.stderr.write('out of memory, bye\\n'); sys.exit(7)\n"
    )
    result = run("run", "--agent", f"{sys.executable} {script}", "hi")
    assert result.returncode == 3
    assert "exit status 7" in result.stderr
    assert "out of memory, bye" in result.stderr


def test_usage_errors() -> None:
    assert run("run", "--turn-timeout", "0", "x").returncode == 2
    assert run("run", "--cwd", "/nonexistent/dir", "x").returncode == 2


def test_chat_runs_turns_from_piped_lines() -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run(
        [*CLI, "chat"],
        input="first turn\n\n/stream 2 0\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "first turn\nchunk 1/2\nchunk 2/2\n"
    assert result.stderr.count("turn completed") == 2


def test_agent_subcommand_speaks_acp() -> None:
    request = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}},
        }
    )
    result = subprocess.run([*CLI, "agent"], input=request + "\n", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    answer = json.loads(result.stdout.splitlines()[0])
    assert answer["id"] == 1
    assert answer["result"]["protocolVersion"] == 1
    assert answer["result"]["agentInfo"]["name"] == "acp-driver-reference-agent"


def check(*args: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    result = run("check", "--json", "--timeout", "1.5", *args, timeout=timeout)
    return result.returncode, json.loads(result.stdout)


def results_by_rule(doc: dict[str, Any]) -> dict[str, str]:
    return {r["rule"]: r["result"] for r in doc["results"]}


CANCEL_RULE = "session/cancel answered stopReason cancelled"
CANCEL_REQUEST_RULE = "$/cancel_request ends the in-flight prompt promptly"
IDLE_RULE = "cancel on an idle session does not poison the next turn"


def test_check_passes_the_polite_reference_agent() -> None:
    code, doc = check("--strict")
    assert code == 0
    rules = results_by_rule(doc)
    assert set(rules.values()) == {"pass"}, doc
    assert len(rules) == 12
    assert doc["agentInfo"]["name"] == "acp-driver-reference-agent"


@pytest.mark.parametrize(
    ("behavior", "failing_rule", "must_fails", "evidence"),
    [
        ("ignore-cancel", CANCEL_RULE, True, None),
        ("end-turn-on-cancel", CANCEL_RULE, True, "end_turn"),
        ("error-on-cancel", CANCEL_RULE, True, "JSON-RPC error"),
        ("no-answer-on-cancel-request", CANCEL_REQUEST_RULE, False, None),
        ("hang", CANCEL_RULE, True, None),
    ],
    ids=["ignore-cancel", "end-turn-on-cancel", "error-on-cancel", "no-answer-on-cancel-request", "hang"],
)
def test_check_fails_each_misbehaviour_naming_the_rule(
    behavior: str, failing_rule: str, must_fails: bool, evidence: str | None
) -> None:
    code, doc = check("--", *AGENT.split(), "--behavior", behavior)
    rules = results_by_rule(doc)
    assert rules[failing_rule] == "fail", doc
    assert code == (5 if must_fails else 0)
    assert doc["mustPassed"] is not must_fails
    if evidence is not None:  # the evidence names what went wrong
        assert evidence in next(r["evidence"] for r in doc["results"] if r["rule"] == failing_rule)
    if behavior == "hang":  # never works on a prompt: the idle rule is decided at once, naming why
        idle = next(r for r in doc["results"] if r["rule"] == IDLE_RULE)
        assert idle["result"] == "skip"
        assert idle["evidence"].startswith("decided at once: depends on cancel-stop-reason")
    if not must_fails:  # --strict fails on a SHOULD too (a failed MUST is exit 5 either way)
        strict_code, _ = check("--strict", "--", *AGENT.split(), "--behavior", behavior)
        assert strict_code == 5


def test_check_table_output() -> None:
    result = run("check", "--timeout", "1.5")
    assert result.returncode == 0
    assert "cancellation audit of" in result.stdout
    assert "every MUST rule passed" in result.stdout


def test_chat_v2_shows_every_turn_when_the_agent_reuses_one_message_id() -> None:
    """An agent whose every reply carries the same ``messageId`` (claude-agent-acp behind a model
    server with fixed ids): the second turn's text is the second turn's, not the first's (the
    id was of a turn that ended) nor background work."""
    agent = [sys.executable, str(Path(__file__).with_name("quirky_v2_agent.py")), "--reuse-reply-id"]
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run(
        [*CLI, "chat", "--protocol", "2", "--agent", " ".join(agent)],
        input="say hi\nsay bye\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "say hi\nsay bye\n", result.stderr
    assert result.stderr.count("turn completed") == 2
