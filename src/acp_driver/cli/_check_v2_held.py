"""The v2 rules about prompts sent while work runs (``_check_v2`` has the prompt lifecycle):

- a prompt sent while the session works is **held** (not answered: it is not inserted) and
  inserted later, in the order sent (prompt-lifecycle.mdx; ``PromptResponse``: the answer means
  inserted, "not that the prompt was merely received or held");
- ``$/cancel_request`` on a held prompt is answered ``-32800`` (cancellation.mdx: one answer for
  the cancelled request) without touching the running work;
- ``session/cancel`` cancels "a session's foreground work and its prompts not yet inserted"
  (``CancelSessionNotification``): every held prompt is answered ``-32800``, and a prompt sent
  after the cancel is not touched.
"""

from __future__ import annotations

import argparse
import time

from .. import protocol as p
from ._check_rules import FAIL, MUST, PASS, SKIP, CheckResult
from ._check_spans import (
    USER_MESSAGE,
    Prompt,
    Seen,
    describe_idle,
    describe_reply,
    error_code,
    idle_after,
    message_id,
    reply,
    send_prompt,
    updates,
    wait_busy_v2,
    wait_idle,
)
from ._check_turns import BUSY_HINT, IN_FLIGHT, ms
from ._probe import Probe

HELD_RULE = "a prompt sent while work runs is held, then inserted in order"
WITHDRAW_HELD_RULE = "$/cancel_request on a held prompt answered -32800, the running work untouched"
CANCEL_HELD_RULE = "session/cancel answers every held prompt -32800"
LATER_PROMPT_RULE = "session/cancel never touches a prompt sent after it"

HOLD_WATCH = 0.5
"""How long the audit watches prompts sent while work runs (unless the work shows activity first)."""


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
