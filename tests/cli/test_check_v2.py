"""``acp-driver check`` on ACP v2 agents: the version is negotiated (``--protocol``) and said, and
each v2 rule catches the misbehaviour it is about, with the wire's evidence. Real processes over
real pipes: the CLI, the reference agent (``--behavior``) and ``quirky_v2_agent.py``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ..remote.serving import ServeProcess
from .test_check import QUIRKY
from .test_cli import AGENT, run

QUIRKY_V2 = [sys.executable, str(Path(__file__).with_name("quirky_v2_agent.py"))]
REFERENCE = AGENT.split()

INSERT_RULE = "session/prompt answered at insertion with a messageId"
USER_MESSAGE_RULE = "a user_message with the prompt's messageId"
RUNNING_RULE = "running reported when the work starts"
CANCEL_RULE = "session/cancel ends the work with idle stopReason cancelled"
AFTER_RULE = "no update of the cancelled work after its idle"
HELD_RULE = "a prompt sent while work runs is held (not answered) until the work ends"
HELD_ORDER_RULE = "held prompts are inserted in the order sent"
WITHDRAW_HELD_RULE = "$/cancel_request on a held prompt answered -32800, the running work untouched"
CANCEL_HELD_RULE = "session/cancel answers every held prompt -32800"
LATER_PROMPT_RULE = "session/cancel never touches a prompt sent after it"
NOTIFICATION_RULE = "no reply to any notification"
UNKNOWN_METHOD_RULE = "an unknown method is answered -32601"
IDLE_RULE = "cancel on an idle session does not poison the next turn"
PERMISSION_RULE = (
    "cancel while a permission request is pending: idle cancelled, without waiting, the operation not run"
)
WITHDRAW_RULE = "agent withdraws its pending permission request on cancel ($/cancel_request)"
REQUIRES_ACTION_RULE = "requires_action reported while a permission request waits"
CLOSE_RULE = "session/close during work: idle cancelled before its answer"
CLOSE_AFTER_RULE = "nothing of the session after the session/close answer"
CLOSE_UNKNOWN_RULE = "session/close of an unknown session succeeds ({} or -32002)"
RESUME_RULE = "session/resume sends a state snapshot after its replay, before its answer"
RESUME_RUNNING_RULE = "a resume snapshot while work runs says so (a snapshot is never a completion)"
RESUMED_CANCEL_RULE = (
    "session/cancel after session/resume of the live session ends its work with idle cancelled"
)
SECOND_STOP_RULE = "one idle per span: a cancelled work's late stop reason never ends the next prompt"
MALFORMED_RULE = "a malformed line does not kill the agent"
EOF_RULE = "exits after stdin EOF"
V2_RULES = [
    INSERT_RULE,
    USER_MESSAGE_RULE,
    RUNNING_RULE,
    CANCEL_RULE,
    AFTER_RULE,
    HELD_RULE,
    HELD_ORDER_RULE,
    WITHDRAW_HELD_RULE,
    CANCEL_HELD_RULE,
    LATER_PROMPT_RULE,
    NOTIFICATION_RULE,
    UNKNOWN_METHOD_RULE,
    IDLE_RULE,
    PERMISSION_RULE,
    WITHDRAW_RULE,
    REQUIRES_ACTION_RULE,
    CLOSE_RULE,
    CLOSE_AFTER_RULE,
    CLOSE_UNKNOWN_RULE,
    RESUME_RULE,
    RESUME_RUNNING_RULE,
    RESUMED_CANCEL_RULE,
    SECOND_STOP_RULE,
    MALFORMED_RULE,
    EOF_RULE,
]


def check(*args: str, agent: list[str] | None = None, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    command = ["--", *agent] if agent is not None else []
    result = run("check", "--json", "--timeout", "1.5", *args, *command, timeout=180, **kwargs)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def by_rule(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rule"]: r for r in doc["results"]}


def test_auto_audits_the_reference_agent_by_the_v2_rules_and_says_so() -> None:
    code, doc = check("--strict", "--protocol", "auto", agent=REFERENCE)
    assert doc["protocolVersion"] == 2
    assert [r["rule"] for r in doc["results"]] == V2_RULES
    assert [(r["id"], r["result"], r["evidence"]) for r in doc["results"] if r["result"] != "pass"] == []
    assert code == 0
    assert doc["verdict"] == "passed"
    found = by_rule(doc)
    assert "idle stopReason 'cancelled'" in found[CANCEL_RULE]["evidence"]
    assert found[CANCEL_RULE]["evidence"].split(" ms after session/cancel")[0].split()[-1]  # a latency
    assert "answered -32800" in found[WITHDRAW_HELD_RULE]["evidence"]
    assert "2 held prompt(s) answered -32800" in found[CANCEL_HELD_RULE]["evidence"]
    assert "were held until its idle" in found[HELD_RULE]["evidence"]
    assert "inserted in the order sent" in found[HELD_ORDER_RULE]["evidence"]


def test_the_quirky_v2_agent_is_polite_by_default() -> None:
    """The flags below each break one rule: without them every rule passes."""
    code, doc = check("--strict", "--protocol", "2", agent=QUIRKY_V2)
    assert {r["result"] for r in doc["results"]} == {"pass"}, doc
    assert "2 replayed update(s), then state_update 'idle'" in by_rule(doc)[RESUME_RULE]["evidence"]
    assert code == 0


def test_the_table_names_the_version_audited() -> None:
    result = run("check", "--timeout", "1.5", "--protocol", "2", env={"COLUMNS": "200"}, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(ACP v2 rules)" in result.stdout
    assert INSERT_RULE in result.stdout


def test_acp_driver_protocol_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_DRIVER_PROTOCOL", "2")
    _code, doc = check(agent=REFERENCE)
    assert doc["protocolVersion"] == 2
    monkeypatch.setenv("ACP_DRIVER_PROTOCOL", "1")
    _code, doc = check(agent=REFERENCE)
    assert doc["protocolVersion"] == 1
    assert "session/cancel answered stopReason cancelled" in by_rule(doc)


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param(QUIRKY, id="answers-1"),
        pytest.param([*QUIRKY, "--refuse-v2"], id="refuses-2-with-32022"),
        pytest.param([*QUIRKY, "--echo-version"], id="echoes-2-in-v1s-shape"),
    ],
)
def test_auto_audits_a_v1_agent_by_the_v1_rules(agent: list[str]) -> None:
    """A v1 agent answers 1 to a request for 2 (it reads v1's field names), refuses 2 with
    -32022 naming 1, or echoes 2 in v1's shape: audited with the v1 rules, on every fresh agent."""
    code, doc = check("--protocol", "auto", agent=agent)
    assert doc["protocolVersion"] == 1, doc
    found = by_rule(doc)
    assert found["session/cancel answered stopReason cancelled"]["result"] == "pass"
    assert INSERT_RULE not in found
    assert found[UNKNOWN_METHOD_RULE]["result"] == "pass"  # the JSON-RPC rule holds in v1 too
    assert code == 0, doc


@pytest.mark.parametrize(
    ("protocol", "agent", "said"),
    [
        ("2", QUIRKY, "agent speaks ACP protocol version 1; acp-driver asked for 2 (--protocol)"),
        ("1", QUIRKY_V2, "initialize: Unsupported protocol version"),
    ],
)
def test_insisting_on_a_version_the_agent_does_not_speak_is_an_error(
    protocol: str, agent: list[str], said: str
) -> None:
    code, doc = check("--protocol", protocol, agent=agent)
    assert code == 1
    assert doc["verdict"] == "error"
    assert said in doc["error"]


def test_v2_setup_uses_v2_methods() -> None:
    """``--auth`` in v2 is ``auth/login``; ``--mode`` is the ``mode`` config option (v2 has no
    session/set_mode): an agent without that option fails the set-up, reported once."""
    agent = [*QUIRKY_V2, "--auth", "login"]
    code, doc = check("--protocol", "2", agent=agent)
    assert code == 1
    assert "session/new: Authentication required" in doc["error"]
    code, doc = check("--protocol", "2", "--auth", "login", agent=agent)
    assert code == 0, doc
    code, doc = check("--protocol", "2", "--mode", "plan", agent=REFERENCE)
    assert code == 1
    assert "session/set_config_option mode='plan'" in doc["error"]
    asking = [*QUIRKY_V2, "--ask-mode", "ask"]
    code, doc = check("--protocol", "2", agent=asking)
    assert by_rule(doc)[PERMISSION_RULE]["result"] == "n/a"  # its default mode never asks
    code, doc = check("--protocol", "2", "--mode", "ask", agent=asking)
    assert by_rule(doc)[PERMISSION_RULE]["result"] == "pass", doc
    assert code == 0


def test_an_answer_after_the_idle_of_work_too_quick_to_cancel_is_not_an_insertion() -> None:
    """The insertion rules hold for work that ends by itself: an answer after its idle fails,
    though the cancel rules are skipped (nothing to cancel)."""
    code, doc = check("--protocol", "2", "--busy-prompt", "hello", agent=[*QUIRKY_V2, "--answer-at-end"])
    found = by_rule(doc)
    assert found[CANCEL_RULE]["result"] == "skip"
    insert = found[INSERT_RULE]
    assert insert["result"] == "fail", insert
    assert "after the work's idle" in insert["evidence"]
    assert "held until the work ended, not answered at insertion" in insert["evidence"]
    assert code == 5


def test_an_idle_that_ends_no_turn_is_not_taken_for_the_end_of_the_work() -> None:
    """Where a turn ends is the host's lifecycle's: an idle sent before the prompt was inserted
    (nothing ran, so it ends nothing) is no end of the prompt's work, and the audit goes on to
    cancel that work and judge it, as a host on this library would see it."""
    code, doc = check("--protocol", "2", agent=[*QUIRKY_V2, "--ready-idle"])
    found = by_rule(doc)
    assert found[CANCEL_RULE]["result"] == "pass", found[CANCEL_RULE]
    assert found[AFTER_RULE]["result"] == "pass", found[AFTER_RULE]
    assert found[INSERT_RULE]["result"] == "pass", found[INSERT_RULE]
    assert code == 0, [
        (r.get("id"), r["result"], r["evidence"]) for r in doc["results"] if r["result"] != "pass"
    ]


def test_work_too_quick_to_cancel_is_inconclusive_with_a_hint() -> None:
    code, doc = check("--protocol", "2", "--busy-prompt", "hello", agent=REFERENCE)
    assert code == 6, [
        (r.get("id"), r["result"], r["evidence"]) for r in doc["results"] if r["result"] == "fail"
    ]
    assert doc["verdict"] == "inconclusive"
    assert by_rule(doc)[CANCEL_RULE]["result"] == "skip"
    assert by_rule(doc)[INSERT_RULE]["result"] == "pass"  # judged on the quick work all the same
    assert "a --busy-prompt that keeps the agent busy longer" in doc["hint"]


MISBEHAVIOURS = [
    pytest.param(
        [*QUIRKY_V2, "--answer-at-end"],
        {INSERT_RULE: ("fail", "held until the work ended, not answered at insertion")},
        id="answer-at-end",
    ),
    pytest.param(
        [*QUIRKY_V2, "--answer-at-end", "--no-user-message"],
        {
            INSERT_RULE: ("fail", "held until the work ended, not answered at insertion"),
            # Never inserted before its idle: a host cannot end the turn there, the cancel does
            # not land (the lifecycle's reading, quoted).
            CANCEL_RULE: (
                "fail",
                "(a host does not end the prompt's turn at it: the prompt was not inserted before it; "
                "a host waits on): the cancel is not confirmed",
            ),
        },
        id="answer-at-end-never-inserted",
    ),
    pytest.param(
        [*QUIRKY_V2, "--answer-at-cancel"],
        {INSERT_RULE: ("fail", "after session/cancel, none in the")},
        id="answer-at-cancel",
    ),
    pytest.param(
        [*QUIRKY_V2, "--no-message-id"],
        {INSERT_RULE: ("fail", "answered {}"), USER_MESSAGE_RULE: ("skip", "no messageId to match")},
        id="no-message-id",
    ),
    pytest.param(
        [
            *QUIRKY_V2,
            *("--no-user-message", "--no-running", "--late-update", "--no-requires-action"),
            *("--close-late", "--snapshot-before-replay", "--unknown-method-code", "-32603"),
        ],
        {
            USER_MESSAGE_RULE: ("fail", "no user message update with messageId"),
            RUNNING_RULE: ("fail", "no running state_update: the work's updates (agent_message_chunk"),
            AFTER_RULE: ("fail", "1 update(s) of the work after its idle: agent_message_chunk"),
            REQUIRES_ACTION_RULE: ("fail", "no requires_action while the permission request waited"),
            CLOSE_AFTER_RULE: (
                "fail",
                "message(s) of the closed session after the answer: session/update session_info_update",
            ),
            RESUME_RULE: ("fail", "the snapshot came before 2 replayed update(s)"),
            UNKNOWN_METHOD_RULE: ("fail", "answered -32603"),
            CANCEL_RULE: ("pass", "idle stopReason 'cancelled'"),
        },
        id="one-break-per-check",
    ),
    pytest.param(
        [*QUIRKY_V2, "--no-hold"],
        # Each prompt runs on its own thread: whichever answers first ends the watch.
        {HELD_RULE: ("fail", "not held while the work ran: prompt ")},
        id="no-hold",
    ),
    pytest.param(
        [*QUIRKY_V2, "--lifo"],
        {HELD_ORDER_RULE: ("fail", "inserted out of order"), CANCEL_HELD_RULE: ("pass", "")},
        id="lifo",
    ),
    pytest.param(
        [*QUIRKY_V2, "--withdraw-ends-work"],
        {WITHDRAW_HELD_RULE: ("fail", "but the running work ended: idle stopReason 'cancelled'")},
        id="withdraw-ends-work",
    ),
    pytest.param(
        [*QUIRKY_V2, "--keep-held-on-cancel"],
        {CANCEL_HELD_RULE: ("fail", "held prompt 2 was inserted after the cancel")},
        id="keep-held-on-cancel",
    ),
    pytest.param(
        [*QUIRKY_V2, "--cancel-later"],
        {LATER_PROMPT_RULE: ("fail", "after it, was answered error -32800")},
        id="cancel-later",
    ),
    pytest.param(
        [*QUIRKY_V2, "--permission-waits"],
        {
            PERMISSION_RULE: ("fail", "it waited for the answer, where the agent MUST stop waiting"),
            WITHDRAW_RULE: ("fail", "not withdrawn"),
        },
        id="permission-waits",
    ),
    pytest.param(
        [
            *QUIRKY_V2,
            "--permission-proceeds",
            "--close-answer-first",
            "--idle-snapshot",
            "--close-unknown-error",
        ],
        {
            PERMISSION_RULE: (
                "fail",
                "the operation went on after the cancel: tool_call_update t1 status 'completed'",
            ),
            WITHDRAW_RULE: ("pass", "$/cancel_request for it"),
            CLOSE_RULE: ("fail", "with no idle before it; idle stopReason 'cancelled' came"),
            RESUME_RUNNING_RULE: ("fail", "the snapshot said 'idle' while the work ran"),
            CLOSE_UNKNOWN_RULE: ("fail", "answered error -32602"),
            # The idle snapshot is no end of the work (the lifecycle's reading): the cancel after
            # the resume is judged, not skipped as "the work ended".
            RESUMED_CANCEL_RULE: ("pass", "idle 'cancelled'"),
        },
        id="proceeds-close-first-idle-snapshot",
    ),
    pytest.param(
        [*QUIRKY_V2, "--resume-loses-work"],
        {
            RESUMED_CANCEL_RULE: (
                "fail",
                "sent after session/resume of the live session (answered): the cancel",
            ),
            CANCEL_RULE: ("pass", "idle stopReason 'cancelled'"),
        },
        id="resume-loses-work",
    ),
    pytest.param(
        [*QUIRKY_V2, "--late-stop-reason"],
        {
            SECOND_STOP_RULE: ("fail", "a second idle stopReason 'end_turn'"),
            CANCEL_RULE: ("pass", "idle stopReason 'cancelled'"),
        },
        id="late-stop-reason",
    ),
    pytest.param(
        [*QUIRKY_V2, "--work-after-cancel"],
        {
            AFTER_RULE: (
                "fail",
                "cancel not confirmed: the work went on after its idle 'cancelled': 1 update(s) of the work "
                "after its idle: tool_call_update; 1 request(s) after it: fs/write_text_file",
            ),
            CANCEL_RULE: ("pass", "idle stopReason 'cancelled'"),
        },
        id="work-after-cancel",
    ),
    pytest.param(
        [*QUIRKY_V2, "--snapshot-after-answer"],
        {RESUME_RULE: ("fail", "no state_update between session/resume and its answer")},
        id="snapshot-after-answer",
    ),
    pytest.param(
        [*QUIRKY_V2, "--race"],
        {CANCEL_RULE: ("skip", "a race, not a verdict")},
        id="race",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "never-idle"],
        {
            CANCEL_RULE: ("fail", "no idle within 1.5 s after session/cancel: the work never ended"),
            AFTER_RULE: ("skip", "no idle ended the work"),
        },
        id="reference-never-idle",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "idle-without-reason"],
        {CANCEL_RULE: ("fail", "an idle without a stopReason")},
        id="reference-idle-without-reason",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "end-turn-on-cancel"],
        {
            CANCEL_RULE: ("fail", "uncancelled work runs on longer"),
            CLOSE_RULE: ("fail", "idle stopReason 'end_turn'"),
        },
        id="reference-end-turn-on-cancel",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "error-on-cancel"],
        {CANCEL_RULE: ("fail", "idle stopReason 'error'")},
        id="reference-error-on-cancel",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "ignore-cancel"],
        {
            CANCEL_RULE: ("fail", "update(s) of it after the cancel"),
            # The work outlives the cancel: the rules that need it to end are decided at once.
            CANCEL_HELD_RULE: ("skip", "decided at once: depends on cancel-stop-reason"),
            LATER_PROMPT_RULE: ("skip", "decided at once: depends on cancel-stop-reason"),
            RESUMED_CANCEL_RULE: ("skip", "decided at once: depends on cancel-stop-reason"),
        },
        id="reference-ignore-cancel",
    ),
    pytest.param(
        [*REFERENCE, "--behavior", "no-answer-on-cancel-request"],
        {
            WITHDRAW_HELD_RULE: ("fail", "the $/cancel_request was ignored, the prompt stayed held"),
            CANCEL_HELD_RULE: ("pass", "answered -32800"),
        },
        id="reference-no-answer-on-cancel-request",
    ),
]


