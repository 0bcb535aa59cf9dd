"""The rules ``acp-driver check`` audits, one check each, with the evidence the wire gave.

Each check gets a fresh ``Probe`` (agent process or connection) and returns one ``CheckResult``
per rule it judges: PASS, FAIL, SKIP (not tested: why, and what to pass) or n/a. Latencies are
measured on the wire: from when the cancel was sent to when the agent's answer arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
from ..aio import current_request, exit_description
from ..core import ErrorCode, RequestCancelledError, RpcError
from ._check_turns import (
    BUSY_HINT,
    RACE_BOUND,
    answer_delay,
    describe,
    in_flight,
    maybe_race,
    ms,
    natural_length,
    outcome,
    refusal,
    start_prompt,
    stop_reason,
    wait_busy,
)
from ._probe import AgentGone, Probe, SetupError, update_kind
from ._text import excerpt

PASS, FAIL, SKIP, NA = "pass", "fail", "skip", "n/a"
MUST, SHOULD, MAY, INFO = "MUST", "SHOULD", "MAY", "INFO"
NOT_OVER_A_NETWORK = "not applicable over a network: the agent's process is the server's to run"

CANCEL_RULE = "session/cancel answered stopReason cancelled"
AFTER_RULE = "no turn update after the prompt response"
CANCEL_REQUEST_RULE = "$/cancel_request ends the in-flight prompt promptly"
NOTIFICATION_RULE = "no reply to any notification"
UNKNOWN_METHOD_RULE = "an unknown method is answered -32601"
IDLE_RULE = "cancel on an idle session does not poison the next turn"
PERMISSION_RULE = "cancel while a permission request is pending ends the prompt cancelled"
WITHDRAW_RULE = "agent withdraws its pending permission request on cancel ($/cancel_request)"
MALFORMED_RULE = "a malformed line does not kill the agent"
EOF_RULE = "exits after stdin EOF"

NEVER_ASKED = "not applicable: the agent never asked for permission"
IF_IT_ASKS = "; if it has a permission flow, pass a --permission-prompt that makes it ask (or a --mode that asks, or --terminal)"
"""A permission rule's evidence when the turn ended without a permission request: an agent
without a permission flow is not failed, nor left inconclusive, by the rules about one."""

BARRIER = "_acp_driver/audit_barrier"
"""The audit's request of a method nobody has (its answer: everything sent before it was read)."""

PERMISSION_HOLD = 3.0
"""How long the audit holds a permission request after the cancel, to see whether the agent
withdraws it, before answering it ``cancelled`` itself."""


@dataclass
class CheckResult:
    rule: str
    level: str
    result: str
    evidence: str
    elapsed: float = 0.0
    trace_event: int | None = None
    """With ``--trace``: the id of this verdict's event in the trace (its moments are linked there)."""
    proves: str | None = None
    """What this result proved about the agent, for the rules that depend on it (``WEDGED``,
    ``UNCANCELLABLE``): those are decided at once, skipped, naming this rule."""


WEDGED = "wedged"
"""A prompt drew no turn activity and no end within ``--timeout``, nor in ``--timeout`` after
``session/cancel``: the agent does not work on prompts at all. Every rule that needs a turn to
make progress is decided at once."""

UNCANCELLABLE = "uncancellable"
"""The work went on (or stood still) for ``--timeout`` after ``session/cancel`` without ending:
the rules that need a cancel to end the work are decided at once."""


def requests_after(probe: Probe, request_id: Any, session_id: str) -> list[dict[str, Any]]:
    """The agent's requests about ``session_id`` (a tool's file write, a terminal, a permission)
    that came after the answer to ``request_id``, in wire order (none if it was not answered)."""
    answered = next(
        (i for i, (_at, m) in enumerate(probe.incoming) if "method" not in m and m.get("id") == request_id),
        None,
    )
    return [] if answered is None else requests_since(probe, answered, session_id)


def requests_since(probe: Probe, index: int, session_id: str) -> list[dict[str, Any]]:
    """The agent's requests about ``session_id`` after the ``index``-th message it sent."""
    return [
        m
        for _at, m in probe.incoming[index + 1 :]
        if "id" in m
        and isinstance(m.get("method"), str)
        and isinstance(m.get("params"), dict)
        and m["params"].get("sessionId") == session_id
    ]


def _refused_note(reply: dict[str, Any] | None, method: str) -> str:
    if reply is None:
        return ""
    return f"; it answered {method} with {excerpt(reply, 120)}: it does not implement it"


