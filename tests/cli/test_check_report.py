"""``acp-driver check`` as a user meets it: rule ids, the verdict line, a fix per failure, progress
on stderr, ``--junit``, rules decided at once by a finding, n/a rules of an agent that never asks
permission, and the rules from user reports (each failed by a test agent). Real processes, real
pipes."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from acp_driver.cli._check_catalog import BY_ID, catalog
from acp_driver.cli._check_report import hint
from acp_driver.cli._check_rules import MUST, PASS, SKIP, CheckResult

from .test_check import QUIRKY, check, rule
from .test_cli import AGENT, run

DOCS = Path(__file__).parents[2] / "docs" / "cli.md"
RESUMED_CANCEL_RULE = (
    "session/cancel after session/load or session/resume of the live session ends the prompt cancelled"
)
SECOND_STOP_RULE = "a cancelled turn's late stop reason never answers the next prompt"
AFTER_RULE = "no turn update after the prompt response"


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in doc["results"]}


@pytest.mark.parametrize(
    ("flag", "rule_name", "evidence"),
    [
        (
            "--resume-loses-turn",
            RESUMED_CANCEL_RULE,
            "after session/cancel, sent after session/load of the live session (answered): the cancel did not "
            "reach the running prompt",
        ),
        (
            "--late-stop-reason",
            SECOND_STOP_RULE,
            "and 1 update(s) of its turn came after that answer (agent_message_chunk): the cancelled turn's "
            "late stop reason answered it",
        ),
        (
            "--work-after-cancel",
            AFTER_RULE,
            "cancel not confirmed: the work went on after stopReason 'cancelled': 2 update(s) after the "
            "response: tool_call, tool_call_update; 1 request(s) after it: fs/write_text_file",
        ),
    ],
)
def test_each_reported_misbehaviour_fails_its_v1_rule(flag: str, rule_name: str, evidence: str) -> None:
    code, doc = check("--protocol", "1", agent=[*QUIRKY, flag])
    found = rule(doc, rule_name)
    assert found["result"] == "fail", found
    assert evidence in found["evidence"], found
    assert found["fix"] == BY_ID[found["id"]].fix
    assert rule(doc, "session/cancel answered stopReason cancelled")["result"] == "pass"
    assert code == 5
    assert doc["summary"] == f"1 MUST failed: {found['id']}" + (
        "" if flag == "--resume-loses-turn" else "; 1 not applicable: cancel-after-resume"
    )


def test_the_polite_agents_pass_the_reported_rules() -> None:
    _code, doc = check("--protocol", "1", agent=[*QUIRKY, "--resume-loses-turn"])  # advertises loadSession
    assert by_id(doc)["no-second-stop-reason"]["result"] == "pass"
    code, doc = check("--protocol", "1", agent=AGENT.split())  # resume in v1: sessionCapabilities.resume
    found = by_id(doc)
    assert found["cancel-after-resume"]["result"] == "pass", found["cancel-after-resume"]
    assert "session/resume of the live session answered first" in found["cancel-after-resume"]["evidence"]
    assert found["no-second-stop-reason"]["result"] == "pass"
    assert found["no-work-after-cancel"]["result"] == "pass"
    assert code == 0


def test_a_wedged_agent_decides_the_dependent_rules_at_once() -> None:
    """``hang`` never works on a prompt: once the cancel rule showed it, the rules that need a
    turn to make progress are skipped at once, naming it (their agents are never started)."""
    code, doc = check("--timeout", "1", "--protocol", "2", agent=[*AGENT.split(), "--behavior", "hang"])
    found = by_id(doc)
    cancel = found["cancel-stop-reason"]
    assert cancel["result"] == "fail"
    assert "the work never ended" in cancel["evidence"]
    dependent = [
        "prompt-held",
        "idle-cancel-harmless",
        "permission-cancel",
        "close-cancels-work",
        "resume-snapshot",
        "cancel-after-resume",
        "no-second-stop-reason",
    ]
    for name in dependent:
        assert found[name]["result"] == "skip", found[name]
        assert found[name]["evidence"].startswith(
            "decided at once: depends on cancel-stop-reason, which showed that the agent never works on a prompt"
        ), found[name]
        assert found[name]["elapsedMs"] == 0.0  # no agent was started for it
    # The rules that need no turn are still judged.
    assert found["no-reply-to-notification"]["result"] == "pass"
    assert found["malformed-line-survived"]["result"] == "pass"
    assert code == 5


def test_rule_ids_are_stable_documented_and_in_json() -> None:
    _code, doc = check("--protocol", "1", agent=QUIRKY)
    assert [r["id"] for r in doc["results"]] == [
        "cancel-stop-reason",
        "no-work-after-cancel",
        "cancel-request-prompt",
        "no-reply-to-notification",
        "unknown-method-32601",
        "idle-cancel-harmless",
        "permission-cancel",
        "permission-withdrawn",
        "cancel-after-resume",
        "no-second-stop-reason",
        "malformed-line-survived",
        "exit-on-stdin-eof",
    ]
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOCS.read_text(), re.MULTILINE))
    assert documented == {rule.id for rule, _proses in catalog()}


def test_progress_on_stderr_and_a_verdict_line_naming_the_rules() -> None:
    result = run(
        "check", "--timeout", "1.5", "--protocol", "1", "--", *QUIRKY, "--work-after-cancel", timeout=120
    )
    assert result.returncode == 5, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert "check 1/9: session/cancel mid-turn\u2026 (waiting up to 1.5 s)" in lines
    decided = [line for line in lines if line.startswith("rule ")]
    assert len(decided) == 12  # one line per rule, off a terminal
    assert "rule 12/12: " in decided[-1]
    assert any(line.endswith(": no-work-after-cancel FAIL (MUST)") for line in decided)
    out = result.stdout.splitlines()
    assert out[-1] == "1 MUST failed: no-work-after-cancel; 1 not applicable: cancel-after-resume"
    assert f"fix no-work-after-cancel (MUST): {BY_ID['no-work-after-cancel'].fix}" in out
    quiet = run("check", "-q", "--timeout", "1.5", "--protocol", "1", "--", *QUIRKY, timeout=120)
    assert quiet.stderr == ""


def test_an_agent_that_never_asks_permission_can_pass() -> None:
    """No permission flow: the permission rules do not apply, said so; exit 0 on the rest."""
    result = run(
        "check", "--timeout", "1.5", "--protocol", "1", "--permission-prompt", "hello", "--", *QUIRKY
    )
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("every MUST rule passed (")
    assert "2 not applicable: permission-cancel, cancel-after-resume" in last  # the MUST rules only


def test_the_hint_asks_only_for_what_the_skips_lack() -> None:
    passed = CheckResult("session/cancel answered stopReason cancelled", MUST, PASS, "answered")
    no_permission = CheckResult(
        "cancel while a permission request is pending ends the prompt cancelled",
        MUST,
        SKIP,
        "no permission request within 10 s (pass a --permission-prompt that makes it ask, or a --mode that asks)",
    )
    said = hint([no_permission])
    assert "--busy-prompt" not in said
    assert "--permission-prompt" in said
    assert passed.result == PASS
    busy = CheckResult(
        "x",
        MUST,
        SKIP,
        "the turn ended (…) before the cancel could be sent; pass a --busy-prompt that keeps the agent busy longer",
    )
    assert "--busy-prompt" in hint([busy])


def test_junit_has_one_test_case_per_rule(tmp_path: Path) -> None:
    out = tmp_path / "check.xml"
    code, doc = check("--protocol", "1", "--junit", str(out), agent=[*QUIRKY, "--late-stop-reason"])
    assert code == 5
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    (suite,) = list(root.iter("testsuite"))
    assert suite.get("name") == "acp-driver check v1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r["id"] for r in doc["results"]]
    for case in cases:
        assert case.get("classname", "").startswith("acp-driver check.")
        assert float(case.get("time", "x")) >= 0
        outcomes = [child.tag for child in case if child.tag in ("failure", "skipped", "error")]
        assert len(outcomes) <= 1
    failures = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    for element in (root, suite):
        assert element.get("tests") == str(len(cases))
        assert element.get("failures") == str(len(failures))
        assert element.get("skipped") == str(len(skipped))
        assert element.get("errors") == "0"
    assert [c.get("name") for c in failures] == ["no-second-stop-reason"]
    failure = failures[0].find("failure")
    assert failure is not None
    assert failure.get("type") == "MUST"
    assert "fix: " in (failure.text or "")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["verdict"] == "failed"
    assert json.loads(json.dumps(doc))["verdict"] == "failed"


def test_junit_text_is_xml_whatever_the_agent_says(tmp_path: Path) -> None:
    from acp_driver.cli._check_report import judge, junit_document

    hostile = CheckResult("no reply to any notification", MUST, "fail", "e.g. \x1b[31m\x00</failure>\ud800")
    document = junit_document([hostile], judge([hostile], False), "agent", 1)
    root = ET.fromstring(document)
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert "</failure>" in (failure.text or "")
    assert "\x1b" not in (failure.text or "")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_usage_error_for_jobs() -> None:
    result = run("check", "--jobs", "0", "--", "false", timeout=60)
    assert result.returncode == 2
    assert "--jobs must be at least 1" in result.stderr


def test_progress_is_one_line_redrawn_in_place_on_a_terminal() -> None:
    from .test_tty import base_env, run_on_pty

    code, screen = run_on_pty(
        ["check", "--timeout", "1.5", "--protocol", "1", "--", *QUIRKY], {}, base_env(), timeout=120
    )
    assert code == 0, screen.decode(errors="replace")
    assert b"\r\x1b[Kcheck: 0/12 rules decided; session/cancel mid-turn" in screen
    assert b"\r\x1b[Kcheck: 12/12 rules decided" in screen
    assert b"rule 1/12" not in screen  # no line per rule on a terminal
    last = screen.decode(errors="replace").rstrip().splitlines()[-1]
    assert last.startswith("every MUST rule passed"), last
