"""The audit's turns: prompting, waiting until a turn is busy, reading how it ended, and telling
what the wire says about a cancel -- a race, a refusal, or the agent's answer.

- **Busy.** A cancel goes out only after the turn's first *turn* activity (see
  ``_probe.TURN_ACTIVITY``), or ``--busy-after``, or at ``--timeout``.
- **A race is not a verdict.** A turn that stops with another reason than ``cancelled`` within
  ``RACE_BOUND`` of the cancel, with no turn activity after the cancel, may have been ending
  anyway. An update that arrives within ``IN_FLIGHT`` of the cancel is not activity after it:
  it may have been written before the agent could read the cancel (in flight). A control turn
  (the same busy prompt, uncancelled) decides: if it ends as soon, the cancel was a race; if it
  runs on, the stop was the agent's answer to the cancel.
- **A refusal is a verdict.** An agent that answers the cancel notification with a JSON-RPC
  error saying it does not know the method (``-32601``, or ``-32603`` naming an unknown method)
  has said on the wire that it does not implement the cancel: no control turn can excuse that.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
from ..core import ErrorCode, RpcError
from ._probe import AgentGone, Probe

BUSY_HINT = "pass a --busy-prompt that keeps the agent busy longer"

RACE_BOUND = 1.0
"""A turn that stops this soon after a cancel may have been ending anyway (see the docstring)."""

IN_FLIGHT = 0.02
"""Updates that arrive this soon after the cancel was sent may have been on their way already."""

UNKNOWN_METHOD_WORDS = ("unknown method", "method not found", "not found", "unknown")


async def start_prompt(probe: Probe, text: str) -> tuple[asyncio.Task[Any], list[Any], float]:
    """Send ``session/prompt`` on the probe's session; its task, its id (once sent), when."""
    ids: list[Any] = []
    assert probe.conn is not None
    probe.activity.clear()
    started = time.monotonic()
    task = asyncio.get_running_loop().create_task(
        probe.conn.request(
            p.SESSION_PROMPT,
            {"sessionId": probe.session_id, "prompt": [{"type": "text", "text": text}]},
            on_sent=ids.append,
        )
    )
    probe.tasks.append(task)
    await asyncio.sleep(0)
    return task, ids, started


@dataclass
class Busy:
    """When the cancel went out, relative to the turn."""

    sent: float
    started: float
    first: tuple[float, str] | None
    reason: str

    def describe(self) -> str:
        into = ms(self.sent - self.started)
        if self.first is not None:
            at, kind = self.first
            return (
                f"cancel sent {ms(self.sent - at)} after the first turn activity ({kind}, "
                f"{ms(at - self.started)} into the turn)"
            )
        if self.reason == "busy-after":
            return f"cancel sent {into} into the turn (--busy-after), before any turn activity"
        return (
            f"cancel sent {into} into the turn with no turn activity yet (a silent agent: see --busy-after)"
        )


async def wait_busy(
    opts: argparse.Namespace, probe: Probe, task: asyncio.Task[Any], started: float
) -> Busy | str:
    """Wait until the turn is busy: its first turn activity, or ``--busy-after``, or ``--timeout``.

    Returns when to cancel, or (a string) why the turn ended first.
    """
    bound = opts.timeout if opts.busy_after is None else min(opts.busy_after, opts.timeout)
    remaining = started + bound - time.monotonic()
    busy = asyncio.ensure_future(probe.activity.wait())
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        await asyncio.wait({busy, gone, task}, timeout=max(remaining, 0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        busy.cancel()
        gone.cancel()
    if task.done():
        kind, value = await outcome(probe, task, 0)
        return (
            f"the turn ended ({describe(kind, value)}) {ms(time.monotonic() - started)} after the prompt, "
            f"before the cancel could be sent; {BUSY_HINT}"
        )
    if probe.peer_gone.is_set():
        raise AgentGone(await probe.gone_reason_after_exit())
    first = probe.first_activity(started)
    reason = "activity" if first is not None else ("busy-after" if opts.busy_after is not None else "bound")
    return Busy(time.monotonic(), started, first, reason)


async def outcome(probe: Probe, task: asyncio.Task[Any], timeout: float) -> tuple[str, Any]:
    """("result", value) / ("error", RpcError) / ("timeout", None) / ("gone", reason)."""
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        if not task.done():
            await asyncio.wait({task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not task.done():
        if probe.peer_gone.is_set():
            # The answer may still be in the pipe: give the reader a moment to deliver it.
            await asyncio.wait({task}, timeout=0.2)
            if not task.done():
                return "gone", await probe.gone_reason_after_exit()
        else:
            return "timeout", None
    exc = task.exception()
    if exc is None:
        return "result", task.result()
    if isinstance(exc, RpcError):
        return "error", exc
    return "error", RpcError(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


def stop_reason(kind: str, value: Any) -> Any:
    """The stopReason of a ``result`` outcome (None for anything else)."""
    return value.get("stopReason") if kind == "result" and isinstance(value, dict) else None


def describe(kind: str, value: Any) -> str:
    if kind == "result":
        return f"stopReason {stop_reason(kind, value)!r}"
    if kind == "error":
        assert isinstance(value, RpcError)
        return f"error {value.code} {value.message!r}"
    if kind == "gone":
        return str(value)
    return "no answer"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def answer_delay(probe: Probe, ids: list[Any], sent: float) -> float:
    """How long after ``sent`` the prompt's answer arrived, off the wire (now, if it did not)."""
    at = probe.answered_at(ids[0]) if ids else None
    return (at if at is not None else time.monotonic()) - sent


def maybe_race(probe: Probe, busy: Busy, elapsed: float) -> bool:
    """The turn stopped soon after the cancel with no activity after it (but what may have been
    in flight): it may have been ending anyway."""
    return elapsed < RACE_BOUND and probe.first_activity(busy.sent + IN_FLIGHT) is None


async def natural_length(opts: argparse.Namespace, probe: Probe, sid: str, limit: float) -> float | None:
    """A control turn: the busy prompt again, uncancelled. Its length if it ends within ``limit``;
    None if it runs on (then it is cancelled, and not judged)."""
    task, _ids, started = await start_prompt(probe, opts.busy_prompt)
    kind, _value = await outcome(probe, task, min(limit, opts.timeout))
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        await outcome(probe, task, min(opts.timeout, 2.0))
        return None
    return time.monotonic() - started


def refusal(probe: Probe, since: float, method: str) -> dict[str, Any] | None:
    """The agent's error reply saying it does not know ``method`` (a notification we sent after
    ``since``): an id-less (or id null) error, ``-32601``, or ``-32603`` naming an unknown
    method or ``method`` itself. None if it sent no such reply."""
    for message in probe.replies_since(since, set()):
        if message.get("id") is not None:
            continue  # the answer to one of our requests
        error = message.get("error")
        if not isinstance(error, dict):
            continue
        code = error.get("code")
        words = f"{error.get('message', '')} {error.get('data', '')}".lower()
        if code == ErrorCode.METHOD_NOT_FOUND or (
            code == ErrorCode.INTERNAL_ERROR
            and (method.lower() in words or any(w in words for w in UNKNOWN_METHOD_WORDS))
        ):
            return message
    return None


def in_flight(probe: Probe, since: float, session_id: str) -> str:
    """Evidence: the turn updates that arrived in flight, just after the cancel."""
    count = len(probe.updates_after(since, session_id, since + IN_FLIGHT))
    return f" ({count} update(s) in flight arrived after it)" if count else ""