def test_the_order_of_held_prompts_unseen_is_no_pass() -> None:
    # The order is seen only with two prompts held at once, sent while a work waits for the
    # audit's permission answer: a --permission-prompt that asks nothing leaves it unseen, even
    # for an agent that inserts newest first (two prompts sent after a cancel may be read after
    # the cancelled work ended: one held prompt is inserted the same either way).
    # An agent that never asks permission: the order rule does not apply (n/a, said why), and
    # the prompts were still seen held.
    for agent in (QUIRKY_V2, [*QUIRKY_V2, "--lifo"]):
        code, doc = check("--protocol", "2", "--permission-prompt", "hello", agent=agent)
        held, order = by_rule(doc)[HELD_RULE], by_rule(doc)[HELD_ORDER_RULE]
        assert held["result"] == "pass", held
        assert "not answered while the work ran on" in held["evidence"], held
        if "out of order" in order["evidence"]:  # the prompts after the cancel were both held
            assert agent[-1] == "--lifo"
            assert order["result"] == "fail"
            continue
        assert order["result"] == "n/a", order
        assert order["evidence"].startswith(
            "not applicable: the agent never asked for permission: the order is seen only where two "
            "prompts are held at once"
        )
        assert "the --permission-prompt's work ended" in order["evidence"]
        if agent == QUIRKY_V2:
            assert code == 0, doc  # an agent without a permission flow can pass
    # A --permission-prompt whose work runs on without asking in time: unseen, skipped, no pass.
    _code, doc = check("--protocol", "2", "--permission-prompt", "/stream 100 50", agent=QUIRKY_V2)
    order = by_rule(doc)[HELD_ORDER_RULE]
    assert order["result"] == "skip", order
    assert order["evidence"] == (
        "the order of insertion not seen: the --permission-prompt asked no permission within 1.5 s"
    )


