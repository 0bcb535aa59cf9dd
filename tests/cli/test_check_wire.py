"""``check`` says what the wire says: an update in flight when the cancel went out is not activity
after it; latencies are taken off the wire; a next turn that times out is judged against a
control turn; an agent answering a cancel "unknown method" has given a verdict; agents that ask
only when terminals are offered can be audited. Real processes: the CLI and ``quirky_agent.py``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ..procs import pid_alive
from .test_check import CANCEL_REQUEST_RULE, CANCEL_RULE, PERMISSION_RULE, QUIRKY, check, rule
from .test_cli import CLI

IDLE_RULE = "cancel on an idle session does not poison the next turn"
AFTER_RULE = "no turn update after the prompt response"
HOLD_MS = 1500
"""How long the audit holds a permission request after the cancel, at most: 3 s, or --timeout
(1.5 s in these tests) if shorter."""
WITHDRAW_RULE = "agent withdraws its pending permission request on cancel ($/cancel_request)"


def test_an_update_in_flight_when_the_cancel_went_out_is_not_activity_after_it() -> None:
    """The turn's last chunk arrives right after the cancel, with its end_turn: a race (the
    control turn ends as soon), not a failure of a polite agent."""
    code, doc = check(agent=[*QUIRKY, "--in-flight"])
    cancel = rule(doc, CANCEL_RULE)
    assert cancel["result"] == "skip", cancel
    assert "a race, not a verdict" in cancel["evidence"]
    assert "update(s) in flight arrived after it" in cancel["evidence"]
    assert code == 6


def test_updates_long_after_the_cancel_are_activity_after_it() -> None:
    """An agent that ignores $/cancel_request streams on for a second: not a race."""
    code, doc = check(agent=[*QUIRKY, "--ignore-cancel-request", "--stream", "20", "50"])
    found = rule(doc, CANCEL_REQUEST_RULE)
    assert found["result"] == "fail", found
    assert found["evidence"].startswith("ignored: the turn ran on to its natural end (stopReason 'end_turn'")
    assert code == 0  # a MAY rule: only --strict counts it


@pytest.mark.parametrize("code", ["-32601", "-32603"])
def test_an_agent_answering_the_cancel_unknown_method_is_a_verdict(code: str) -> None:
    """The turn ends end_turn just after the cancel (as a race would), but the agent said on the
    wire that it does not know session/cancel: FAIL, not a race."""
    exit_code, doc = check(agent=[*QUIRKY, "--race", "--refuse-cancel", code])
    cancel = rule(doc, CANCEL_RULE)
    assert cancel["result"] == "fail", cancel
    assert f'it answered session/cancel with {{"jsonrpc":"2.0","error":{{"code":{code}' in cancel["evidence"]
    assert "it does not implement it" in cancel["evidence"]
    assert "a race" not in cancel["evidence"]
    assert exit_code == 5


def test_an_update_right_behind_the_answer_is_after_it() -> None:
    """The agent writes its answer and one more chunk in one write: they arrive together, and the
    order on the wire says the chunk came after the response."""
    code, doc = check(agent=[*QUIRKY, "--late-update"])
    assert rule(doc, CANCEL_RULE)["result"] == "pass"
    after = rule(doc, AFTER_RULE)
    assert after["result"] == "fail", after
    assert after["evidence"] == (
        "cancel not confirmed: the work went on after stopReason 'cancelled': "
        "1 update(s) after the response: agent_message_chunk"
    )
    assert code == 5


def elapsed_of(evidence: str, label: str) -> float:
    found = re.search(rf"{label} ([0-9.]+) ms", evidence)
    assert found, evidence
    return float(found.group(1))


def test_permission_latency_is_taken_off_the_wire() -> None:
    """The agent answers the prompt cancelled as soon as the cancel arrives, leaving its
    permission request pending; the audit holds that request a while (to see whether the agent
    withdraws it). The latency is the agent's answer, not the audit's hold."""
    code, doc = check("--permission-prompt", "permission", agent=[*QUIRKY, "--answer-at-cancel"])
    found = rule(doc, PERMISSION_RULE)
    assert found["result"] == "pass", found
    assert "(permission still pending when the prompt was answered" in found["evidence"]
    answered = elapsed_of(found["evidence"], "stopReason 'cancelled'")
    released = elapsed_of(found["evidence"], "the audit then answered it cancelled")
    assert answered <= released  # the answer came first: measured when it came
    assert found["elapsedMs"] == pytest.approx(answered, abs=0.1)
    assert released < HOLD_MS  # the audit stopped holding once the turn was over
    assert rule(doc, WITHDRAW_RULE)["result"] == "fail"
    assert code == 0


def test_an_agent_that_waits_for_the_permission_answer_is_timed_from_that_answer() -> None:
    """The agent ends its turn cancelled only once its permission request is answered, which the
    audit does after holding it (waiting for a withdrawal): the hold is the audit's, not the agent's."""
    code, doc = check("--permission-prompt", "permission", agent=QUIRKY)
    found = rule(doc, PERMISSION_RULE)
    assert found["result"] == "pass", found
    assert "after the audit answered the permission request cancelled" in found["evidence"]
    held = elapsed_of(found["evidence"], "the audit held it")
    assert held >= HOLD_MS  # no withdrawal: it held the request as long as it holds
    assert found["elapsedMs"] < held  # the agent's own latency, from the answer it waited for
    assert code == 0


def test_a_fresh_agent_that_cannot_start_leaves_its_rules_untested(tmp_path: Path) -> None:
    """From the fourth check on, the agent exits at once: those rules were not tested (SKIP,
    inconclusive), not failed -- a slow start on a busy machine is not a broken rule."""
    pids = tmp_path / "pids"
    code, doc = check(agent=[*QUIRKY, "--pidfile", str(pids), "--fail-after", "3"])
    idle = rule(doc, IDLE_RULE)
    assert idle["result"] == "skip", idle
    assert idle["evidence"].startswith("not tested: could not set up a fresh agent: initialize:")
    assert "a longer --start-timeout" in doc["hint"]
    assert code == 6


SLOW_START_MS = 2000
"""How late each fresh agent answers its slow start step: longer than the tests' --timeout (1.5 s),
far shorter than --start-timeout's default (30 s)."""


