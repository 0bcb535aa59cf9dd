"""The v2 rules about a session's requests and its end: a permission request pending at the
cancel, ``session/close``, ``session/resume`` (see ``_check_v2`` for the prompt lifecycle).

- **Permissions** (the newer schema, ``CancelSessionNotification``): the agent "MUST stop waiting
  for pending session/request_permission requests of the cancelled work and treat them as not
  approved. It SHOULD cancel each of them with ``$/cancel_request``"; ``RequestPermissionOutcome``:
  "Agents MUST NOT proceed with the operation". The client answers a withdrawn request with the
  ``cancelled`` outcome; the audit does, at once, and answers a request still pending after its
  hold the same way. ``requires_action`` while blocked on the request is a SHOULD (``StateUpdate``).
- **Close** (``CloseSessionRequest``): cancels like ``session/cancel``; "the Agent MUST send the
  final updates for that work and the idle state_update with stopReason cancelled before
  responding"; "After the close response, the Agent sends no other messages for the session";
  closing a session that does not exist "SHOULD succeed" (``-32002`` counts as success).
- **Resume** (``ResumeSessionResponse``): "MUST send a current state_update after any requested
  history replay and before this response"; a snapshot reports the state after resuming and is
  never a completion (``IdleStateUpdate``): resumed while its work runs, it says so.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from .. import protocol as p
from ..aio import current_request
from ..core import RpcError
from ._check_rules import (
    FAIL,
    IF_IT_ASKS_V2,
    MUST,
    NA,
    NEVER_ASKED,
    PASS,
    PERMISSION_HOLD,
    SHOULD,
    SKIP,
    CheckResult,
)
from ._check_spans import (
    BUSY_STATES,
    STRAGGLERS,
    Seen,
    describe_idle,
    describe_reply,
    error_code,
    send_prompt,
    settle,
    state_of,
    states,
    stop_of,
    updates,
    wait_busy_v2,
    wait_end,
    wait_reply,
    work_ended,
)
from ._check_turns import BUSY_HINT, ms
from ._probe import Probe

V2_PERMISSION_RULE = (
    "cancel while a permission request is pending: idle cancelled, without waiting, the operation not run"
)
V2_WITHDRAW_RULE = "agent withdraws its pending permission request on cancel ($/cancel_request)"
REQUIRES_ACTION_RULE = "requires_action reported while a permission request waits"
CLOSE_RULE = "session/close during work: idle cancelled before its answer"
CLOSE_AFTER_RULE = "nothing of the session after the session/close answer"
CLOSE_UNKNOWN_RULE = "session/close of an unknown session succeeds ({} or -32002)"
RESUME_RULE = "session/resume sends a state snapshot after its replay, before its answer"
RESUME_RUNNING_RULE = "a resume snapshot while work runs says so (a snapshot is never a completion)"

CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}
REQUIRES_ACTION_WAIT = 0.2
"""How long after its permission request the audit waits for a ``requires_action`` to arrive."""
NO_SESSION_CAPS = "the agent does not advertise capabilities.session (the baseline session methods)"
UNKNOWN_SESSION = "acp-driver-check-no-such-session"


def _tool_call_of(params: Any) -> str | None:
    """The tool call a permission request is about (its subject), if it names one."""
    subject = params.get("subject") if isinstance(params, dict) else None
    if not isinstance(subject, dict):
        return None
    call = subject.get("toolCall")
    found = call.get("toolCallId") if isinstance(call, dict) else subject.get("toolCallId")
    return found if isinstance(found, str) else None


async def check_v2_permission(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """Cancel while the agent's permission request is pending: the idle ``cancelled`` without
    waiting for the answer, the operation not run (MUST); the request withdrawn (SHOULD);
    ``requires_action`` while it waited (SHOULD)."""
    arrived = asyncio.Event()
    withdrawn = asyncio.Event()
    release = asyncio.Event()
    asked: list[tuple[Any, float, Any]] = []

    async def hold(params: Any) -> Any:
        ctx = current_request()
        asked.append((ctx.id if ctx is not None else None, time.monotonic(), params))
        arrived.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            if ctx is not None and ctx.cancel_requested:
                withdrawn.set()
                return CANCELLED_OUTCOME  # the newer schema: a withdrawn request gets the outcome
            raise
        return CANCELLED_OUTCOME

    probe.permission_handler = hold
    sid = await probe.ready()
    prompt = await send_prompt(probe, opts.permission_prompt)
    rules = ((V2_PERMISSION_RULE, MUST), (V2_WITHDRAW_RULE, SHOULD), (REQUIRES_ACTION_RULE, SHOULD))
    got = await probe.wait_for(
        lambda: "asked" if arrived.is_set() else ("ended" if work_ended(probe, prompt) else None),
        opts.timeout,
    )
    if got != "asked":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        idle = work_ended(probe, prompt)
        if idle is not None:
            why = f"{NEVER_ASKED} (the work ended, {describe_idle(idle)}, without asking){IF_IT_ASKS_V2}"
            return [CheckResult(rule, level, NA, why) for rule, level in rules]
        why = f"no permission request within {opts.timeout:g} s (pass a --permission-prompt that makes it ask, or a --mode that asks)"
        return [CheckResult(rule, level, SKIP, why) for rule, level in rules]
    request_id, asked_at, params = asked[0]

    def requires_action() -> Seen | None:
        return next((s for s in states(probe, sid, prompt.sent) if state_of(s) == "requires_action"), None)

    action = await probe.wait_for(requires_action, REQUIRES_ACTION_WAIT)
    sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await probe.wait_for(
        lambda: "over" if withdrawn.is_set() or work_ended(probe, prompt, after=sent) else None,
        min(opts.timeout, PERMISSION_HOLD),
    )
    released = time.monotonic()
    release.set()  # still pending: the audit answers it cancelled (the client MAY)
    idle = await wait_end(probe, prompt, opts.timeout, after=sent)
    await settle(probe, min(STRAGGLERS, opts.timeout))
    withdrawal = (
        probe.arrived_at(p.CANCEL_REQUEST, sent, requestId=request_id) if withdrawn.is_set() else None
    )
    if withdrawal is not None:
        withdraw = CheckResult(
            V2_WITHDRAW_RULE,
            SHOULD,
            PASS,
            f"$/cancel_request for it {ms(withdrawal - sent)} after the cancel",
        )
    else:
        withdraw = CheckResult(
            V2_WITHDRAW_RULE,
            SHOULD,
            FAIL,
            f"not withdrawn; the audit answered it cancelled {ms(released - sent)} after the cancel",
        )
    if action is not None:
        place = "before" if action.at <= asked_at else "after"
        required = CheckResult(
            REQUIRES_ACTION_RULE,
            SHOULD,
            PASS,
            f"requires_action {ms(abs(asked_at - action.at))} {place} the permission request",
        )
    else:
        required = CheckResult(
            REQUIRES_ACTION_RULE, SHOULD, FAIL, "no requires_action while the permission request waited"
        )
    return [_permission_verdict(opts, probe, params, sent, released, withdrawal, idle), withdraw, required]


def _permission_verdict(
    opts: argparse.Namespace,
    probe: Probe,
    params: Any,
    sent: float,
    released: float,
    withdrawal: float | None,
    idle: Seen | None,
) -> CheckResult:
    assert probe.session_id is not None
    call = _tool_call_of(params)
    ran = [
        s
        for s in updates(probe, probe.session_id, sent, ("tool_call_update",))
        if call is not None
        and s.update.get("toolCallId") == call
        and s.update.get("status") in ("in_progress", "completed")
    ]
    if idle is None:
        return CheckResult(
            V2_PERMISSION_RULE,
            MUST,
            FAIL,
            f"no idle within {opts.timeout:g} s after session/cancel",
        )
    elapsed = idle.at - sent
    if withdrawal is not None:
        how = "permission withdrawn by the agent"
    elif idle.at < released:
        how = f"the permission still pending at the idle; the audit then answered it cancelled {ms(released - sent)} after the cancel"
    else:
        how = f"not withdrawn; the audit held it {ms(released - sent)} after session/cancel, then answered it cancelled"
    problems = []
    if stop_of(idle) != "cancelled":
        problems.append(
            f"{describe_idle(idle)} {ms(elapsed)} after session/cancel ({how}); expected 'cancelled'"
        )
    elif withdrawal is None and idle.at >= released:
        problems.append(
            f"idle 'cancelled' only {ms(idle.at - released)} after the audit answered its permission request ({how}): "
            "it waited for the answer, where the agent MUST stop waiting"
        )
    if ran:
        problems.append(
            f"the operation went on after the cancel: tool_call_update {call} status "
            f"{ran[0].update.get('status')!r} {ms(ran[0].at - sent)} after it"
        )
    if problems:
        return CheckResult(V2_PERMISSION_RULE, MUST, FAIL, "; ".join(problems), elapsed)
    return CheckResult(
        V2_PERMISSION_RULE,
        MUST,
        PASS,
        f"idle 'cancelled' {ms(elapsed)} after session/cancel ({how})",
        elapsed,
    )


def _session_caps(probe: Probe) -> bool:
    return isinstance(probe.capabilities.get("session"), dict)


async def check_v2_close(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """``session/close`` while work runs: the idle ``cancelled`` before its answer (MUST), nothing
    of the session after it (MUST); closing an unknown session succeeds (SHOULD)."""
    await probe.connect()
    if not _session_caps(probe):
        return [
            CheckResult(CLOSE_RULE, MUST, NA, NO_SESSION_CAPS),
            CheckResult(CLOSE_AFTER_RULE, MUST, NA, NO_SESSION_CAPS),
            CheckResult(CLOSE_UNKNOWN_RULE, SHOULD, NA, NO_SESSION_CAPS),
        ]
    sid = await probe.ready()
    prompt = await send_prompt(probe, opts.busy_prompt)
    busy = await wait_busy_v2(opts, probe, prompt)
    unknown = await _close_unknown(opts, probe)
    if isinstance(busy, str):
        return [
            CheckResult(CLOSE_RULE, MUST, SKIP, busy),
            CheckResult(CLOSE_AFTER_RULE, MUST, SKIP, busy),
            unknown,
        ]
    ids: list[Any] = []
    assert probe.conn is not None
    sent = time.monotonic()
    task = asyncio.ensure_future(
        probe.conn.request(p.SESSION_CLOSE, {"sessionId": sid}, timeout=opts.timeout, on_sent=ids.append)
    )
    probe.tasks.append(task)
    await asyncio.sleep(0)
    answer = await wait_reply(probe, ids[0] if ids else None, opts.timeout)
    if answer is None:
        why = f"no answer within {opts.timeout:g} s"
        return [
            CheckResult(CLOSE_RULE, MUST, FAIL, why),
            CheckResult(CLOSE_AFTER_RULE, MUST, SKIP, why),
            unknown,
        ]
    await settle(probe, min(STRAGGLERS, opts.timeout))
    before = work_ended(probe, prompt)
    if before is not None and before.at <= sent:
        why = f"the work ended ({describe_idle(before)}) before session/close could be sent; {BUSY_HINT}"
        return [
            CheckResult(CLOSE_RULE, MUST, SKIP, why),
            CheckResult(CLOSE_AFTER_RULE, MUST, SKIP, why),
            unknown,
        ]
    elapsed = answer.at - sent
    idle = work_ended(probe, prompt, after=sent)
    if "error" in answer.message:
        what = f"answered {describe_reply(answer)} {ms(elapsed)} after session/close"
        close = CheckResult(CLOSE_RULE, MUST, FAIL, what, elapsed)
    elif idle is None or idle.index > answer.index:
        after = f"; {describe_idle(idle)} came {ms(idle.at - answer.at)} after it" if idle is not None else ""
        what = f"answered {describe_reply(answer)} {ms(elapsed)} after session/close with no idle before it{after}"
        close = CheckResult(CLOSE_RULE, MUST, FAIL, what, elapsed)
    elif stop_of(idle) != "cancelled":
        what = f"{describe_idle(idle)} {ms(idle.at - sent)} after session/close, before its answer; expected 'cancelled'"
        close = CheckResult(CLOSE_RULE, MUST, FAIL, what, elapsed)
    else:
        what = f"idle 'cancelled' {ms(idle.at - sent)} after session/close, then its answer {ms(elapsed)} after it"
        close = CheckResult(CLOSE_RULE, MUST, PASS, what, elapsed)
    late = [
        m
        for i, (_at, m) in enumerate(probe.incoming)
        if i > answer.index and isinstance(m.get("params"), dict) and m["params"].get("sessionId") == sid
    ]
    if late:
        kinds = sorted({str(m.get("method")) + (f" {k}" if (k := _kind(m)) else "") for m in late})
        quiet = CheckResult(
            CLOSE_AFTER_RULE,
            MUST,
            FAIL,
            f"{len(late)} message(s) of the closed session after the answer: {', '.join(kinds)}",
        )
    else:
        quiet = CheckResult(
            CLOSE_AFTER_RULE, MUST, PASS, "nothing of the session in the second after the answer"
        )
    return [close, quiet, unknown]


def _kind(message: dict[str, Any]) -> str:
    update = message["params"].get("update")
    return str(update.get("sessionUpdate")) if isinstance(update, dict) else ""


async def _close_unknown(opts: argparse.Namespace, probe: Probe) -> CheckResult:
    try:
        result = await probe.request(p.SESSION_CLOSE, {"sessionId": UNKNOWN_SESSION})
    except RpcError as exc:
        if exc.code == p.RESOURCE_NOT_FOUND:
            return CheckResult(
                CLOSE_UNKNOWN_RULE, SHOULD, PASS, "answered -32002 (resource not found): a success"
            )
        return CheckResult(CLOSE_UNKNOWN_RULE, SHOULD, FAIL, f"answered error {exc.code} {exc.message!r}")
    except TimeoutError:
        return CheckResult(CLOSE_UNKNOWN_RULE, SHOULD, FAIL, f"no answer within {opts.timeout:g} s")
    return CheckResult(
        CLOSE_UNKNOWN_RULE, SHOULD, PASS, f"answered {describe_reply(Seen(0, 0.0, {'result': result}))}"
    )


async def _resume(opts: argparse.Namespace, probe: Probe, replay: bool) -> tuple[Seen | None, float, str]:
    """``session/resume`` of the probe's session (``replayFrom: start`` when ``replay``; again
    without it if the agent rejects the cursor with ``-32602``): its answer, when it was sent,
    and a note for the evidence."""
    assert probe.conn is not None
    assert probe.session_id is not None
    note = ""
    params: dict[str, Any] = {"sessionId": probe.session_id, "cwd": probe.session_cwd, "mcpServers": []}
    if replay:
        params["replayFrom"] = {"type": "start"}
    while True:
        ids: list[Any] = []
        sent = time.monotonic()
        task = asyncio.ensure_future(
            probe.conn.request(p.SESSION_RESUME, params, timeout=opts.timeout, on_sent=ids.append)
        )
        probe.tasks.append(task)
        await asyncio.sleep(0)
        answer = await wait_reply(probe, ids[0] if ids else None, opts.timeout)
        if "replayFrom" in params and error_code(answer) == -32602:
            del params["replayFrom"]
            note = " (replayFrom start refused -32602: resumed without replay)"
            continue
        return answer, sent, note


def _snapshot(probe: Probe, sent: float, answer: Seen) -> tuple[Seen | None, list[Seen]]:
    """The last ``state_update`` before the answer, and every other update of the session
    between the request and the answer (the replay), in wire order."""
    assert probe.session_id is not None
    between = [s for s in updates(probe, probe.session_id, sent) if s.index < answer.index]
    snapshots = [s for s in between if s.kind == "state_update"]
    return (snapshots[-1] if snapshots else None), [s for s in between if s.kind != "state_update"]


async def check_v2_resume(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """``session/resume`` (with replay) after a turn: its replay, then a state snapshot, then its
    answer (MUST); resumed while work runs, the snapshot says the work runs, and the work still
    ends by its own idle (a snapshot is never a completion)."""
    await probe.connect()
    if not _session_caps(probe):
        return [
            CheckResult(RESUME_RULE, MUST, NA, NO_SESSION_CAPS),
            CheckResult(RESUME_RUNNING_RULE, MUST, NA, NO_SESSION_CAPS),
        ]
    sid = await probe.ready()
    quick = await send_prompt(probe, opts.quick_prompt)
    await wait_end(probe, quick, opts.timeout)
    answer, sent, note = await _resume(opts, probe, replay=True)
    first = _resume_verdict(opts, probe, answer, sent, note)
    busy_prompt = await send_prompt(probe, opts.busy_prompt)
    busy = await wait_busy_v2(opts, probe, busy_prompt)
    if isinstance(busy, str):
        return [first, CheckResult(RESUME_RUNNING_RULE, MUST, SKIP, busy)]
    answer, sent, _note = await _resume(opts, probe, replay=False)
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    idle = await wait_end(probe, busy_prompt, opts.timeout, after=cancel_sent)
    if answer is None or "error" in answer.message:
        what = "no answer" if answer is None else describe_reply(answer)
        why = f"resuming the session while its work ran was refused ({what}): no verdict"
        return [first, CheckResult(RESUME_RUNNING_RULE, MUST, SKIP, why)]
    before = work_ended(probe, busy_prompt)
    if before is not None and before.at <= sent:
        why = f"the work ended ({describe_idle(before)}) before session/resume could be sent; {BUSY_HINT}"
        return [first, CheckResult(RESUME_RUNNING_RULE, MUST, SKIP, why)]
    snapshot, _replay = _snapshot(probe, sent, answer)
    if snapshot is None:
        return [first, CheckResult(RESUME_RUNNING_RULE, MUST, FAIL, "no state snapshot before the answer")]
    ended = (
        f"; the work then ended by its own {describe_idle(idle)} {ms(idle.at - cancel_sent)} after session/cancel"
        if idle
        else ""
    )
    if state_of(snapshot) not in BUSY_STATES:
        # Was the work still running? Its updates after the snapshot, or an idle of its own after it.
        after = [
            u for u in updates(probe, sid, snapshot.at, probe.activity_kinds) if u.index > snapshot.index
        ]
        own_end = idle is not None and idle.index > snapshot.index and stop_of(idle) is not None
        if not after and not own_end:
            why = (
                f"the snapshot said {state_of(snapshot)!r} and nothing of the work came after it: it may have "
                "ended as session/resume went out; no verdict"
            )
            return [first, CheckResult(RESUME_RUNNING_RULE, MUST, SKIP, why)]
        went_on = (
            f" while the work went on ({len(after)} update(s) of it after)"
            if after
            else " while the work ran"
        )
        what = f"the snapshot said {state_of(snapshot)!r}{went_on}: a host would take it for the work's end{ended}"
        return [first, CheckResult(RESUME_RUNNING_RULE, MUST, FAIL, what)]
    what = f"the snapshot said {state_of(snapshot)!r} {ms(snapshot.at - sent)} after session/resume{ended}"
    return [first, CheckResult(RESUME_RUNNING_RULE, MUST, PASS, what)]


def _resume_verdict(
    opts: argparse.Namespace, probe: Probe, answer: Seen | None, sent: float, note: str
) -> CheckResult:
    if answer is None:
        return CheckResult(
            RESUME_RULE, MUST, FAIL, f"session/resume: no answer within {opts.timeout:g} s{note}"
        )
    if "error" in answer.message:
        return CheckResult(RESUME_RULE, MUST, FAIL, f"session/resume answered {describe_reply(answer)}{note}")
    snapshot, replay = _snapshot(probe, sent, answer)
    elapsed = answer.at - sent
    if snapshot is None:
        what = (
            f"no state_update between session/resume and its answer ({len(replay)} replayed update(s)){note}"
        )
        return CheckResult(RESUME_RULE, MUST, FAIL, what, elapsed)
    after = [s for s in replay if s.index > snapshot.index]
    if after:
        what = f"the snapshot came before {len(after)} replayed update(s) ({after[0].kind} after it){note}"
        return CheckResult(RESUME_RULE, MUST, FAIL, what, elapsed)
    stop = f" {stop_of(snapshot)!r}" if stop_of(snapshot) else ""
    what = (
        f"{len(replay)} replayed update(s), then state_update {state_of(snapshot)!r}{stop}, then the answer "
        f"{ms(elapsed)} after session/resume{note}"
    )
    return CheckResult(RESUME_RULE, MUST, PASS, what, elapsed)
