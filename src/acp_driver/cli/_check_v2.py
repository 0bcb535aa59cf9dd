"""The rules ``acp-driver check`` audits an ACP v2 agent by: the prompt lifecycle, the cancel of
running work, held prompts, a cancel on an idle session; the session-level ones (permissions,
close, resume) are in ``_check_v2_session``; the v1 rules that still hold in v2 (notifications,
unknown methods, malformed input, stdin EOF) are the same checks as for v1.

In v2 a prompt is answered when it is *inserted* (``{messageId}``), and its work is a span of
``state_update``: ``running`` ... ``idle`` + ``stopReason``. A cancel is confirmed by the idle
``cancelled`` (spec, prompt-lifecycle.mdx: the agent "MUST send an idle state_update with the
cancelled stop reason", after the work's last updates). Every verdict quotes the wire; every
latency is taken from when the messages arrived (``_check_spans``).
"""

from __future__ import annotations

import argparse
import time

from .. import protocol as p
from ._check_rules import (
    EOF_RULE,
    FAIL,
    IDLE_RULE,
    MALFORMED_RULE,
    MUST,
    NOTIFICATION_RULE,
    PASS,
    SHOULD,
    SKIP,
    UNKNOWN_METHOD_RULE,
    Check,
    CheckResult,
    _refused_note,
    check_eof,
    check_malformed,
    check_notifications,
)
from ._check_spans import (
    BUSY_STATES,
    STRAGGLERS,
    USER_MESSAGE,
    Prompt,
    Seen,
    after_the_end,
    describe_idle,
    describe_reply,
    error_code,
    idle_after,
    kinds_of,
    message_id,
    natural_span,
    reply,
    send_prompt,
    settle,
    state_of,
    states,
    stop_of,
    updates,
    wait_busy_v2,
    wait_idle,
    wait_reply,
)
from ._check_turns import BUSY_HINT, IN_FLIGHT, RACE_BOUND, Busy, in_flight, maybe_race, ms, refusal
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
from ._probe import Probe, SetupError
from ._text import excerpt

INSERT_RULE = "session/prompt answered at insertion with a messageId"
USER_MESSAGE_RULE = "a user_message with the prompt's messageId"
RUNNING_RULE = "running reported when the work starts"
V2_CANCEL_RULE = "session/cancel ends the work with idle stopReason cancelled"
V2_AFTER_RULE = "no update of the cancelled work after its idle"
HELD_RULE = "a prompt sent while work runs is held, then inserted in order"
WITHDRAW_HELD_RULE = "$/cancel_request on a held prompt answered -32800, the running work untouched"
CANCEL_HELD_RULE = "session/cancel answers every held prompt -32800"
LATER_PROMPT_RULE = "session/cancel never touches a prompt sent after it"

BUSY_RULES_V2 = (
    V2_CANCEL_RULE,
    V2_AFTER_RULE,
    HELD_RULE,
    WITHDRAW_HELD_RULE,
    CANCEL_HELD_RULE,
    LATER_PROMPT_RULE,
    CLOSE_RULE,
    CLOSE_AFTER_RULE,
    RESUME_RUNNING_RULE,
)
"""The v2 rules a --busy-prompt too short to cancel leaves untested."""

INSERT_WAIT = 2.0
"""How long the audit waits for a busy prompt's answer while its work runs, before cancelling."""
HOLD_WATCH = 0.5
"""How long the audit watches prompts sent while work runs (unless the work shows activity first)."""


