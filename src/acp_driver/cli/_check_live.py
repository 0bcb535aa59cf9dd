"""Rules from what users of real agents reported, about a session that lives on around a cancel:

- **A cancel after a resume.** ``session/load`` or ``session/resume`` of a session whose prompt is
  running must not detach the running turn from the session: a ``session/cancel`` sent after it
  still interrupts the prompt (zed-industries/codex-acp#186: the cancel went to the resumed
  session's new state, the old turn ran on).
- **No second stop reason.** A turn ends once. A cancelled turn's late ``end_turn`` must not
  answer (v1) or end (v2) the next prompt (agentclientprotocol/claude-agent-acp#551: the next
  prompt was answered at once with the cancelled turn's stop reason, and its own work came after
  the answer).

Each is audited in both versions, by the version's own reading of the wire: v1 by the prompt's
answer, v2 by the span's ``state_update``s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from .. import protocol as p
from ._check_rules import FAIL, MUST, NA, PASS, SKIP, CheckResult
from ._check_spans import (
    BUSY_STATES,
    STRAGGLERS,
    Prompt,
    Seen,
    describe_idle,
    describe_reply,
    end_of,
    reply,
    send_prompt,
    settle,
    state_of,
    states,
    stop_of,
    updates,
    wait_busy_v2,
    wait_end,
    wire_turns,
    work_ended,
)
from ._check_turns import describe, ms, outcome, start_prompt, stop_reason, wait_busy
from ._probe import Probe, update_kind
from ._text import excerpt

RESUMED_CANCEL_RULE = (
    "session/cancel after session/load or session/resume of the live session ends the prompt cancelled"
)
RESUMED_CANCEL_RULE_V2 = (
    "session/cancel after session/resume of the live session ends its work with idle cancelled"
)
SECOND_STOP_RULE = "a cancelled turn's late stop reason never answers the next prompt"
SECOND_STOP_RULE_V2 = "one idle per span: a cancelled work's late stop reason never ends the next prompt"

NO_RESUME = "not applicable: the agent advertises neither loadSession nor sessionCapabilities.resume"
NO_RESUME_V2 = "not applicable: the agent does not advertise capabilities.session (session/resume)"


def _reopen_method(probe: Probe) -> str | None:
    """v1: ``session/load`` if the agent advertises ``loadSession``, else ``session/resume`` if it
    advertises ``sessionCapabilities.resume``, else None."""
    caps = probe.capabilities
    if caps.get("loadSession") is True:
        return p.SESSION_LOAD
    session_caps = caps.get("sessionCapabilities")
    if isinstance(session_caps, dict) and isinstance(session_caps.get("resume"), dict):
        return p.SESSION_RESUME
    return None


async def _reopen(opts: argparse.Namespace, probe: Probe, method: str) -> tuple[Seen | None, float]:
    """``method`` (load or resume) of the probe's live session on the same connection: its answer
    (None: none within ``--timeout``) and when it was sent."""
    assert probe.conn is not None
    ids: list[Any] = []
    sent = time.monotonic()
    params: dict[str, Any] = {"sessionId": probe.session_id, "cwd": probe.session_cwd, "mcpServers": []}
    task = asyncio.ensure_future(probe.conn.request(method, params, timeout=opts.timeout, on_sent=ids.append))
    probe.tasks.append(task)
    await asyncio.sleep(0)
    answer = await probe.wait_for(lambda: reply(probe, ids[0] if ids else None), opts.timeout)
    return answer, sent


async def check_resumed_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """v1: a busy prompt, ``session/load`` (or ``session/resume``) of its session, then
    ``session/cancel``: the prompt must still end ``cancelled``."""
    await probe.connect()
    method = _reopen_method(probe)
    if method is None:
        return [CheckResult(RESUMED_CANCEL_RULE, MUST, NA, NO_RESUME)]
    sid = await probe.ready()
    task, ids, started = await start_prompt(probe, opts.busy_prompt)
    busy = await wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(RESUMED_CANCEL_RULE, MUST, SKIP, busy)]
    answer, _sent = await _reopen(opts, probe, method)
    if task.done():
        kind, value = await outcome(probe, task, 0)
        why = f"the turn ended ({describe(kind, value)}) before {method} was answered: no verdict"
        return [CheckResult(RESUMED_CANCEL_RULE, MUST, SKIP, why)]
    if answer is not None and "error" in answer.message:
        why = f"not applicable: the agent refused {method} of a session whose prompt runs ({describe_reply(answer)})"
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return [CheckResult(RESUMED_CANCEL_RULE, MUST, NA, why)]
    said = "answered" if answer is not None else f"not answered within {opts.timeout:g} s"
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    kind, value = await outcome(probe, task, opts.timeout)
    at = probe.answered_at(ids[0]) if ids else None
    elapsed = (at if at is not None else time.monotonic()) - cancel_sent
    if kind == "result" and stop_reason(kind, value) == "cancelled":
        evidence = f"stopReason 'cancelled' {ms(elapsed)} after session/cancel ({method} of the live session {said} first)"
        return [CheckResult(RESUMED_CANCEL_RULE, MUST, PASS, evidence, elapsed)]
    what = (
        f"no answer within {opts.timeout:g} s" if kind == "timeout" else f"answered {describe(kind, value)}"
    )
    evidence = (
        f"{what} after session/cancel, sent after {method} of the live session ({said}): the cancel "
        "did not reach the running prompt"
    )
    return [CheckResult(RESUMED_CANCEL_RULE, MUST, FAIL, evidence, elapsed)]


async def check_second_stop(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """v1: a busy prompt cancelled (it must end first), then the quick prompt at once: its answer
    must be its own -- no update of it after its answer, no second answer to the cancelled one."""
    sid = await probe.ready()
    task, ids, started = await start_prompt(probe, opts.busy_prompt)
    busy = await wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(SECOND_STOP_RULE, MUST, SKIP, busy)]
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    kind, value = await outcome(probe, task, opts.timeout)
    if kind != "result":
        why = f"the cancelled turn did not end ({describe(kind, value)}): no next prompt to judge"
        return [CheckResult(SECOND_STOP_RULE, MUST, SKIP, why)]
    first = stop_reason(kind, value)
    nxt, next_ids, next_sent = await start_prompt(probe, opts.quick_prompt)
    next_kind, next_value = await outcome(probe, nxt, opts.timeout)
    if next_kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        why = f"the next prompt got no answer within {opts.timeout:g} s: no verdict"
        return [CheckResult(SECOND_STOP_RULE, MUST, SKIP, why)]
    await settle(probe, min(STRAGGLERS, opts.timeout))
    answers = [m for _at, m in probe.incoming if "method" not in m and ids and m.get("id") == ids[0]]
    late = probe.updates_after_answer(next_ids[0], sid) if next_ids else []
    problems = []
    if len(answers) > 1:
        problems.append(
            f"the cancelled prompt was answered {len(answers)} times ({excerpt(answers[-1], 120)})"
        )
    if late:
        kinds = ", ".join(sorted({str(update_kind(m)) for m in late}))
        at = probe.answered_at(next_ids[0])
        took = ms((at or next_sent) - next_sent)
        problems.append(
            f"the next prompt was answered {describe(next_kind, next_value)} {took} after it was sent, and "
            f"{len(late)} update(s) of its turn came after that answer ({kinds}): the cancelled turn's late "
            "stop reason answered it"
        )
    if problems:
        return [CheckResult(SECOND_STOP_RULE, MUST, FAIL, "; ".join(problems))]
    evidence = (
        f"the cancelled turn ended once ({first!r}); the next prompt ended {describe(next_kind, next_value)} "
        "after its own updates, none after its answer"
    )
    return [CheckResult(SECOND_STOP_RULE, MUST, PASS, evidence)]


async def check_v2_resumed_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """v2: busy work, ``session/resume`` of its session on the same connection, then
    ``session/cancel``: the work must still end with the idle ``cancelled``."""
    await probe.connect()
    if not isinstance(probe.capabilities.get("session"), dict):
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, NA, NO_RESUME_V2)]
    sid = await probe.ready()
    prompt = await send_prompt(probe, opts.busy_prompt)
    busy = await wait_busy_v2(opts, probe, prompt)
    if isinstance(busy, str):
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, SKIP, busy)]
    answer, _sent = await _reopen(opts, probe, p.SESSION_RESUME)
    ended = work_ended(probe, prompt)
    if ended is not None:
        why = f"the work ended ({describe_idle(ended)}) before session/resume was answered: no verdict"
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, SKIP, why)]
    if answer is not None and "error" in answer.message:
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        why = f"not applicable: the agent refused session/resume of a session whose work runs ({describe_reply(answer)})"
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, NA, why)]
    said = "answered" if answer is not None else f"not answered within {opts.timeout:g} s"
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    idle = await wait_end(probe, prompt, opts.timeout, after=cancel_sent)
    if idle is not None and stop_of(idle) == "cancelled":
        elapsed = idle.at - cancel_sent
        evidence = f"idle 'cancelled' {ms(elapsed)} after session/cancel (session/resume of the live session {said} first)"
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, PASS, evidence, elapsed)]
    snapshot = _idle_snapshot(probe, prompt)
    if idle is None and snapshot is not None:
        # The work may have ended while the resume was in flight: its snapshot said idle, and
        # a snapshot is never an end (the schema), so nothing tells which.
        why = (
            f"the resume's snapshot said idle ({describe_idle(snapshot)}) and no idle came after "
            "session/cancel: the work may have ended as session/resume went out; no verdict"
        )
        return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, SKIP, why)]
    what = f"no idle within {opts.timeout:g} s" if idle is None else describe_idle(idle)
    evidence = (
        f"{what} after session/cancel, sent after session/resume of the live session ({said}): the "
        "cancel did not reach the running work"
    )
    return [CheckResult(RESUMED_CANCEL_RULE_V2, MUST, FAIL, evidence)]


async def check_v2_second_stop(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """v2: busy work cancelled (its idle must come first), then the quick prompt at once: every
    idle after the cancelled one must end a span of its own (a ``running`` since the idle before
    it), and nothing of the next prompt's work may come after its idle."""
    sid = await probe.ready()
    prompt = await send_prompt(probe, opts.busy_prompt)
    busy = await wait_busy_v2(opts, probe, prompt)
    if isinstance(busy, str):
        return [CheckResult(SECOND_STOP_RULE_V2, MUST, SKIP, busy)]
    cancel_sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    cancelled = await wait_end(probe, prompt, opts.timeout, after=cancel_sent)
    if cancelled is None:
        why = f"the cancelled work did not end within {opts.timeout:g} s: no next prompt to judge"
        return [CheckResult(SECOND_STOP_RULE_V2, MUST, SKIP, why)]
    nxt = await send_prompt(probe, opts.quick_prompt)

    def next_ended() -> Seen | None:
        answer = reply(probe, nxt.id)
        if answer is None:
            return None
        return answer if "error" in answer.message else end_of(probe, nxt)

    ended = await probe.wait_for(next_ended, opts.timeout)
    if ended is None:
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        why = f"the next prompt's work did not end within {opts.timeout:g} s: no verdict"
        return [CheckResult(SECOND_STOP_RULE_V2, MUST, SKIP, why)]
    await settle(probe, min(STRAGGLERS, opts.timeout))
    problems = []
    since = cancelled
    for seen in states(probe, sid, cancelled.at):
        if seen.index <= cancelled.index:
            continue
        if state_of(seen) in BUSY_STATES:
            since = seen
        elif state_of(seen) == "idle" and stop_of(seen) is not None:  # without one: a snapshot
            if since.index <= cancelled.index or state_of(since) == "idle":
                problems.append(
                    f"a second {describe_idle(seen)} {ms(seen.at - cancelled.at)} after the idle 'cancelled', "
                    "with no running since: a stop reason of no span"
                )
            since = seen
    end = end_of(probe, nxt)
    if end is not None:
        late = [u for u in updates(probe, sid, end.at, probe.activity_kinds) if u.index > end.index]
        if late and not problems:
            problems.append(
                f"the next prompt's work went on after its {describe_idle(end)}: {len(late)} update(s) after it"
            )
    if problems:
        return [CheckResult(SECOND_STOP_RULE_V2, MUST, FAIL, "; ".join(problems))]
    return [
        CheckResult(
            SECOND_STOP_RULE_V2,
            MUST,
            PASS,
            "one idle for the cancelled work ('cancelled'), then the next prompt's span: running, its "
            "updates, one idle",
        )
    ]


def _idle_snapshot(probe: Probe, prompt: Prompt) -> Seen | None:
    """The last snapshot (a state update read while a resume was in flight) since ``prompt``,
    if it said idle."""
    turns = wire_turns(probe, prompt.session_id)
    snapshots = [s for s in states(probe, prompt.session_id, prompt.sent) if s.index in turns.snapshots]
    return snapshots[-1] if snapshots and state_of(snapshots[-1]) == "idle" else None