@pytest.mark.parametrize("method", ["initialize", "session/new"])
def test_a_fresh_agent_slower_to_start_than_timeout_is_still_audited(method: str, tmp_path: Path) -> None:
    """Every check's fresh agent answers its first requests late (a runtime warming up, a busy
    machine): the start has its own bound, --start-timeout, so every rule is still tested."""
    pids = tmp_path / "pids"
    agent = [*QUIRKY, "--pidfile", str(pids), "--slow-answer", method, str(SLOW_START_MS)]
    code, doc = check(agent=agent)
    untested = [r for r in doc.get("results", []) if r["evidence"].startswith("not tested")]
    assert not untested, untested
    assert doc["verdict"] == "passed", doc
    assert code == 0
    assert len(pids.read_text().split()) == 9  # one slow agent per check


def test_a_start_slower_than_start_timeout_is_reported_at_once() -> None:
    """--start-timeout bounds the start: an agent that does not answer initialize within it
    cannot be audited (exit 1), however long --timeout is."""
    agent = [*QUIRKY, "--slow-answer", "initialize", "600000"]
    code, doc = check("--timeout", "300", "--start-timeout", "1", agent=agent)
    assert doc["verdict"] == "error", doc
    assert "could not start or initialize: initialize:" in doc["error"]
    assert code == 1


