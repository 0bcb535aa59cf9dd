"""The rules ``acp-driver check`` audits an ACP v2 agent by (in order: ``_check_catalog.CHECKS_V2``): here the
prompt lifecycle, the cancel of running work and a cancel on an idle session; held prompts are
in ``_check_v2_held``, the session-level rules (permissions, close, resume) in
``_check_v2_session``; the v1 rules that still hold in v2 (notifications, unknown methods,
malformed input, stdin EOF) are the same checks as for v1.

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
    FAIL,
    IDLE_RULE,
    MUST,
    PASS,
    SKIP,
    UNCANCELLABLE,
    WEDGED,
    CheckResult,
    _refused_note,
    requests_since,
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
    disowned,
    error_code,
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
    wait_end,
    wait_reply,
    work_after,
    work_ended,
)
from ._check_turns import BUSY_HINT, IN_FLIGHT, RACE_BOUND, Busy, in_flight, maybe_race, ms, refusal
from ._probe import Probe, SetupError
from ._text import excerpt

INSERT_RULE = "session/prompt answered at insertion with a messageId"
USER_MESSAGE_RULE = "a user_message with the prompt's messageId"
RUNNING_RULE = "running reported when the work starts"
V2_CANCEL_RULE = "session/cancel ends the work with idle stopReason cancelled"
V2_AFTER_RULE = "no update of the cancelled work after its idle"

INSERT_WAIT = 2.0
"""How long the audit waits for a busy prompt's answer while its work runs, before cancelling."""


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
            lambda: reply(probe, prompt.id) or work_ended(probe, prompt),
            min(opts.timeout, INSERT_WAIT),
        )
        if work_ended(probe, prompt) is not None:
            found = "the work ended before the cancel could be sent; " + BUSY_HINT
    if isinstance(found, str):
        idle = await wait_end(probe, prompt, opts.timeout)
        await settle(probe, min(STRAGGLERS, opts.timeout))
        skipped = [
            CheckResult(V2_CANCEL_RULE, MUST, SKIP, found),
            CheckResult(V2_AFTER_RULE, MUST, SKIP, found),
        ]
        return [*_lifecycle(probe, prompt, idle), *skipped]
    busy = Busy(time.monotonic(), found.started, found.first, found.reason)
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    when = busy.describe()
    idle = await wait_end(probe, prompt, opts.timeout, after=busy.sent)
    if idle is not None:
        await settle(probe, min(STRAGGLERS, opts.timeout))  # stragglers after the idle
    lifecycle = _lifecycle(probe, prompt, idle, busy)
    refused = refusal(probe, busy.sent, p.SESSION_CANCEL)
    said = _refused_note(refused, p.SESSION_CANCEL)
    if idle is None:
        late = updates(probe, sid, busy.sent + IN_FLIGHT, probe.activity_kinds)
        still = f", {len(late)} update(s) of it after the cancel" if late else ""
        evidence = f"no idle within {opts.timeout:g} s after session/cancel: the work never ended{still} ({when}){said}"
        failed = CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence, opts.timeout)
        failed.proves = WEDGED if probe.first_activity(prompt.sent) is None else UNCANCELLABLE
        return [*lifecycle, failed, CheckResult(V2_AFTER_RULE, MUST, SKIP, "no idle ended the work")]
    elapsed = idle.at - busy.sent
    stop = stop_of(idle)
    unseen = disowned(probe, prompt, idle)
    evidence = f"{describe_idle(idle)} {ms(elapsed)} after session/cancel ({when}){said}{unseen}"
    if stop == "cancelled" and unseen:
        # The agent says the work ended, but no host can take it for the turn's end: the cancel
        # does not land.
        first = CheckResult(V2_CANCEL_RULE, MUST, FAIL, evidence + ": the cancel is not confirmed", elapsed)
    elif stop == "cancelled":
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
    # No control prompt ran (none was needed): any work of the session after the idle, or request
    # of the session, is the cancelled work's, going on. After a control, only the work's own.
    ours = first.result != SKIP
    late = work_after(probe, sid, idle) if ours else after_the_end(probe, prompt, idle)
    asked = requests_since(probe, idle.index, sid) if ours else []
    if late or asked:
        what: list[str] = (
            [f"{len(late)} update(s) of the work after its idle: {kinds_of(late)}"] if late else []
        )
        if asked:
            what.append(
                f"{len(asked)} request(s) after it: {', '.join(sorted({str(m['method']) for m in asked}))}"
            )
        said = "; ".join(what)
        if stop == "cancelled":
            said = f"cancel not confirmed: the work went on after its idle 'cancelled': {said}"
        second = CheckResult(V2_AFTER_RULE, MUST, FAIL, said)
    else:
        second = CheckResult(V2_AFTER_RULE, MUST, PASS, "none in the second after the idle")
    return [*lifecycle, first, second]


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
    idle = await wait_end(probe, prompt, opts.timeout) if answer is not None else None
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
    if disowned(probe, prompt, idle):
        # Not a verdict by itself: the control prompt on a fresh session tells whether the
        # idle cancel caused it.
        return f"the next prompt's work ended ({describe_idle(idle)}){disowned(probe, prompt, idle)}"
    return None
