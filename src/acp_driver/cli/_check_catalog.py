"""Every rule ``acp-driver check`` audits: its stable id (what ``--json``, ``--junit`` and the
verdict line name, so that CI can key on a rule), the versions it is audited in, and the one line
saying what to change in an agent that fails it.

A rule's prose (``CheckResult.rule``) may be reworded; its id never changes. A rule that is the
same concept in v1 and v2 (the cancel's stop reason, no work after it, a cancel on an idle
session, a permission pending at the cancel) has one id in both, with each version's prose.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._check_live import (
    RESUMED_CANCEL_RULE,
    RESUMED_CANCEL_RULE_V2,
    SECOND_STOP_RULE,
    SECOND_STOP_RULE_V2,
    check_resumed_cancel,
    check_second_stop,
    check_v2_resumed_cancel,
    check_v2_second_stop,
)
from ._check_rules import (
    AFTER_RULE,
    CANCEL_REQUEST_RULE,
    CANCEL_RULE,
    EOF_CHECK,
    EOF_RULE,
    IDLE_RULE,
    INFO,
    MALFORMED_CHECK,
    MALFORMED_RULE,
    MAY,
    MUST,
    NOTIFICATION_RULE,
    NOTIFICATIONS_CHECK,
    PERMISSION_RULE,
    SHOULD,
    UNCANCELLABLE,
    UNKNOWN_METHOD_RULE,
    WEDGED,
    WITHDRAW_RULE,
    Check,
    check_cancel,
    check_cancel_request,
    check_idle_cancel,
    check_permission,
)
from ._check_v2 import (
    INSERT_RULE,
    RUNNING_RULE,
    USER_MESSAGE_RULE,
    V2_AFTER_RULE,
    V2_CANCEL_RULE,
    check_v2_cancel,
    check_v2_idle_cancel,
)
from ._check_v2_held import (
    CANCEL_HELD_RULE,
    HELD_ORDER_RULE,
    HELD_RULE,
    LATER_PROMPT_RULE,
    WITHDRAW_HELD_RULE,
    check_v2_held,
)
from ._check_v2_session import (
    CLOSE_AFTER_RULE,
    CLOSE_RULE,
    CLOSE_UNKNOWN_RULE,
    REQUIRES_ACTION_RULE,
    RESUME_RULE,
    RESUME_RUNNING_RULE,
    V2_PERMISSION_RULE,
    V2_WITHDRAW_RULE,
    check_v2_close,
    check_v2_permission,
    check_v2_resume,
)


@dataclass(frozen=True)
class Rule:
    id: str
    versions: tuple[int, ...]
    fix: str
    """What to change in an agent that fails the rule (one line)."""


_CATALOG: tuple[tuple[tuple[str, ...], Rule], ...] = (
    (
        (CANCEL_RULE, V2_CANCEL_RULE),
        Rule(
            "cancel-stop-reason",
            (1, 2),
            "on session/cancel, stop the turn's work and end it with stopReason 'cancelled' (v1: the "
            "session/prompt answer; v2: the idle state_update), not an error nor end_turn, within --timeout",
        ),
    ),
    (
        (AFTER_RULE, V2_AFTER_RULE),
        Rule(
            "no-work-after-cancel",
            (1, 2),
            "stop the turn's work (its updates, tool calls, requests) before confirming the cancel; "
            "send nothing of the turn after its end (v1: the prompt's answer; v2: its idle)",
        ),
    ),
    (
        (CANCEL_REQUEST_RULE,),
        Rule(
            "cancel-request-prompt",
            (1,),
            "honour $/cancel_request for a session/prompt: end the turn with -32800 or stopReason 'cancelled'",
        ),
    ),
    (
        (NOTIFICATION_RULE,),
        Rule(
            "no-reply-to-notification",
            (1, 2),
            "never answer a notification (a message without an id), not even with an error",
        ),
    ),
    (
        (UNKNOWN_METHOD_RULE,),
        Rule(
            "unknown-method-32601",
            (1, 2),
            "answer a request for a method you do not have with error -32601 (Method not found)",
        ),
    ),
    (
        (IDLE_RULE,),
        Rule(
            "idle-cancel-harmless",
            (1, 2),
            "ignore a session/cancel that arrives while no turn runs: never carry it over to the next prompt",
        ),
    ),
    (
        (PERMISSION_RULE, V2_PERMISSION_RULE),
        Rule(
            "permission-cancel",
            (1, 2),
            "on session/cancel, stop waiting for the pending session/request_permission, treat it as "
            "not approved (never run the operation) and end the turn 'cancelled'",
        ),
    ),
    (
        (WITHDRAW_RULE, V2_WITHDRAW_RULE),
        Rule(
            "permission-withdrawn",
            (1, 2),
            "on session/cancel, withdraw your pending session/request_permission with $/cancel_request",
        ),
    ),
    (
        (MALFORMED_RULE,),
        Rule(
            "malformed-line-survived",
            (1, 2),
            "answer a line that is not JSON with -32700 (or drop it) and keep reading: never exit on it",
        ),
    ),
    (
        (EOF_RULE,),
        Rule("exit-on-stdin-eof", (1, 2), "exit when stdin closes: the client has gone"),
    ),
    (
        (INSERT_RULE,),
        Rule(
            "prompt-answered-at-insertion",
            (2,),
            "answer session/prompt with {messageId} as soon as the prompt is inserted, not when its work ends",
        ),
    ),
    (
        (USER_MESSAGE_RULE,),
        Rule(
            "user-message-id",
            (2,),
            "report the inserted prompt as a user_message (or chunk) with the messageId of its answer",
        ),
    ),
    (
        (RUNNING_RULE,),
        Rule(
            "running-state",
            (2,),
            "send state_update 'running' when a prompt's work starts, before its first update",
        ),
    ),
    (
        (HELD_RULE,),
        Rule(
            "prompt-held",
            (2,),
            "hold a prompt sent while work runs: answer it only when it is inserted, after the work's idle",
        ),
    ),
    (
        (HELD_ORDER_RULE,),
        Rule(
            "held-prompt-order",
            (2,),
            "insert held prompts in the order they were sent (first in, first out)",
        ),
    ),
    (
        (WITHDRAW_HELD_RULE,),
        Rule(
            "held-prompt-withdrawn",
            (2,),
            "answer $/cancel_request for a held prompt with -32800 at once, and leave the running work alone",
        ),
    ),
    (
        (CANCEL_HELD_RULE,),
        Rule(
            "cancel-answers-held",
            (2,),
            "on session/cancel, answer every prompt not yet inserted with -32800",
        ),
    ),
    (
        (LATER_PROMPT_RULE,),
        Rule(
            "later-prompt-untouched",
            (2,),
            "let a session/cancel touch only the work and prompts before it: insert a prompt sent after it",
        ),
    ),
    (
        (REQUIRES_ACTION_RULE,),
        Rule(
            "requires-action-state",
            (2,),
            "send state_update 'requires_action' while the work waits for a permission answer",
        ),
    ),
    (
        (CLOSE_RULE,),
        Rule(
            "close-cancels-work",
            (2,),
            "on session/close, cancel the work and send its idle 'cancelled' before answering the close",
        ),
    ),
    (
        (CLOSE_AFTER_RULE,),
        Rule(
            "nothing-after-close",
            (2,),
            "send nothing of a session after answering its session/close",
        ),
    ),
    (
        (CLOSE_UNKNOWN_RULE,),
        Rule(
            "close-unknown-session",
            (2,),
            "answer session/close of a session you do not know with {} or -32002",
        ),
    ),
    (
        (RESUME_RULE,),
        Rule(
            "resume-snapshot",
            (2,),
            "answer session/resume after its replay and a current state_update snapshot",
        ),
    ),
    (
        (RESUME_RUNNING_RULE,),
        Rule(
            "resume-snapshot-running",
            (2,),
            "make a resume snapshot say 'running' (or 'requires_action') while the work runs, never 'idle'",
        ),
    ),
    (
        (RESUMED_CANCEL_RULE, RESUMED_CANCEL_RULE_V2),
        Rule(
            "cancel-after-resume",
            (1, 2),
            "keep the running turn attached to its session when it is loaded or resumed again: a "
            "session/cancel after that still interrupts the prompt",
        ),
    ),
    (
        (SECOND_STOP_RULE, SECOND_STOP_RULE_V2),
        Rule(
            "no-second-stop-reason",
            (1, 2),
            "give a turn exactly one end: once it ended 'cancelled', drop its late stop reason; never "
            "let it answer or end the next prompt",
        ),
    ),
)

RULES: dict[str, Rule] = {prose: rule for proses, rule in _CATALOG for prose in proses}
"""Each rule's prose (either version's) -> its catalogue entry."""

BY_ID: dict[str, Rule] = {rule.id: rule for _proses, rule in _CATALOG}


def rule_id(prose: str) -> str:
    """The stable id of a rule (its prose when it has none: never raises on a result)."""
    found = RULES.get(prose)
    return found.id if found is not None else prose


def fix_of(prose: str) -> str:
    found = RULES.get(prose)
    return found.fix if found is not None else "see the evidence"


def catalog() -> list[tuple[Rule, tuple[str, ...]]]:
    """Every rule with its prose, in the order of the docs' table."""
    return [(rule, proses) for proses, rule in _CATALOG]