async def check_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """session/cancel mid-turn -> stopReason cancelled; then no update of the turn after the response."""
    sid = await probe.ready()
    task, ids, started = await start_prompt(probe, opts.busy_prompt)
    busy = await wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(CANCEL_RULE, MUST, SKIP, busy), CheckResult(AFTER_RULE, MUST, SKIP, busy)]
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    when = busy.describe()
    kind, value = await outcome(probe, task, opts.timeout)
    elapsed = answer_delay(probe, ids, busy.sent)
    answered = busy.sent + elapsed
    refused = refusal(probe, busy.sent, p.SESSION_CANCEL)
    said = _refused_note(refused, p.SESSION_CANCEL)
    if kind in ("timeout", "gone"):
        what = f"no answer within {opts.timeout:g} s" if kind == "timeout" else str(value)
        failed = CheckResult(CANCEL_RULE, MUST, FAIL, f"{what} ({when}){said}", elapsed)
        if kind == "timeout":
            failed.proves = WEDGED if probe.first_activity(started) is None else UNCANCELLABLE
        return [failed, CheckResult(AFTER_RULE, MUST, SKIP, "the prompt was never answered")]
    stop = stop_reason(kind, value)
    if kind == "error":
        assert isinstance(value, RpcError)
        evidence = f"answered a JSON-RPC error {value.code} {value.message!r} instead of stopReason cancelled"
        first = CheckResult(
            CANCEL_RULE, MUST, FAIL, f"{evidence}, {ms(elapsed)} later ({when}){said}", elapsed
        )
    else:
        verdict = PASS if stop == "cancelled" else FAIL
        evidence = f"answered stopReason {stop!r} {ms(elapsed)} after session/cancel ({when}){said}"
        first = CheckResult(CANCEL_RULE, MUST, verdict, evidence, elapsed)
    await asyncio.sleep(min(1.0, opts.timeout))  # watch for stragglers
    late = probe.updates_after_answer(ids[0], sid)
    asked = requests_after(probe, ids[0], sid)
    if late or asked:
        kinds = sorted({str(update_kind(m)) for m in late})
        went_on: list[str] = [f"{len(late)} update(s) after the response: {', '.join(kinds)}"] if late else []
        if asked:
            went_on.append(
                f"{len(asked)} request(s) after it: {', '.join(sorted({str(m['method']) for m in asked}))}"
            )
        late_work = "; ".join(went_on)
        if stop == "cancelled":
            late_work = f"cancel not confirmed: the work went on after stopReason 'cancelled': {late_work}"
        second = CheckResult(AFTER_RULE, MUST, FAIL, late_work)
    else:
        second = CheckResult(AFTER_RULE, MUST, PASS, "none in the second after the response")
    if first.result == FAIL and kind == "result" and refused is None and maybe_race(probe, busy, elapsed):
        # A natural stop right after the cancel: the agent's doing, or a turn that was ending anyway?
        limit = answered - started + RACE_BOUND
        natural = await natural_length(opts, probe, sid, limit)
        flight = in_flight(probe, busy.sent, sid)
        if natural is not None:
            evidence = (
                f"the turn ended by itself (stopReason {stop!r}) {ms(elapsed)} after session/cancel{flight}, "
                f"and an uncancelled turn ends in {ms(natural)}: a race, not a verdict; {BUSY_HINT}"
            )
            first = CheckResult(CANCEL_RULE, MUST, SKIP, evidence, elapsed)
        else:
            first.evidence += f"{flight}; an uncancelled turn runs on longer ({ms(limit)})"
    return [first, second]