def test_a_next_turn_that_never_ends_is_inconclusive_when_no_turn_ends() -> None:
    """No prompt is ever answered (a model that cannot be reached): the control turn on a fresh
    session does not end either, so the idle cancel is not blamed."""
    code, doc = check("--busy-prompt", "hello", agent=[*QUIRKY, "--stall"])
    idle = rule(doc, IDLE_RULE)
    assert idle["result"] == "skip", idle
    assert "and so did a control turn on a fresh session" in idle["evidence"]
    assert "--quick-prompt" in doc["hint"]
    assert code == 6


def test_a_control_turns_fresh_session_waits_timeout_not_start_timeout() -> None:
    """The control turn's session is asked of an agent already up: it waits --timeout (1.5 s),
    not --start-timeout, though this agent's every session/new takes 3 s (a start does wait)."""
    agent = [*QUIRKY, "--poison-idle-cancel", "--slow-answer", "session/new", "3000"]
    code, doc = check(agent=agent)
    idle = rule(doc, IDLE_RULE)
    assert idle["result"] == "skip", idle
    assert (
        "no fresh session for the control turn: session/new: session/new timed out after 1.5s"
        in idle["evidence"]
    )
    assert rule(doc, CANCEL_RULE)["result"] == "pass"  # every start waited for its slow session
    assert code == 6


def test_a_next_turn_poisoned_by_an_idle_cancel_fails_against_the_control_turn() -> None:
    code, doc = check(agent=[*QUIRKY, "--poison-idle-cancel"])
    idle = rule(doc, IDLE_RULE)
    assert idle["result"] == "fail", idle
    assert (
        "the next turn got no answer within 1.5 s, while a control turn on a fresh session"
        in idle["evidence"]
    )
    assert "the idle cancel poisoned the session" in idle["evidence"]
    assert code == 5


def test_terminal_offers_real_terminals_for_agents_that_ask_only_then(tmp_path: Path) -> None:
    """Like fast-agent: permission is asked only when the client offers terminals. Without
    --terminal the agent never asks (the rule does not apply, and says how to make it); with it,
    the rule is tested."""
    pidfile = tmp_path / "terminal.pid"
    agent = [*QUIRKY, "--ask-with-terminal", str(pidfile)]
    code, doc = check("--permission-prompt", "permission", agent=agent)
    assert rule(doc, PERMISSION_RULE)["result"] == "n/a"
    assert "or --terminal" in rule(doc, PERMISSION_RULE)["evidence"]
    assert code == 0
    assert not pidfile.exists()  # no terminal offered: none started
    code, doc = check("--terminal", "--permission-prompt", "permission", agent=agent)
    assert rule(doc, PERMISSION_RULE)["result"] == "pass", doc
    assert code == 0, doc
    assert not pid_alive(int(pidfile.read_text()))


def test_a_terminal_is_killed_with_its_probe(tmp_path: Path) -> None:
    """The terminal the agent started in the permission probe is gone before the next probe's
    agent starts, not only when the audit ends."""
    pidfile = tmp_path / "terminal.pid"
    probes = tmp_path / "probes"
    agent = [*QUIRKY, "--ask-with-terminal", str(pidfile), "--pidfile", str(probes)]
    proc = subprocess.Popen(
        [
            *CLI,
            "check",
            "--json",
            "--timeout",
            "1.5",
            "--jobs",  # one check after another: the probes' order is what is watched
            "1",
            "--terminal",
            "--permission-prompt",
            "permission",
            "--",
            *agent,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    terminal = None
    try:
        deadline = time.monotonic() + 120
        # One check at a time: once the permission probe's agent started its terminal, the next
        # probe's agent starts only after that probe was closed.
        while not pidfile.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no terminal was started"
            time.sleep(0.01)
        started = len(probes.read_text().split())
        while len(probes.read_text().split()) <= started:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no probe started after the permission probe"
            time.sleep(0.01)
        terminal = int(pidfile.read_text())
        alive = pid_alive(terminal)
        assert not alive, "the terminal outlived its probe"
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if terminal is not None and pid_alive(terminal):  # leave nothing running, even on a failure
            os.kill(terminal, signal.SIGKILL)
