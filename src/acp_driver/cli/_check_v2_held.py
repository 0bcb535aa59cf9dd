"""The v2 rules about prompts sent while work runs (``_check_v2`` has the prompt lifecycle):

- a prompt sent while the session works is **held** (not answered: it is not inserted) and
  inserted later, in the order sent (prompt-lifecycle.mdx; ``PromptResponse``: the answer means
  inserted, "not that the prompt was merely received or held"). The order is judged only where
  two prompts were held at the same moment: sent while a work waits for the audit's answer to
  its permission request (the agent reads them before that answer: one stream, in order). Two
  prompts sent while some work merely happens to run show nothing about order (the work may end
  before the agent reads the second, and one held prompt is inserted the same first-in or
  last-in);
- ``$/cancel_request`` on a held prompt is answered ``-32800`` (cancellation.mdx: one answer for
  the cancelled request) without touching the running work;
- ``session/cancel`` cancels "a session's foreground work and its prompts not yet inserted"
  (``CancelSessionNotification``): every held prompt is answered ``-32800``, and a prompt sent
  after the cancel is not touched.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from .. import protocol as p
from ..aio import current_request
from ._check_rules import FAIL, IF_IT_ASKS_V2, MUST, NA, NEVER_ASKED, PASS, SKIP, CheckResult
from ._check_spans import (
    USER_MESSAGE,
    Prompt,
    Seen,
    describe_idle,
    describe_reply,
    error_code,
    message_id,
    reply,
    send_prompt,
    updates,
    wait_busy_v2,
    wait_end,
    wire_turns,
    work_ended,
)
from ._check_turns import BUSY_HINT, IN_FLIGHT, ms
from ._probe import Probe

HELD_RULE = "a prompt sent while work runs is held (not answered) until the work ends"
HELD_ORDER_RULE = "held prompts are inserted in the order sent"
WITHDRAW_HELD_RULE = "$/cancel_request on a held prompt answered -32800, the running work untouched"
CANCEL_HELD_RULE = "session/cancel answers every held prompt -32800"
LATER_PROMPT_RULE = "session/cancel never touches a prompt sent after it"

HOLD_WATCH = 0.5
"""How long the audit watches prompts sent while work runs (unless the work shows activity first)."""


async def check_v2_held(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """Prompts sent while work runs: held (not answered) while it runs; one withdrawn with
    ``$/cancel_request`` is answered ``-32800`` and the work runs on; ``session/cancel`` answers
    the others ``-32800``; two prompts sent right after the cancel are inserted, in order."""
    rules = (HELD_RULE, HELD_ORDER_RULE, WITHDRAW_HELD_RULE, CANCEL_HELD_RULE, LATER_PROMPT_RULE)
    asking = _Asking()
    probe.permission_handler = asking.hold
    sid = await probe.ready()
    work = await send_prompt(probe, opts.busy_prompt)
    found = await wait_busy_v2(opts, probe, work)
    if isinstance(found, str):
        return [CheckResult(rule, MUST, SKIP, found) for rule in rules]
    held = [await send_prompt(probe, opts.quick_prompt) for _ in range(3)]
    watched = held[-1].sent

    def watch_over() -> str | None:
        if work_ended(probe, work) is not None or any(reply(probe, h.id) for h in held):
            return "over"
        return "over" if probe.first_activity(watched + IN_FLIGHT) is not None else None

    await probe.wait_for(watch_over, HOLD_WATCH)
    idle = work_ended(probe, work)
    early = answered_while_working(idle, [reply(probe, h.id) for h in held])
    if idle is not None and not early:
        # The work ended first: prompts inserted after its idle were held as they should be,
        # and there is no running work left to withdraw them from or to cancel.
        why = f"the work ended ({describe_idle(idle)}) before the held prompts could be judged; {BUSY_HINT}"
        return [CheckResult(rule, MUST, SKIP, why) for rule in rules]
    ran_on = probe.first_activity(watched + IN_FLIGHT)
    not_held = [
        f"prompt {i + 1} answered {describe_reply(a)} {ms(a.at - held[i].sent)} after it was sent"
        for i, a in early
    ]
    # $/cancel_request on the first held prompt: answered -32800, the work untouched.
    assert probe.conn is not None
    withdrawn = held[0]
    withdrawal_sent = time.monotonic()
    probe.conn.cancel_request(withdrawn.id)
    answer = await probe.wait_for(lambda: reply(probe, withdrawn.id) or work_ended(probe, work), opts.timeout)
    answer = reply(probe, withdrawn.id)
    if answer is not None and error_code(answer) == -32800:
        await probe.wait_for(lambda: probe.first_activity(answer.at) or work_ended(probe, work), HOLD_WATCH)
    touched = work_ended(probe, work, after=withdrawal_sent)
    withdraw = _withdraw_verdict(opts, answer, withdrawal_sent, touched)
    # session/cancel, then two prompts sent after it.
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    later = [await send_prompt(probe, opts.quick_prompt) for _ in range(2)]
    pending = [h for h in held if (a := reply(probe, h.id)) is None or a.at > cancel_sent]
    await probe.wait_for(lambda: all(reply(probe, h.id) for h in pending) or None, opts.timeout)
    if touched is None:
        await wait_end(probe, work, opts.timeout, after=cancel_sent)
    await probe.wait_for(lambda: all(reply(probe, a.id) for a in later) or None, opts.timeout)
    last = reply(probe, later[-1].id)
    if last is not None and "result" in last.message:
        await wait_end(probe, later[-1], opts.timeout)  # let the later prompts' work end
    end = touched or _end_of_cancelled(probe, work, cancel_sent, later)
    if touched is not None:
        why = f"the work had ended before the cancel ({describe_idle(touched)} after the withdrawal)"
        cancel_held = CheckResult(CANCEL_HELD_RULE, MUST, SKIP, why)
    else:
        cancel_held = _cancel_held_verdict(probe, held, pending, cancel_sent)
    later_verdict = _later_verdict(opts, probe, later, cancel_sent, end)
    order = await _order(opts, probe, sid, asking)
    held_verdict, order_verdict = _held_verdict(probe, held, later, not_held, ran_on, end, watched, order)
    return [held_verdict, order_verdict, withdraw, cancel_held, later_verdict]


def answered_while_working(idle: Seen | None, answers: list[Seen | None]) -> list[tuple[int, Seen]]:
    """The prompts (by place) answered while the work still ran: before its idle, or with no
    idle yet. An answer after the idle is a held prompt inserted when it should be."""
    return [(i, a) for i, a in enumerate(answers) if a is not None and (idle is None or a.index < idle.index)]


class _Asking:
    """The audit's side of the agent's permission requests in this check: each is held until
    ``release`` (then answered with a reject option: nothing is run), its arrival recorded."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.withdrawn = False
        self.release = asyncio.Event()

    async def hold(self, params: Any) -> Any:
        self.asked.append(time.monotonic())
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            ctx = current_request()
            if ctx is not None and ctx.cancel_requested:
                self.withdrawn = True
            raise
        options = params.get("options") if isinstance(params, dict) else None
        for option in options if isinstance(options, list) else []:
            if isinstance(option, dict) and str(option.get("kind", "")).startswith("reject"):
                return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}
        return {"outcome": {"outcome": "cancelled"}}