async def check_cancel_request(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """$/cancel_request for the busy session/prompt must end it promptly: -32800 or stopReason cancelled."""
    sid = await probe.ready()
    task, ids, started = await start_prompt(probe, opts.busy_prompt)
    busy = await wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, SKIP, busy)]
    assert probe.conn is not None
    assert ids, "on_sent runs when the request is queued"
    probe.conn.cancel_request(ids[0])
    kind, value = await outcome(probe, task, opts.timeout)
    elapsed = answer_delay(probe, ids, busy.sent)
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})  # the turn runs on: end it
    refused = refusal(probe, busy.sent, p.CANCEL_REQUEST)
    replies = [m for m in probe.replies_since(busy.sent, {ids[0]}) if "id" not in m or m["id"] is None]
    aside = (
        f"; it answered the notification with {excerpt(replies[0])}" if replies and refused is None else ""
    )
    aside += _refused_note(refused, p.CANCEL_REQUEST)
    when = busy.describe()
    if kind == "timeout":
        evidence = f"ignored: no answer within {opts.timeout:g} s, the turn runs on ({when}){aside}"
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    if kind == "gone":
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, f"{value} ({when})", elapsed)]
    if kind == "error":
        assert isinstance(value, RpcError)
        if isinstance(value, RequestCancelledError):
            evidence = f"answered -32800 {ms(elapsed)} after $/cancel_request ({when})"
            return [CheckResult(CANCEL_REQUEST_RULE, MAY, PASS, evidence, elapsed)]
        evidence = (
            f"answered error {value.code} {value.message!r} (expected -32800 or stopReason cancelled){aside}"
        )
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    stop = stop_reason(kind, value)
    if stop == "cancelled":
        evidence = f"answered stopReason 'cancelled' {ms(elapsed)} after $/cancel_request ({when})"
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, PASS, evidence, elapsed)]
    if refused is None and maybe_race(probe, busy, elapsed):
        turn = busy.sent + elapsed - started
        natural = await natural_length(opts, probe, sid, turn + RACE_BOUND)
        flight = in_flight(probe, busy.sent, sid)
        if natural is not None:
            evidence = (
                f"the turn ended by itself (stopReason {stop!r}) {ms(elapsed)} after $/cancel_request{flight}, "
                f"and an uncancelled turn ends in {ms(natural)}: a race, not a verdict; {BUSY_HINT}"
            )
            return [CheckResult(CANCEL_REQUEST_RULE, MAY, SKIP, evidence, elapsed)]
        evidence = (
            f"answered stopReason {stop!r} {ms(elapsed)} after $/cancel_request{flight}, though an uncancelled "
            f"turn runs on longer ({ms(turn + RACE_BOUND)}); expected -32800 or stopReason 'cancelled'"
        )
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    evidence = (
        f"ignored: the turn ran on to its natural end (stopReason {stop!r} {ms(elapsed)} "
        f"after $/cancel_request; {when}){aside}"
    )
    return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]