def _lifecycle(
    probe: Probe, prompt: Prompt, idle: Seen | None, cancelled: Busy | None = None
) -> list[CheckResult]:
    """The insertion rules on one prompt's span as the wire shows it: the answer (at insertion,
    with a messageId, while the work runs: before its idle, and before the cancel when the audit
    waited for it before cancelling), the user_message with that id, running."""
    answer = reply(probe, prompt.id)
    mid = message_id(answer)
    end = f"the work's idle ({ms(idle.at - prompt.sent)} after the prompt)" if idle is not None else None
    if answer is None:
        what = f"not answered by {end}, nor in the second after it" if end else "never answered"
        insert = CheckResult(INSERT_RULE, MUST, FAIL, what)
    elif "error" in answer.message:
        insert = CheckResult(
            INSERT_RULE,
            MUST,
            FAIL,
            f"answered {describe_reply(answer)} {ms(answer.at - prompt.sent)} after the prompt, whose work ran "
            "(expected {messageId} at insertion)",
        )
    elif mid is None:
        result = answer.message.get("result")
        v1 = " (a v1 answer)" if isinstance(result, dict) and "stopReason" in result else ""
        insert = CheckResult(
            INSERT_RULE,
            MUST,
            FAIL,
            f"answered {excerpt(result, 120)}{v1} {ms(answer.at - prompt.sent)} after the prompt: no messageId",
        )
    elif cancelled is not None and answer.at > cancelled.sent:
        waited = ms(cancelled.sent - (cancelled.first[0] if cancelled.first else cancelled.started))
        insert = CheckResult(
            INSERT_RULE,
            MUST,
            FAIL,
            f"answered {{messageId}} only {ms(answer.at - cancelled.sent)} after session/cancel, none in the "
            f"{waited} the work ran before it: held until the work ended, not answered at insertion",
        )
    elif idle is not None and answer.index > idle.index:
        insert = CheckResult(
            INSERT_RULE,
            MUST,
            FAIL,
            f"answered {{messageId}} only {ms(answer.at - idle.at)} after {end}: held until the work ended, "
            "not answered at insertion",
        )
    else:
        where = "before the work's idle" if idle is not None else "while the work ran"
        insert = CheckResult(
            INSERT_RULE,
            MUST,
            PASS,
            f"answered {{messageId}} {ms(answer.at - prompt.sent)} after the prompt, {where}",
            answer.at - prompt.sent,
        )
    return [insert, _user_message(probe, prompt, answer, mid), _running(probe, prompt, idle)]


def _user_message(probe: Probe, prompt: Prompt, answer: Seen | None, mid: str | None) -> CheckResult:
    users = updates(probe, prompt.session_id, prompt.sent, USER_MESSAGE)
    if mid is None:
        seen = f" ({len(users)} user message update(s) seen)" if users else ""
        if users:
            return CheckResult(USER_MESSAGE_RULE, MUST, SKIP, f"the answer named no messageId to match{seen}")
        return CheckResult(USER_MESSAGE_RULE, MUST, FAIL, "no user_message or user_message_chunk at all")
    match = next((u for u in users if u.update.get("messageId") == mid), None)
    if match is None:
        others = sorted({str(u.update.get("messageId")) for u in users})
        seen = (
            f" (user message ids seen: {', '.join(others)})" if others else " (no user message update at all)"
        )
        return CheckResult(
            USER_MESSAGE_RULE, MUST, FAIL, f"no user message update with messageId {mid!r}{seen}"
        )
    assert answer is not None
    order = "before" if match.index < answer.index else "after"
    return CheckResult(
        USER_MESSAGE_RULE,
        MUST,
        PASS,
        f"{match.kind} {mid!r} {ms(match.at - prompt.sent)} after the prompt ({order} the answer)",
        match.at - prompt.sent,
    )


def _running(probe: Probe, prompt: Prompt, idle: Seen | None) -> CheckResult:
    busy = next(
        (s for s in states(probe, prompt.session_id, prompt.sent) if state_of(s) in BUSY_STATES), None
    )
    first = next(iter(updates(probe, prompt.session_id, prompt.sent, probe.activity_kinds)), None)
    if busy is not None and idle is not None and busy.index > idle.index:
        busy = None
    if busy is None:
        if first is not None:
            return CheckResult(
                RUNNING_RULE,
                MUST,
                FAIL,
                f"no running state_update: the work's updates ({first.kind} {ms(first.at - prompt.sent)} into "
                "it) came with the session idle",
            )
        return CheckResult(RUNNING_RULE, MUST, FAIL, "no running state_update for the prompt's work")
    if first is not None and first.index < busy.index:
        return CheckResult(
            RUNNING_RULE,
            MUST,
            FAIL,
            f"{state_of(busy)} only {ms(busy.at - first.at)} after the work's first update ({first.kind})",
        )
    before = f", before the work's first update ({first.kind})" if first is not None else ""
    return CheckResult(
        RUNNING_RULE,
        MUST,
        PASS,
        f"{state_of(busy)} {ms(busy.at - prompt.sent)} after the prompt{before}",
        busy.at - prompt.sent,
    )