async def _order(
    opts: argparse.Namespace, probe: Probe, sid: str, asking: _Asking
) -> tuple[Prompt, list[Prompt]] | str:
    """Two prompts held at the same moment, then inserted: the ``--permission-prompt``'s work
    waits for the audit's answer to its permission request; both prompts are sent meanwhile and
    only then is it answered (after them on the same stream: the agent has read both while the
    work still waited, so both were held at once). Returns the prompt that asked and the two
    prompts, or why the order could not be seen (the order is then not judged)."""
    asking.release.clear()
    since = len(asking.asked)
    work = await send_prompt(probe, opts.permission_prompt)

    def asked_or_ended() -> str | None:
        if len(asking.asked) > since:
            return "asked"
        return "ended" if work_ended(probe, work) is not None else None

    got = await probe.wait_for(asked_or_ended, opts.timeout)
    if got != "asked":
        idle = work_ended(probe, work)
        if idle is None:
            probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
            await wait_end(probe, work, opts.timeout)
            return f"the --permission-prompt asked no permission within {opts.timeout:g} s"
        return f"the --permission-prompt's work ended ({describe_idle(idle)}) without asking permission"
    pair = [await send_prompt(probe, opts.quick_prompt) for _ in range(2)]
    # Checked on the wire before the answer goes out: the work still waits for it.
    ended = work_ended(probe, work)
    asking.release.set()
    if ended is not None or asking.withdrawn:
        how = describe_idle(ended) if ended is not None else "its permission request withdrawn"
        await probe.wait_for(lambda: all(reply(probe, x.id) for x in pair) or None, opts.timeout)
        return f"the work that asked permission ended ({how}) before the audit answered it: the two prompts sent meanwhile may not have been held at once"
    await probe.wait_for(lambda: all(reply(probe, x.id) for x in pair) or None, opts.timeout)
    last = reply(probe, pair[-1].id)
    if last is not None and "result" in last.message:
        await wait_end(probe, pair[-1], opts.timeout)  # let the last prompt's work end
    return work, pair