async def check_notifications(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """No message in reaction to a notification: with an id, with id null, or with no id at all.
    The barrier after them is a request of a method nobody has: answered ``-32601`` (ACP,
    extensibility: "respond with the standard Method not found error")."""
    await probe.ready()
    assert probe.conn is not None
    sent = [
        (p.SESSION_CANCEL, {"sessionId": "no-such-session"}),
        ("_acp_driver/audit_unknown", {"x": 1}),
        (p.CANCEL_REQUEST, {"requestId": 987654321}),
        ("$/audit_unknown", {}),
        (p.SESSION_UPDATE, {"sessionId": "x", "update": {}}),
    ]
    since = time.monotonic()
    for method, params in sent:
        probe.notify(method, params)
    barrier: list[Any] = []
    unknown: CheckResult
    try:
        # Everything before the barrier was read once it is answered (even with an error).
        result = await probe.until_gone(
            probe.conn.request(BARRIER, {}, timeout=opts.timeout, on_sent=barrier.append)
        )
        unknown = CheckResult(UNKNOWN_METHOD_RULE, SHOULD, FAIL, f"{BARRIER} answered {excerpt(result, 120)}")
    except RpcError as exc:
        verdict = PASS if exc.code == ErrorCode.METHOD_NOT_FOUND else FAIL
        unknown = CheckResult(
            UNKNOWN_METHOD_RULE, SHOULD, verdict, f"{BARRIER} answered {exc.code} {exc.message!r}"
        )
    except TimeoutError:
        unknown = CheckResult(
            UNKNOWN_METHOD_RULE, SHOULD, FAIL, f"{BARRIER} got no answer within {opts.timeout:g} s"
        )
    await asyncio.sleep(0.3)  # replies handled out of order still arrive
    replies = probe.replies_since(since, set(barrier))
    if replies:
        idless = sum(1 for m in replies if "id" not in m)
        how = f" ({idless} without an id)" if idless else ""
        evidence = (
            f"{len(replies)} reply(ies) to {len(sent)} notifications{how}, e.g. {excerpt(replies[0], 120)}"
        )
        return [CheckResult(NOTIFICATION_RULE, MUST, FAIL, evidence), unknown]
    evidence = f"{len(sent)} notifications (known, unknown, $/...) drew no reply"
    return [CheckResult(NOTIFICATION_RULE, MUST, PASS, evidence), unknown]


async def check_idle_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """session/cancel on an idle session, then a quick prompt: it must be answered normally. A
    next turn that times out or fails is judged only against a control turn on a fresh session
    (never cancelled): if that one is answered in time, the cancel poisoned the session; if not,
    the quick prompt is not answered at all and the rule is skipped."""
    sid = await probe.ready()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await asyncio.sleep(0.1)
    task, _ids, _started = await start_prompt(probe, opts.quick_prompt)
    kind, value = await outcome(probe, task, opts.timeout)
    if kind == "gone":
        return [CheckResult(IDLE_RULE, MUST, FAIL, f"during the next turn: {value}")]
    stop = stop_reason(kind, value)
    if stop == "cancelled":
        evidence = "the next turn ended cancelled: the idle cancel poisoned it"
        return [CheckResult(IDLE_RULE, MUST, FAIL, evidence)]
    if kind == "result":
        return [CheckResult(IDLE_RULE, MUST, PASS, f"the next turn ended normally ({stop})")]
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        what = f"the next turn got no answer within {opts.timeout:g} s"
    else:
        what = f"the next turn failed ({describe(kind, value)})"
    control_kind, control_value, took = await _control_turn(opts, probe)
    if control_kind == "result" and stop_reason(control_kind, control_value) != "cancelled":
        evidence = (
            f"{what}, while a control turn on a fresh session, never cancelled, ended "
            f"{describe(control_kind, control_value)} in {ms(took)}: the idle cancel poisoned the session"
        )
        return [CheckResult(IDLE_RULE, MUST, FAIL, evidence)]
    evidence = (
        f"{what}, and so did a control turn on a fresh session, never cancelled "
        f"({describe(control_kind, control_value)}): the quick prompt is not answered at all, "
        "no verdict; pass a --quick-prompt the agent answers within --timeout"
    )
    return [CheckResult(IDLE_RULE, MUST, SKIP, evidence)]


async def _control_turn(opts: argparse.Namespace, probe: Probe) -> tuple[str, Any, float]:
    """The quick prompt on a fresh session of the same agent; how it ended and how long it took."""
    try:
        sid = await probe.new_session()
    except SetupError as exc:  # a control that cannot run decides nothing
        return (
            "error",
            RpcError(ErrorCode.INTERNAL_ERROR, f"no fresh session for the control turn: {exc}"),
            0.0,
        )
    task, _ids, started = await start_prompt(probe, opts.quick_prompt)
    kind, value = await outcome(probe, task, opts.timeout)
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    return kind, value, time.monotonic() - started


async def check_permission(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """Cancel while a permission request is pending: the prompt must end cancelled (MUST), and
    the agent may withdraw its request with $/cancel_request (INFO). The audit holds the request
    up to ``PERMISSION_HOLD`` after the cancel (less if the prompt is answered or the request
    withdrawn first), then answers it ``cancelled``; every latency is taken off the wire."""
    arrived = asyncio.Event()
    withdrawn = asyncio.Event()
    release = asyncio.Event()
    asked: list[Any] = []

    async def hold(params: Any) -> Any:
        ctx = current_request()
        asked.append(ctx.id if ctx is not None else None)
        arrived.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            if ctx is not None and ctx.cancel_requested:
                withdrawn.set()
            raise
        return {"outcome": {"outcome": "cancelled"}}

    probe.permission_handler = hold
    sid = await probe.ready()
    task, ids, _started = await start_prompt(probe, opts.permission_prompt)
    if not await _first(probe, task, arrived, opts.timeout):
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        if task.done():
            kind, value = await outcome(probe, task, 0)
            why = f"{NEVER_ASKED} (the turn ended {describe(kind, value)} without asking){IF_IT_ASKS}"
            return [CheckResult(PERMISSION_RULE, MUST, NA, why), CheckResult(WITHDRAW_RULE, INFO, NA, why)]
        if probe.peer_gone.is_set():
            why = await probe.gone_reason_after_exit()
        else:
            why = f"no permission request within {opts.timeout:g} s"
        why += " (pass a --permission-prompt that makes it ask, or a --mode that asks, or --terminal)"
        return [CheckResult(PERMISSION_RULE, MUST, SKIP, why), CheckResult(WITHDRAW_RULE, INFO, SKIP, why)]
    sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await _first(probe, task, withdrawn, min(opts.timeout, PERMISSION_HOLD))
    released = time.monotonic()
    release.set()  # the client answers "cancelled" if it is still pending (spec: MUST)
    withdrawal = probe.arrived_at(p.CANCEL_REQUEST, sent, requestId=asked[0]) if withdrawn.is_set() else None
    if withdrawal is not None:
        second = CheckResult(
            WITHDRAW_RULE, INFO, PASS, f"$/cancel_request for it {ms(withdrawal - sent)} after the cancel"
        )
    else:
        second = CheckResult(WITHDRAW_RULE, INFO, FAIL, "not withdrawn; the client answered it cancelled")
    kind, value = await outcome(probe, task, opts.timeout)
    delay = answer_delay(probe, ids, sent)
    since, cause = sent, "session/cancel"
    if withdrawal is not None:
        how = "permission withdrawn by the agent"
    elif delay < released - sent:
        how = f"permission still pending when the prompt was answered; the audit then answered it cancelled {ms(released - sent)} after the cancel"
    else:  # the agent waited for the answer to its request: its latency counts from that answer
        since, cause = released, "the audit answered the permission request cancelled"
        how = f"the audit held it {ms(released - sent)} after session/cancel, waiting for a withdrawal"
    elapsed = sent + delay - since
    if kind == "result" and stop_reason(kind, value) == "cancelled":
        evidence = f"stopReason 'cancelled' {ms(elapsed)} after {cause} ({how})"
        first = CheckResult(PERMISSION_RULE, MUST, PASS, evidence, elapsed)
    else:
        what = (
            f"no answer within {opts.timeout:g} s"
            if kind == "timeout"
            else f"answered {describe(kind, value)}"
        )
        evidence = f"{what} {ms(elapsed)} after {cause} ({how}); expected stopReason 'cancelled'"
        first = CheckResult(PERMISSION_RULE, MUST, FAIL, evidence, elapsed)
    return [first, second]


async def _first(probe: Probe, task: asyncio.Task[Any], event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event``, the prompt's answer, the agent gone or ``timeout``: whether ``event``."""
    waited = asyncio.ensure_future(event.wait())
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        await asyncio.wait({waited, task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waited.cancel()
        gone.cancel()
    return event.is_set()


async def check_malformed(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    await probe.ready()
    assert probe.conn is not None
    since = time.monotonic()
    probe.conn.send_raw(b"this is not json")
    try:
        await probe.request(p.SESSION_NEW, {"cwd": probe.session_cwd, "mcpServers": []})
    except (RpcError, TimeoutError, AgentGone) as exc:
        if probe.process is None:  # a remote agent
            return [CheckResult(MALFORMED_RULE, SHOULD, FAIL, f"after the malformed message: {exc}")]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await probe.process.wait()
        status = exit_description(probe.process.returncode)
        return [CheckResult(MALFORMED_RULE, SHOULD, FAIL, f"after the malformed line: {exc} ({status})")]
    parse_errors = [
        m
        for m in probe.replies_since(since, set())
        if m.get("id") is None and isinstance(m.get("error"), dict) and m["error"].get("code") == -32700
    ]
    if parse_errors:
        shape = "with id null" if "id" in parse_errors[0] else "without an id"
        evidence = f"answered -32700 ({shape}) and kept working"
    else:
        evidence = "kept working (no parse-error reply)"
    return [CheckResult(MALFORMED_RULE, SHOULD, PASS, evidence)]


async def check_eof(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    if probe.url is not None:
        return [CheckResult(EOF_RULE, SHOULD, NA, NOT_OVER_A_NETWORK)]
    await probe.ready()
    assert probe.process is not None
    assert probe.conn is not None
    sent = time.monotonic()
    probe.conn.close_write()
    try:
        async with asyncio.timeout(opts.timeout):
            code = await probe.process.wait()
    except TimeoutError:
        probe.process.kill()
        evidence = f"still running {opts.timeout:g} s after stdin closed; the audit killed its process group"
        return [CheckResult(EOF_RULE, SHOULD, FAIL, evidence)]
    return [
        CheckResult(
            EOF_RULE, SHOULD, PASS, f"{exit_description(code)} {ms(time.monotonic() - sent)} after EOF"
        )
    ]


@dataclass(frozen=True)
class Check:
    run: Callable[[argparse.Namespace, Probe], Awaitable[list[CheckResult]]]
    rules: tuple[tuple[str, str], ...]
    """(rule, level) of every result ``run`` returns: for a check that could not run."""
    title: str = ""
    """What the check does, for the progress line ("session/cancel mid-turn")."""
    unless: str | None = None
    """``WEDGED`` or ``UNCANCELLABLE``: the check is not run (its rules are skipped at once) when
    the first check proved that about the agent."""


NOTIFICATIONS_CHECK = Check(
    check_notifications,
    ((NOTIFICATION_RULE, MUST), (UNKNOWN_METHOD_RULE, SHOULD)),
    "notifications and an unknown method",
)
MALFORMED_CHECK = Check(check_malformed, ((MALFORMED_RULE, SHOULD),), "a malformed line")
EOF_CHECK = Check(check_eof, ((EOF_RULE, SHOULD),), "stdin EOF")
"""The checks that hold in both versions (the same code)."""
