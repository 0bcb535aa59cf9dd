"""``acp-driver check`` against agents with the deviations real agents have (real processes, real pipes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .test_cli import AGENT, group_gone, run

QUIRKY = [sys.executable, str(Path(__file__).with_name("quirky_agent.py"))]

CANCEL_RULE = "session/cancel answered stopReason cancelled"
CANCEL_REQUEST_RULE = "$/cancel_request ends the in-flight prompt promptly"
NOTIFICATION_RULE = "no reply to any notification"
PERMISSION_RULE = "cancel while a permission request is pending ends the prompt cancelled"
MALFORMED_RULE = "a malformed line does not kill the agent"


def check(*args: str, agent: list[str] | None = None, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    command = ["--", *agent] if agent is not None else []
    result = run("check", "--json", "--timeout", "1.5", *args, *command, timeout=120, cwd=cwd)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def rule(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(r for r in doc["results"] if r["rule"] == name)
    return found


def test_cancel_waits_for_turn_activity_not_session_updates() -> None:
    # available_commands_update at once, the first chunk 0.5 s later; a cancel before it is lost.
    code, doc = check(agent=[*QUIRKY, "--warm-up", "500"])
    cancel = rule(doc, CANCEL_RULE)
    assert cancel["result"] == "pass", cancel
    assert "after the first turn activity (agent_message_chunk" in cancel["evidence"]
    assert code == 0


def test_busy_after_cancels_an_agent_silent_while_working() -> None:
    # A silent 2 s turn, a 10 s --timeout: only --busy-after gets the cancel out while it runs.
    _, doc = check(
        "--timeout", "10", "--busy-after", "0.3", agent=[*QUIRKY, "--silent", "--stream", "40", "50"]
    )
    cancel = rule(doc, CANCEL_RULE)
    assert cancel["result"] == "pass", cancel
    assert "(--busy-after), before any turn activity" in cancel["evidence"]
    _, doc = check(agent=[*QUIRKY, "--silent"])
    assert "no turn activity yet (a silent agent: see --busy-after)" in rule(doc, CANCEL_RULE)["evidence"]


def test_ignored_cancel_request_is_a_fail_not_a_pass() -> None:
    code, doc = check(agent=[*QUIRKY, "--ignore-cancel-request", "--stream", "20", "50"])
    found = rule(doc, CANCEL_REQUEST_RULE)
    assert found["result"] == "fail", found
    assert found["evidence"].startswith("ignored: the turn ran on to its natural end (stopReason 'end_turn'")
    assert found["level"] == "MAY"
    assert code == 0  # a MAY rule: only --strict counts it


def test_id_less_replies_to_notifications_fail() -> None:
    code, doc = check(agent=[*QUIRKY, "--idless-replies"])
    found = rule(doc, NOTIFICATION_RULE)
    assert found["result"] == "fail", found
    assert "4 reply(ies) to 5 notifications (4 without an id)" in found["evidence"]
    assert code == 5
    # $/cancel_request answered "Method not found" without an id: a verdict, said in its evidence.
    found = rule(doc, CANCEL_REQUEST_RULE)
    assert found["result"] == "fail", found
    assert "it answered $/cancel_request with" in found["evidence"]
    assert "it does not implement it" in found["evidence"]


def test_id_less_parse_error_counts_as_a_reply() -> None:
    _, doc = check(agent=[*QUIRKY, "--idless-parse-error"])
    assert rule(doc, MALFORMED_RULE)["evidence"] == "answered -32700 (without an id) and kept working"


def test_permission_cancel_answered_end_turn_fails_a_must() -> None:
    code, doc = check("--permission-prompt", "permission", agent=[*QUIRKY, "--permission-end-turn"])
    found = rule(doc, PERMISSION_RULE)
    assert found["level"] == "MUST"
    assert found["result"] == "fail", found
    assert "answered stopReason 'end_turn'" in found["evidence"]
    assert code == 5
    assert doc["verdict"] == "failed"


def test_an_agent_too_fast_to_cancel_is_inconclusive_not_green() -> None:
    result = run("check", "--timeout", "1.5", "--busy-prompt", "hello", timeout=120)
    assert result.returncode == 6, result.stdout + result.stderr
    assert "every MUST rule passed" not in result.stdout
    assert "inconclusive:" in result.stdout
    assert "MUST rule(s) skipped, nothing failed" in result.stdout
    assert "--busy-prompt" in result.stdout.splitlines()[-1] or "--busy-prompt" in result.stdout[-300:]
    code, doc = check("--busy-prompt", "hello")
    assert code == 6
    assert doc["verdict"] == "inconclusive"
    assert doc["passed"] is False
    assert rule(doc, CANCEL_RULE)["result"] == "skip"


def test_a_turn_ending_as_the_cancel_goes_out_is_a_race_not_a_fail() -> None:
    # end_turn just as the cancel arrives; an uncancelled turn of the same prompt ends as soon.
    code, doc = check(agent=[*QUIRKY, "--race"])
    cancel = rule(doc, CANCEL_RULE)
    assert cancel["result"] == "skip", cancel
    assert "and an uncancelled turn ends in" in cancel["evidence"]
    assert "a race, not a verdict" in cancel["evidence"]
    assert code == 6


@pytest.mark.parametrize(
    ("agent", "reason"),
    [
        (["false"], "initialize: the agent closed its output (exit status 1"),
        (["/nonexistent/agent-binary", "--acp"], "cannot start '/nonexistent/agent-binary'"),
    ],
)
def test_an_agent_that_cannot_start_is_reported_once_exit_1(agent: list[str], reason: str) -> None:
    result = run("check", "--", *agent, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "could not start or initialize" in lines[0]
    assert reason in lines[0]
    code, doc = check(agent=agent)
    assert code == 1
    assert doc["verdict"] == "error"
    assert "results" not in doc


@pytest.mark.parametrize(
    "args",
    [
        ["--timeout", "nan"],
        ["--timeout", "-1"],
        ["--timeout", "0"],
        ["--start-timeout", "0"],
        ["--start-timeout", "nan"],
        ["--busy-after", "inf"],
        ["--cwd", "/nonexistent/dir"],
    ],
)
def test_check_usage_errors_exit_2(args: list[str]) -> None:
    result = run("check", *args, "--", "false", timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "error:" in result.stderr


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_auth_and_mode_set_up_each_probe_in_a_throwaway_dir(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    agent = [*QUIRKY, "--auth", "login", "--ask-mode", "ask", "--log", str(log)]
    code, doc = check(agent=agent)
    assert code == 1
    assert "Authentication required" in doc["error"]

    code, doc = check("--auth", "login", "--permission-prompt", "permission", agent=agent)
    # The default mode never asks: the permission rules do not apply (said so), and the agent passes.
    found = rule(doc, PERMISSION_RULE)
    assert found["result"] == "n/a", found
    assert found["evidence"].startswith("not applicable: the agent never asked for permission")
    assert (
        "pass a --permission-prompt that makes it ask (or a --mode that asks, or --terminal)"
        in found["evidence"]
    )
    assert code == 0, doc
    assert "hint" not in doc

    log.unlink()
    code, doc = check(
        "--jobs",  # one check at a time: the log is one file for every agent
        "1",
        *("--auth", "login", "--mode", "ask", "--permission-prompt", "permission"),
        agent=agent,
        cwd=tmp_path,
    )
    assert rule(doc, PERMISSION_RULE)["result"] == "pass", doc
    assert code == 0, doc
    methods = [m.get("method") for m in logged(log) if m.get("method") is not None]
    assert methods.count("initialize") == 9  # one fresh agent per check
    assert methods.count("authenticate") == 9
    assert methods.count("session/set_mode") >= 8  # not for a rule that does not apply (no loadSession)
    for i, method in enumerate(methods):
        if method == "authenticate":
            assert methods[i - 1] == "initialize"
        if method == "session/prompt":
            previous = [m for m in methods[:i] if m in ("session/new", "session/set_mode")]
            assert previous[-1] == "session/set_mode"
    # Sessions ran in a throw-away directory: not where check was run, and gone afterwards.
    cwds = {m["params"]["cwd"] for m in logged(log) if m.get("method") == "session/new"}
    assert len(cwds) == 1
    (session_cwd,) = cwds
    assert session_cwd != str(tmp_path)
    assert not os.path.exists(session_cwd)
    # The agent process started there too (agents that run tools in their own cwd stay out).
    assert {m["processCwd"] for m in logged(log) if "processCwd" in m} == {session_cwd}


def test_cwd_option_is_the_sessions_directory(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    check("--cwd", str(work), agent=[*QUIRKY, "--log", str(log)])
    cwds = {m["params"]["cwd"] for m in logged(log) if m.get("method") == "session/new"}
    assert cwds == {str(work)}


def test_ctrl_c_prints_no_traceback_and_reaps_every_probe(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "acp_driver", "check", "--timeout", "30", "--", *QUIRKY),
            *("--pidfile", str(pids), "--ignore-cancel-request", "--stream", "10000", "50"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        # The second probe ($/cancel_request, ignored) runs for up to 30 s: interrupt it there.
        while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
            time.sleep(0.05)
        assert pids.exists()
        assert len(pids.read_text().split()) >= 2
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    assert "interrupted" in err
    # The rules decided so far are reported (the ones of the checks that ended before the signal).
    assert re.search(r"^interrupted: \d+ of 12 rules decided, \d+ not", out, re.MULTILINE), out
    for pid in pids.read_text().split():
        assert group_gone(int(pid))


def test_reference_agent_behaviours_still_judged(tmp_path: Path) -> None:
    # The permission rule is a MUST: an agent that answers end_turn on any cancel fails it too.
    _, doc = check(agent=[*AGENT.split(), "--behavior", "end-turn-on-cancel"])
    assert rule(doc, PERMISSION_RULE)["result"] == "fail"


def test_relative_paths_in_the_agent_command_still_work() -> None:
    # The agent starts in a throw-away directory; "python quirky_agent.py" typed in the agent's
    # own directory must still find its script there.
    here = Path(__file__).parent
    code, doc = check(agent=[sys.executable, "quirky_agent.py"], cwd=here)
    assert doc["verdict"] != "error", doc
    assert code in (0, 6)