async def check_v2_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """A busy prompt: its insertion, user message and running; then ``session/cancel`` once the
    work is busy and answered: the idle ``cancelled`` (MUST), nothing of the work after it."""
    sid = await probe.ready()
    prompt = await send_prompt(probe, opts.busy_prompt)
    found = await wait_busy_v2(opts, probe, prompt)
    if isinstance(found, Busy):
        # The answer comes at insertion: wait for it (a while) before cancelling, so that an
        # answer held until the work ends is seen as such, not excused by the cancel.
        await probe.wait_for(
            lambda: reply(probe, prompt.id) or idle_after(probe, sid, prompt.sent),
            min(opts.timeout, INSERT_WAIT),
        )
        if idle_after(probe, sid, prompt.sent) is not None:
            found = "the work ended before the cancel could be sent; " + BUSY_HINT
    if isinstance(found, str):
        idle = await wait_idle(probe, sid, prompt.sent, opts.timeout)
        await settle(probe, min(STRAGGLERS, opts.timeout))
        skipped = [
            CheckResult(V2_CANCEL_RULE, MUST, SKIP, found),
            CheckResult(V2_AFTER_RULE, MUST, SKIP, found),
        ]
        return [*_lifecycle(probe, prompt, idle), *skipped]
    busy = Busy(time.monotonic(), found.started, found.first, found.reason)
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    when = busy.describe()
    idle = await wait_idle(probe, sid, busy.sent, opts.timeout)
    await settle(probe, min(STRAGGLERS, opts.timeout))  # stragglers after the idle
    lifecycle = _lifecycle(probe, prompt, idle, busy)
    refused = refusal(probe, busy.sent, p.SESSION_CANCEL)
    said = _refused_note(refused, p.SESSION_CANCEL)
    if idle is None:
        late = updates(probe, sid, busy.sent + IN_FLIGHT, probe.activity_kinds)
        still = f", {len(late)} update(s) of it after the cancel" if late else ""
        evidence = f"no idle within {opts.timeout:g} s after session/cancel: the work never ended{still} ({when}){said}"
        return [
            *lifecycle,
            CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence, opts.timeout),
            CheckResult(V2_AFTER_RULE, MUST, SKIP, "no idle ended the work"),
        ]
    elapsed = idle.at - busy.sent
    stop = stop_of(idle)
    evidence = f"{describe_idle(idle)} {ms(elapsed)} after session/cancel ({when}){said}"
    if stop == "cancelled":
        first = CheckResult(V2_CANCEL_RULE, MUST, PASS, evidence, elapsed)
    elif stop is None:
        first = CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence + ": the cancel is not confirmed", elapsed)
    elif stop == "error":
        first = CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence + ": a cancel is not an error", elapsed)
    else:
        first = CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence, elapsed)
        if refused is None and maybe_race(probe, busy, elapsed):
            # A natural end right after the cancel: the agent's doing, or work ending anyway?
            limit = idle.at - prompt.sent + RACE_BOUND
            flight = in_flight(probe, busy.sent, sid)
            natural = await natural_span(opts, probe, limit)
            if natural is not None:
                first = CheckResult(
                    V2_CANCEL_RULE,
                    MUST,
                    SKIP,
                    f"the work ended by itself ({describe_idle(idle)}) {ms(elapsed)} after session/cancel{flight}, "
                    f"and uncancelled work ends in {ms(natural)}: a race, not a verdict; {BUSY_HINT}",
                    elapsed,
                )
            else:
                first.evidence += f"{flight}; uncancelled work runs on longer ({ms(limit)})"
    late = after_the_end(probe, sid, prompt.sent, idle)
    if late:
        second = CheckResult(
            V2_AFTER_RULE, MUST, FAIL, f"{len(late)} update(s) of the work after its idle: {kinds_of(late)}"
        )
    else:
        second = CheckResult(V2_AFTER_RULE, MUST, PASS, "none in the second after the idle")
    return [*lifecycle, first, second]