CHECKS: list[Check] = [
    Check(check_cancel, ((CANCEL_RULE, MUST), (AFTER_RULE, MUST)), "session/cancel mid-turn"),
    Check(check_cancel_request, ((CANCEL_REQUEST_RULE, MAY),), "$/cancel_request mid-turn"),
    NOTIFICATIONS_CHECK,
    Check(check_idle_cancel, ((IDLE_RULE, MUST),), "session/cancel on an idle session", WEDGED),
    Check(
        check_permission,
        ((PERMISSION_RULE, MUST), (WITHDRAW_RULE, INFO)),
        "session/cancel while a permission request is pending",
        WEDGED,
    ),
    Check(
        check_resumed_cancel,
        ((RESUMED_CANCEL_RULE, MUST),),
        "session/cancel after session/load or session/resume",
        UNCANCELLABLE,
    ),
    Check(
        check_second_stop,
        ((SECOND_STOP_RULE, MUST),),
        "a prompt right after a cancelled turn",
        UNCANCELLABLE,
    ),
    MALFORMED_CHECK,
    EOF_CHECK,
]
"""The v1 audit, in the order reported; each check on a fresh agent. The first proves what the
checks with ``unless`` depend on."""

CHECKS_V2: list[Check] = [
    Check(
        check_v2_cancel,
        (
            (INSERT_RULE, MUST),
            (USER_MESSAGE_RULE, MUST),
            (RUNNING_RULE, MUST),
            (V2_CANCEL_RULE, MUST),
            (V2_AFTER_RULE, MUST),
        ),
        "session/cancel mid-work",
    ),
    Check(
        check_v2_held,
        (
            (HELD_RULE, MUST),
            (HELD_ORDER_RULE, MUST),
            (WITHDRAW_HELD_RULE, MUST),
            (CANCEL_HELD_RULE, MUST),
            (LATER_PROMPT_RULE, MUST),
        ),
        "prompts sent while work runs",
        UNCANCELLABLE,
    ),
    NOTIFICATIONS_CHECK,
    Check(check_v2_idle_cancel, ((IDLE_RULE, MUST),), "session/cancel on an idle session", WEDGED),
    Check(
        check_v2_permission,
        ((V2_PERMISSION_RULE, MUST), (V2_WITHDRAW_RULE, SHOULD), (REQUIRES_ACTION_RULE, SHOULD)),
        "session/cancel while a permission request is pending",
        WEDGED,
    ),
    Check(
        check_v2_close,
        ((CLOSE_RULE, MUST), (CLOSE_AFTER_RULE, MUST), (CLOSE_UNKNOWN_RULE, SHOULD)),
        "session/close during work",
        WEDGED,
    ),
    Check(check_v2_resume, ((RESUME_RULE, MUST), (RESUME_RUNNING_RULE, MUST)), "session/resume", WEDGED),
    Check(
        check_v2_resumed_cancel,
        ((RESUMED_CANCEL_RULE_V2, MUST),),
        "session/cancel after session/resume",
        UNCANCELLABLE,
    ),
    Check(
        check_v2_second_stop,
        ((SECOND_STOP_RULE_V2, MUST),),
        "a prompt right after cancelled work",
        UNCANCELLABLE,
    ),
    MALFORMED_CHECK,
    EOF_CHECK,
]
"""The v2 audit, in the order reported; each check on a fresh agent."""

AUDITS: dict[int, list[Check]] = {1: CHECKS, 2: CHECKS_V2}
"""The audit of each version, by version number."""