def _end_of_cancelled(probe: Probe, work: Prompt, cancel_sent: float, later: list[Prompt]) -> Seen | None:
    """The idle that ended the cancelled work (after the cancel), if it came before any prompt
    sent after the cancel was inserted (the lifecycle's insertion: its answer or its user
    message, whichever came first)."""
    idle = work_ended(probe, work, after=cancel_sent)
    if idle is None:
        return None
    inserted = wire_turns(probe, work.session_id).inserted
    first_insertion = min((inserted[x.id].index for x in later if x.id in inserted), default=None)
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
    order: tuple[Prompt, list[Prompt]] | str,
) -> list[CheckResult]:
    """The held rule and the order rule. Out of order is a failure wherever it shows; in order
    proves something only where both prompts were held at once (``_order``): where the agent
    never asks permission, the order cannot be seen, and its rule does not apply."""
    sid = held[0].session_id
    problems = []
    inserted = _inserted(probe, later)
    if end is None and inserted:
        problems.append(
            f"{len(inserted)} prompt(s) sent after the cancel inserted with no idle ending the cancelled work "
            "before them"
        )
    disorder = _out_of_order(probe, sid, later, watched, "the two prompts sent after the cancel")
    if not isinstance(order, str):
        asker, pair = order
        problems += _not_held_for_permission(probe, asker, pair)
        disorder += _out_of_order(
            probe, sid, pair, pair[0].sent, "the two prompts sent while a work waited for permission"
        )
        answered = _inserted(probe, pair)
        if len(answered) < len(pair) and not problems and not disorder:
            problems.append(
                f"{len(pair) - len(answered)} of the two prompts held while a work waited for permission "
                f"not inserted after its idle ({_describe_answers(probe, pair)})"
            )
    how = f"the work ran on (its {ran_on[1]} updates)" if ran_on is not None else "the work ran on (no idle)"
    seen = f"{len(held)} prompts sent while the work ran were not answered while {how}"
    if not_held:
        first = CheckResult(HELD_RULE, MUST, FAIL, "not held while the work ran: " + "; ".join(not_held))
    elif problems:
        first = CheckResult(HELD_RULE, MUST, FAIL, "; ".join(problems))
    elif not isinstance(order, str):
        first = CheckResult(
            HELD_RULE,
            MUST,
            PASS,
            f"{seen}; two prompts sent while a work waited for its permission answer were held until its idle",
        )
    else:
        first = CheckResult(HELD_RULE, MUST, PASS, seen)
    if disorder:
        second = CheckResult(HELD_ORDER_RULE, MUST, FAIL, "; ".join(disorder))
    elif isinstance(order, str) and "without asking permission" in order:
        second = CheckResult(
            HELD_ORDER_RULE,
            MUST,
            NA,
            f"{NEVER_ASKED}: the order is seen only where two prompts are held at once, while a work "
            f"waits for the answer to its permission request ({order}){IF_IT_ASKS_V2}",
        )
    elif isinstance(order, str):
        second = CheckResult(HELD_ORDER_RULE, MUST, SKIP, f"the order of insertion not seen: {order}")
    elif not_held or problems:
        second = CheckResult(HELD_ORDER_RULE, MUST, SKIP, "not judged: the prompts were not held")
    else:
        second = CheckResult(
            HELD_ORDER_RULE,
            MUST,
            PASS,
            "two prompts sent while a work waited for its permission answer were inserted in the order "
            "sent, after its idle",
        )
    return [first, second]


def _inserted(probe: Probe, prompts: list[Prompt]) -> list[Seen]:
    """The answers of ``prompts`` that are results (insertions), in the order sent."""
    answers = [reply(probe, x.id) for x in prompts]
    return [a for a in answers if a is not None and "result" in a.message]


def _out_of_order(probe: Probe, sid: str, pair: list[Prompt], since: float, what: str) -> list[str]:
    """Whether the second of ``pair`` was inserted before the first: its answer, its user message."""
    inserted = _inserted(probe, pair)
    if len(inserted) != len(pair):
        return []
    if inserted[0].index > inserted[1].index:
        return [f"{what} were inserted out of order (the second first)"]
    users = {u.update.get("messageId"): u.index for u in updates(probe, sid, since, USER_MESSAGE)}
    ids = [message_id(a) for a in inserted]
    if all(i in users for i in ids) and users[ids[0]] > users[ids[1]]:
        return [f"{what}: their user messages came out of order"]
    return []


def _not_held_for_permission(probe: Probe, asker: Prompt, pair: list[Prompt]) -> list[str]:
    """A prompt answered before the work that waited for permission (``asker``'s) ended: not
    held."""
    idle = work_ended(probe, asker)
    early = []
    for n, prompt in enumerate(pair, 1):
        answer = reply(probe, prompt.id)
        if answer is not None and (idle is None or answer.index < idle.index):
            early.append(
                f"prompt {n} sent while a work waited for permission answered {describe_reply(answer)} "
                "before that work's idle: not held"
            )
    return early


def _describe_answers(probe: Probe, prompts: list[Prompt]) -> str:
    said = []
    for n, prompt in enumerate(prompts, 1):
        answer = reply(probe, prompt.id)
        said.append(f"prompt {n}: {describe_reply(answer) if answer is not None else 'no answer'}")
    return ", ".join(said)