async def check_v2_held(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """Prompts sent while work runs: held (not answered) while it runs; one withdrawn with
    ``$/cancel_request`` is answered ``-32800`` and the work runs on; ``session/cancel`` answers
    the others ``-32800``; two prompts sent right after the cancel are inserted, in order."""
    rules = (HELD_RULE, WITHDRAW_HELD_RULE, CANCEL_HELD_RULE, LATER_PROMPT_RULE)
    sid = await probe.ready()
    work = await send_prompt(probe, opts.busy_prompt)
    found = await wait_busy_v2(opts, probe, work)
    if isinstance(found, str):
        return [CheckResult(rule, MUST, SKIP, found) for rule in rules]
    held = [await send_prompt(probe, opts.quick_prompt) for _ in range(3)]
    watched = held[-1].sent

    def watch_over() -> str | None:
        if idle_after(probe, sid, work.sent) is not None or any(reply(probe, h.id) for h in held):
            return "over"
        return "over" if probe.first_activity(watched + IN_FLIGHT) is not None else None

    await probe.wait_for(watch_over, HOLD_WATCH)
    idle = idle_after(probe, sid, work.sent)
    early = [(i, reply(probe, h.id)) for i, h in enumerate(held) if reply(probe, h.id) is not None]
    if idle is not None and not early:
        why = f"the work ended ({describe_idle(idle)}) before the held prompts could be judged; {BUSY_HINT}"
        return [CheckResult(rule, MUST, SKIP, why) for rule in rules]
    ran_on = probe.first_activity(watched + IN_FLIGHT)
    not_held = [
        f"prompt {i + 1} answered {describe_reply(a)} {ms(a.at - held[i].sent)} after it was sent"
        for i, a in early
        if a is not None and (idle is None or a.index < idle.index)
    ]
    # $/cancel_request on the first held prompt: answered -32800, the work untouched.
    assert probe.conn is not None
    withdrawn = held[0]
    withdrawal_sent = time.monotonic()
    probe.conn.cancel_request(withdrawn.id)
    answer = await probe.wait_for(
        lambda: reply(probe, withdrawn.id) or idle_after(probe, sid, work.sent), opts.timeout
    )
    answer = reply(probe, withdrawn.id)
    if answer is not None and error_code(answer) == -32800:
        await probe.wait_for(
            lambda: probe.first_activity(answer.at) or idle_after(probe, sid, work.sent), HOLD_WATCH
        )
    touched = idle_after(probe, sid, withdrawal_sent)
    withdraw = _withdraw_verdict(opts, answer, withdrawal_sent, touched)
    # session/cancel, then two prompts sent after it.
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    later = [await send_prompt(probe, opts.quick_prompt) for _ in range(2)]
    pending = [h for h in held if (a := reply(probe, h.id)) is None or a.at > cancel_sent]
    await probe.wait_for(lambda: all(reply(probe, h.id) for h in pending) or None, opts.timeout)
    if touched is None:
        await wait_idle(probe, sid, cancel_sent, opts.timeout)
    await probe.wait_for(lambda: all(reply(probe, a.id) for a in later) or None, opts.timeout)
    last = reply(probe, later[-1].id)
    if last is not None and "result" in last.message:
        await wait_idle(probe, sid, last.at, opts.timeout)  # let the later prompts' work end
    end = touched or _end_of_cancelled(probe, sid, cancel_sent, later)
    if touched is not None:
        why = f"the work had ended before the cancel ({describe_idle(touched)} after the withdrawal)"
        cancel_held = CheckResult(CANCEL_HELD_RULE, MUST, SKIP, why)
    else:
        cancel_held = _cancel_held_verdict(probe, held, pending, cancel_sent)
    later_verdict = _later_verdict(opts, probe, later, cancel_sent, end)
    held_verdict = _held_verdict(probe, held, later, not_held, ran_on, end, watched)
    return [held_verdict, withdraw, cancel_held, later_verdict]


def _end_of_cancelled(probe: Probe, sid: str, cancel_sent: float, later: list[Prompt]) -> Seen | None:
    """The idle that ended the cancelled work: the first after the cancel, if it came before any
    prompt sent after the cancel was inserted (its answer or its user message)."""
    idle = idle_after(probe, sid, cancel_sent)
    if idle is None:
        return None
    answers = [
        a.index for a in (reply(probe, x.id) for x in later) if a is not None and "result" in a.message
    ]
    ids = {message_id(a) for a in (reply(probe, x.id) for x in later)} - {None}
    users = [
        u.index for u in updates(probe, sid, cancel_sent, USER_MESSAGE) if u.update.get("messageId") in ids
    ]
    first_insertion = min([*answers, *users], default=None)
    return idle if first_insertion is None or idle.index < first_insertion else None


def _withdraw_verdict(
    opts: argparse.Namespace, answer: Seen | None, sent: float, touched: Seen | None
) -> CheckResult:
    if answer is None:
        what = (
            f"no answer within {opts.timeout:g} s" if touched is None else "no answer before the work ended"
        )
        return CheckResult(
            WITHDRAW_HELD_RULE,
            MUST,
            FAIL,
            f"{what}: the $/cancel_request was ignored, the prompt stayed held",
        )
    elapsed = answer.at - sent
    if elapsed < 0:
        what = f"answered {describe_reply(answer)} before the $/cancel_request: it was not held"
        return CheckResult(WITHDRAW_HELD_RULE, MUST, FAIL, what)
    if "result" in answer.message:
        return CheckResult(
            WITHDRAW_HELD_RULE,
            MUST,
            FAIL,
            f"answered {describe_reply(answer)} {ms(elapsed)} after $/cancel_request: inserted, not withdrawn",
            elapsed,
        )
    if error_code(answer) != -32800:
        return CheckResult(
            WITHDRAW_HELD_RULE, MUST, FAIL, f"answered {describe_reply(answer)} (expected -32800)", elapsed
        )
    if touched is not None:
        return CheckResult(
            WITHDRAW_HELD_RULE,
            MUST,
            FAIL,
            f"answered -32800 {ms(elapsed)} after $/cancel_request, but the running work ended: "
            f"{describe_idle(touched)} {ms(touched.at - sent)} after it",
            elapsed,
        )
    return CheckResult(
        WITHDRAW_HELD_RULE,
        MUST,
        PASS,
        f"answered -32800 {ms(elapsed)} after $/cancel_request; the work ran on (no idle)",
        elapsed,
    )


def _cancel_held_verdict(
    probe: Probe, held: list[Prompt], pending: list[Prompt], cancel_sent: float
) -> CheckResult:
    if not pending:
        return CheckResult(CANCEL_HELD_RULE, MUST, SKIP, "no prompt was still held at the cancel")
    wrong, right = [], []
    for prompt in pending:
        n = held.index(prompt) + 1
        answer = reply(probe, prompt.id)
        if answer is None:
            wrong.append(f"held prompt {n} never answered")
        elif error_code(answer) == -32800:
            right.append(ms(answer.at - cancel_sent))
        elif "result" in answer.message:
            wrong.append(f"held prompt {n} was inserted after the cancel ({describe_reply(answer)})")
        else:
            wrong.append(f"held prompt {n} answered {describe_reply(answer)}")
    if wrong:
        return CheckResult(CANCEL_HELD_RULE, MUST, FAIL, "; ".join(wrong))
    return CheckResult(
        CANCEL_HELD_RULE,
        MUST,
        PASS,
        f"{len(right)} held prompt(s) answered -32800 {', '.join(right)} after session/cancel",
    )


def _later_verdict(
    opts: argparse.Namespace, probe: Probe, later: list[Prompt], cancel_sent: float, end: Seen | None
) -> CheckResult:
    wrong, right, waiting = [], [], []
    for n, prompt in enumerate(later, 1):
        answer = reply(probe, prompt.id)
        if answer is None:
            waiting.append(f"prompt {n} sent after it was not answered within {opts.timeout:g} s")
        elif "result" in answer.message:
            right.append(ms(answer.at - cancel_sent))
        else:
            wrong.append(
                f"prompt {n}, sent {ms(prompt.sent - cancel_sent)} after it, was answered {describe_reply(answer)}"
            )
    if wrong:
        return CheckResult(LATER_PROMPT_RULE, MUST, FAIL, "; ".join(wrong + waiting))
    if waiting and end is None:
        why = (
            "; ".join(waiting) + ": the cancelled work never ended (no idle), so they stayed held; "
            "no verdict (see the cancel rule)"
        )
        return CheckResult(LATER_PROMPT_RULE, MUST, SKIP, why)
    if waiting:
        return CheckResult(
            LATER_PROMPT_RULE, MUST, FAIL, "; ".join(waiting) + ", though the cancelled work had ended"
        )
    return CheckResult(
        LATER_PROMPT_RULE,
        MUST,
        PASS,
        f"the {len(right)} prompts sent right after session/cancel were inserted {', '.join(right)} after it",
    )


def _held_verdict(
    probe: Probe,
    held: list[Prompt],
    later: list[Prompt],
    not_held: list[str],
    ran_on: tuple[float, str] | None,
    end: Seen | None,
    watched: float,
) -> CheckResult:
    if not_held:
        return CheckResult(HELD_RULE, MUST, FAIL, "not held while the work ran: " + "; ".join(not_held))
    answers = [reply(probe, a.id) for a in later]
    inserted = [a for a in answers if a is not None and "result" in a.message]
    problems = []
    if end is None and inserted:
        problems.append(
            f"{len(inserted)} prompt(s) sent after the cancel inserted with no idle ending the cancelled work "
            "before them"
        )
    if len(inserted) == len(later) and inserted[0].index > inserted[1].index:
        problems.append("the two prompts sent after the cancel were inserted out of order (the second first)")
    users = {
        u.update.get("messageId"): u.index for u in updates(probe, held[0].session_id, watched, USER_MESSAGE)
    }
    ids = [message_id(a) for a in inserted]
    if len(ids) == 2 and all(i in users for i in ids) and users[ids[0]] > users[ids[1]]:
        problems.append("their user messages came out of order")
    if problems:
        return CheckResult(HELD_RULE, MUST, FAIL, "; ".join(problems))
    how = f"the work ran on (its {ran_on[1]} updates)" if ran_on is not None else "the work ran on (no idle)"
    order = (
        "; the two sent after the cancel were inserted in the order sent, after the work's idle"
        if len(inserted) == len(later)
        else "; the prompts sent after the cancel were not inserted (see the rule on them)"
    )
    return CheckResult(
        HELD_RULE,
        MUST,
        PASS,
        f"{len(held)} prompts sent while the work ran were not answered while {how}{order}",
    )


async def check_v2_idle_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """``session/cancel`` on an idle session, then a quick prompt: inserted and ended normally. A
    next prompt that gets no end within ``--timeout`` is judged against a control prompt on a
    fresh session (never cancelled), as in v1."""
    sid = await probe.ready()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await settle(probe, 0.1)
    what = await _quick_turn(opts, probe)
    if what is None:
        return [
            CheckResult(IDLE_RULE, MUST, PASS, "the next prompt was inserted and its work ended normally")
        ]
    if what.startswith("!"):
        return [CheckResult(IDLE_RULE, MUST, FAIL, what[1:])]
    try:
        await probe.new_session()
    except SetupError as exc:
        control = f"no fresh session for the control turn: {exc}"
    else:
        control = await _quick_turn(opts, probe) or ""
    if control == "":
        evidence = f"{what}, while a control prompt on a fresh session, never cancelled, ended normally: the idle cancel poisoned the session"
        return [CheckResult(IDLE_RULE, MUST, FAIL, evidence)]
    evidence = (
        f"{what}, and so did a control prompt on a fresh session, never cancelled ({control.lstrip('!')}): "
        "the quick prompt does not end at all, no verdict; pass a --quick-prompt the agent answers within --timeout"
    )
    return [CheckResult(IDLE_RULE, MUST, SKIP, evidence)]


async def _quick_turn(opts: argparse.Namespace, probe: Probe) -> str | None:
    """The quick prompt on the probe's session: None if inserted and ended (idle) with a stop
    reason other than cancelled; else what happened ("!..." when that is a verdict by itself)."""
    prompt = await send_prompt(probe, opts.quick_prompt)
    sid = prompt.session_id
    answer = await wait_reply(probe, prompt.id, opts.timeout)
    if answer is not None and error_code(answer) == -32800:
        return f"!the next prompt was answered -32800 {ms(answer.at - prompt.sent)} after it: the idle cancel poisoned it"
    idle = await wait_idle(probe, sid, prompt.sent, opts.timeout) if answer is not None else None
    if answer is None:
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return f"the next prompt got no answer within {opts.timeout:g} s"
    if "error" in answer.message:
        return f"the next prompt was answered {describe_reply(answer)}"
    if idle is None:
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return f"the next prompt's work did not end within {opts.timeout:g} s"
    if stop_of(idle) == "cancelled":
        return "!the next prompt's work ended cancelled: the idle cancel poisoned it"
    return None


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
    ),
    Check(
        check_v2_held,
        ((HELD_RULE, MUST), (WITHDRAW_HELD_RULE, MUST), (CANCEL_HELD_RULE, MUST), (LATER_PROMPT_RULE, MUST)),
    ),
    Check(check_notifications, ((NOTIFICATION_RULE, MUST), (UNKNOWN_METHOD_RULE, SHOULD))),
    Check(check_v2_idle_cancel, ((IDLE_RULE, MUST),)),
    Check(
        check_v2_permission,
        ((V2_PERMISSION_RULE, MUST), (V2_WITHDRAW_RULE, SHOULD), (REQUIRES_ACTION_RULE, SHOULD)),
    ),
    Check(check_v2_close, ((CLOSE_RULE, MUST), (CLOSE_AFTER_RULE, MUST), (CLOSE_UNKNOWN_RULE, SHOULD))),
    Check(check_v2_resume, ((RESUME_RULE, MUST), (RESUME_RUNNING_RULE, MUST))),
    Check(check_malformed, ((MALFORMED_RULE, SHOULD),)),
    Check(check_eof, ((EOF_RULE, SHOULD),)),
]
"""The v2 audit, in order; each check on a fresh agent."""