@pytest.mark.parametrize(("agent", "expected"), MISBEHAVIOURS)
def test_each_v2_misbehaviour_is_caught_by_its_rule(
    agent: list[str], expected: dict[str, tuple[str, str]]
) -> None:
    code, doc = check("--protocol", "2", agent=agent)
    assert doc["protocolVersion"] == 2
    found = by_rule(doc)
    for rule, (result, evidence) in expected.items():
        assert found[rule]["result"] == result, found[rule]
        assert evidence in found[rule]["evidence"], found[rule]
    must_failed = any(r["result"] == "fail" and r["level"] == "MUST" for r in doc["results"])
    if must_failed:
        assert code == 5
        assert doc["verdict"] == "failed"
    else:
        assert code in (0, 6)


async def _check_async(*args: str) -> tuple[int, dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "check",
        "--json",
        "--timeout",
        "1.5",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(180):
        out, err = await process.communicate()
    assert out, err.decode()
    assert process.returncode is not None
    return process.returncode, json.loads(out)


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_a_v2_agent_behind_serve_is_audited_over_both_profiles(scheme: str) -> None:
    """``acp-driver serve`` relays v2: the audit negotiates 2 over WebSocket or Streamable HTTP and
    judges the v2 rules, the process rule being n/a over a network. Over HTTP, ``serve`` answers
    the unknown session of the ``session/close`` rule with the RFD's 404: our client reads it as
    ``-32002`` (a successful close in v2), not as an internal error."""
    async with ServeProcess.start("-q", "--", *REFERENCE) as server:
        url = server.url.replace("http://", f"{scheme}://", 1)
        code, doc = await _check_async("--protocol", "auto", "--", url)
    assert doc["protocolVersion"] == 2
    found = by_rule(doc)
    assert found[EOF_RULE]["result"] == "n/a"
    assert [
        (r["id"], r["result"], r["evidence"])
        for r in doc["results"]
        if r["rule"] != EOF_RULE and r["result"] != "pass"
    ] == []
    assert code == 0
