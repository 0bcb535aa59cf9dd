"""The audit's view of ACP v2 work on the wire: prompts answered at insertion, ``state_update``
spans, and what belongs to the work of a span.

In v2 the answer to ``session/prompt`` only says the user message was inserted (``{messageId}``);
the work is reported by ``state_update`` (``running`` / ``requires_action`` / ``idle`` +
``stopReason``). Everything here reads the probe's record of the wire (``Probe.incoming``: each
message with when it arrived, in the order read; ``Probe.outgoing``: what the audit sent, in
that order), so that an order ("the idle before the answer") is the wire's and a latency is
taken from when a message arrived.

Which idle ends a prompt's turn, and whose an update is, are not read here: the version's
lifecycle decides them (``core/_lifecycle.py``, the one a host on this library asks), told the
record in wire order (``WireTurns``). What the agent *claims* -- the first idle after a prompt
that says work stopped (``work_ended``) -- is read from the wire too, and where the two differ
the audit says so (``disowned``): an idle that a host does not take for the prompt's end leaves
that host waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
from ..core import (
    Decided,
    Decision,
    SessionLifecycle,
    lifecycle_for,
    profile_for,
    read_prompt_answer,
    read_update,
)
from ._check_turns import BUSY_HINT, Busy, ms, start_prompt
from ._probe import AgentGone, Probe, update_kind
from ._text import excerpt

BUSY_STATES = frozenset({"running", "requires_action"})
MESSAGE_KINDS = frozenset({"agent_message", "agent_message_chunk", "agent_thought", "agent_thought_chunk"})
USER_MESSAGE = frozenset({"user_message", "user_message_chunk"})
STRAGGLERS = 1.0
"""How long the audit watches for updates after an end (an idle, an answer), at most."""


@dataclass(frozen=True)
class Seen:
    """One message the agent sent: its place in the wire's order, when it arrived, and it."""

    index: int
    at: float
    message: dict[str, Any]

    @property
    def update(self) -> dict[str, Any]:
        """A ``session/update``'s ``update`` object ({} for anything else)."""
        params = self.message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        return update if isinstance(update, dict) else {}

    @property
    def kind(self) -> Any:
        return update_kind(self.message)

    @property
    def session_id(self) -> Any:
        params = self.message.get("params")
        return params.get("sessionId") if isinstance(params, dict) else None


@dataclass
class Prompt:
    """One ``session/prompt`` the audit sent."""

    task: asyncio.Task[Any]
    ids: list[Any]
    sent: float
    session_id: str

    @property
    def id(self) -> Any:
        return self.ids[0] if self.ids else None


class WireTurns:
    """One session's prompts as the version's lifecycle reads the audit's record of the wire,
    told in wire order (what the audit sent between two messages it read goes between them):
    when each prompt was inserted, which idle ended its turn, whose each update was. It reads
    on from where it stopped at each ``read``."""

    def __init__(self, probe: Probe, sid: str) -> None:
        self.probe = probe
        self.sid = sid
        self.life: SessionLifecycle[Any] = lifecycle_for(profile_for(probe.version))
        self.inserted: dict[Any, Seen] = {}
        """Each prompt's insertion (its answer or its user message), by the prompt's id."""
        self.ended: dict[Any, Seen] = {}
        """The message each prompt's turn ended at (v2: an idle), by the prompt's id."""
        self.refused: dict[Any, Seen] = {}
        """The error answer (or, v2, the malformed or v1 answer) that ended a prompt unrun."""
        self.snapshots: set[int] = set()
        """State updates read while a ``session/resume`` or ``load`` was in flight (by place):
        snapshots, never an end (the schema), whatever they say."""
        self.owner: dict[int, Any] = {}
        """Each update's turn (a prompt's id), by the update's place in ``incoming``; an update
        of no turn (the session's, background work) is not here."""
        self._open: list[Any] = []
        """Prompts sent and not over, in the order sent."""
        self._answered: set[Any] = set()
        self._attaching: Any = None
        """The ``session/resume``/``load`` in flight (its id): state updates are snapshots."""
        self._read = 0
        self._sent = 0

    def read(self) -> WireTurns:
        """Tell the lifecycle what arrived and went out since the last read."""
        incoming, outgoing = self.probe.incoming, self.probe.outgoing
        while self._read < len(incoming) or self._sent < len(outgoing):
            if self._sent < len(outgoing) and outgoing[self._sent][0] <= self._read:
                self._went_out(outgoing[self._sent][1])
                self._sent += 1
            else:
                at, message = incoming[self._read]
                self._came_in(Seen(self._read, at, message))
                self._read += 1
        return self

    def _went_out(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        method, rid = message.get("method"), message.get("id")
        if method == p.CANCEL_REQUEST:
            if params.get("requestId") in self._open:
                self.life.withdraw(params["requestId"])
            return
        if params.get("sessionId") != self.sid:
            return
        if method == p.SESSION_PROMPT and rid is not None:
            self._open.append(rid)
            self.life.sent(rid, lambda: rid in self._answered)
        elif method in (p.SESSION_CANCEL, p.SESSION_CLOSE) and self._open:  # close cancels the same
            self.life.cancel(self._open[0], self._open[1:])
        elif method in (p.SESSION_RESUME, p.SESSION_LOAD) and rid is not None:
            self._attaching = rid
            self.life.resuming = True

    def _came_in(self, seen: Seen) -> None:
        message = seen.message
        if "method" not in message:
            rid = message.get("id")
            if rid is not None and rid == self._attaching:
                self._attaching = None
                self.life.resuming = False
            elif rid in self._open:
                self._answered.add(rid)
                self._decided(read_prompt_answer(self.life, rid, message), seen)
            return
        if message.get("method") != p.SESSION_UPDATE or seen.session_id != self.sid:
            return
        if self.life.resuming and seen.kind == "state_update":
            self.snapshots.add(seen.index)
        owner, effects = read_update(self.life, seen.update)
        if owner is not None:
            self.owner[seen.index] = owner
        if effects is not None:
            self._decided([*effects.inserted, *effects.ended], seen)

    def _decided(self, steps: list[Decided[Any]], seen: Seen) -> None:
        for step in steps:
            if step.decision in (Decision.INSERTED, Decision.CANCEL_SPAN):
                self.inserted.setdefault(step.key, seen)
                continue
            key = step.key
            if step.decision is Decision.ENDED:
                self.ended[key] = seen
            else:  # refused, speaks v1, or (v2) refused by the cancel of a span it was held behind
                self.refused[key] = seen
            self.life.forget(key)
            if key in self._open:
                self._open.remove(key)


def wire_turns(probe: Probe, sid: str) -> WireTurns:
    """The lifecycle's reading of ``sid`` on the probe's record, read up to now."""
    found = probe.readings.get(sid)
    if found is None:
        found = probe.readings[sid] = WireTurns(probe, sid)
    return found.read()


def end_of(probe: Probe, prompt: Prompt) -> Seen | None:
    """The idle the lifecycle ended ``prompt``'s turn at (None: not ended, as a host sees it)."""
    return wire_turns(probe, prompt.session_id).ended.get(prompt.id)


def work_ended(probe: Probe, prompt: Prompt, after: float | None = None) -> Seen | None:
    """The end of ``prompt``'s work: the idle its turn ended at (the lifecycle's), else the
    agent's own claim of an end that ended no turn at all -- the first idle after the prompt
    that says work stopped (it carries a stop reason, or follows a ``running`` or
    ``requires_action`` since the prompt), which a host does not take (``disowned`` says why).
    An idle that says only that the agent is ready ends nothing, nor does a resume's snapshot.
    With ``after``: only an end that arrived after it."""
    since = prompt.sent if after is None else after
    turns = wire_turns(probe, prompt.session_id)
    end = turns.ended.get(prompt.id)
    if end is not None:
        return end if end.at > since else None
    others = {seen.index for seen in turns.ended.values()} | turns.snapshots
    worked = False
    for seen in states(probe, prompt.session_id, prompt.sent):
        state = state_of(seen)
        if state in BUSY_STATES:
            worked = True
        elif state == "idle" and seen.index not in others and (worked or stop_of(seen) is not None):
            if seen.at > since:
                return seen
            worked = False
    return None


async def wait_end(probe: Probe, prompt: Prompt, timeout: float, after: float | None = None) -> Seen | None:
    """Wait (at most ``timeout``) for ``work_ended``."""
    return await probe.wait_for(lambda: work_ended(probe, prompt, after), timeout)


def disowned(probe: Probe, prompt: Prompt, idle: Seen | None) -> str:
    """Why a host does not end ``prompt``'s turn at ``idle`` ("" if it does, or no idle)."""
    if idle is None:
        return ""
    turns = wire_turns(probe, prompt.session_id)
    end = turns.ended.get(prompt.id)
    if end is not None and end.index == idle.index:
        return ""
    if end is not None:
        when = "a later" if end.index > idle.index else "an earlier"
        return f" (a host ends the prompt's turn at {when} idle, {ms(abs(end.at - idle.at))} from it)"
    refused = turns.refused.get(prompt.id)
    if refused is not None and refused.index < idle.index:
        return ""  # the prompt never ran: its answer said so first
    inserted = turns.inserted.get(prompt.id)
    if inserted is None or inserted.index > idle.index:
        return " (a host does not end the prompt's turn at it: the prompt was not inserted before it; a host waits on)"
    return " (a host does not end the prompt's turn at it: no work reported since the insertion, so it is a snapshot; a host waits on)"


async def send_prompt(probe: Probe, text: str) -> Prompt:
    task, ids, sent = await start_prompt(probe, text)
    assert probe.session_id is not None
    return Prompt(task, ids, sent, probe.session_id)


def updates(
    probe: Probe, sid: str, after: float = float("-inf"), kinds: Collection[str] | None = None
) -> list[Seen]:
    """``session/update`` of ``sid`` that arrived after ``after`` (of ``kinds``), in wire order."""
    found = []
    for index, (at, message) in enumerate(probe.incoming):
        if at <= after or message.get("method") != p.SESSION_UPDATE:
            continue
        params = message.get("params")
        if not isinstance(params, dict) or params.get("sessionId") != sid:
            continue
        if kinds is None or update_kind(message) in kinds:
            found.append(Seen(index, at, message))
    return found


def states(probe: Probe, sid: str, after: float = float("-inf")) -> list[Seen]:
    return updates(probe, sid, after, ("state_update",))


def state_of(seen: Seen) -> Any:
    return seen.update.get("state")


def stop_of(idle: Seen) -> str | None:
    """An idle's stop reason (None when it reports none, or a malformed one: the schema)."""
    reason = idle.update.get("stopReason")
    return reason if isinstance(reason, str) else None


def describe_idle(idle: Seen) -> str:
    stop = stop_of(idle)
    return "an idle without a stopReason" if stop is None else f"idle stopReason {stop!r}"


def reply(probe: Probe, request_id: Any) -> Seen | None:
    """The agent's answer to our request ``request_id`` (None: not answered yet)."""
    if request_id is None:
        return None
    for index, (at, message) in enumerate(probe.incoming):
        if "method" not in message and message.get("id") == request_id:
            return Seen(index, at, message)
    return None


def message_id(answer: Seen | None) -> str | None:
    """The ``messageId`` of a prompt's answer (None: an error, or a result without one)."""
    result = answer.message.get("result") if answer is not None else None
    found = result.get("messageId") if isinstance(result, dict) else None
    return found if isinstance(found, str) else None


def error_code(answer: Seen | None) -> Any:
    error = answer.message.get("error") if answer is not None else None
    return error.get("code") if isinstance(error, dict) else None


def describe_reply(answer: Seen) -> str:
    error = answer.message.get("error")
    if isinstance(error, dict):
        return f"error {error.get('code')} {str(error.get('message', ''))!r}"
    return excerpt(answer.message.get("result"), 120)


async def wait_reply(probe: Probe, request_id: Any, timeout: float) -> Seen | None:
    return await probe.wait_for(lambda: reply(probe, request_id), timeout)


async def settle(probe: Probe, seconds: float) -> None:
    """Watch the wire a while (stragglers); ``AgentGone`` does not matter here."""
    try:
        await probe.wait_for(lambda: None, seconds)
    except AgentGone:
        pass


def keys_of(seen: Seen) -> set[tuple[str, str]]:
    """What an update is about: its message, tool call, terminal or plan (by id)."""
    update = seen.update
    keys = set()
    if seen.kind in MESSAGE_KINDS and isinstance(update.get("messageId"), str):
        keys.add(("message", update["messageId"]))
    for field, name in (("toolCallId", "tool call"), ("terminalId", "terminal")):
        if isinstance(update.get(field), str):
            keys.add((name, update[field]))
    plan = update.get("plan")
    if isinstance(plan, dict) and isinstance(plan.get("planId"), str):
        keys.add(("plan", plan["planId"]))
    return keys


def background_of(idle: Seen) -> set[tuple[str, str]]:
    """The tool calls and terminals an idle lists as background work (they may go on)."""
    listed = idle.update.get("background")
    found = set()
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict):
            for field, name in (("toolCallId", "tool call"), ("terminalId", "terminal")):
                if isinstance(item.get(field), str):
                    found.add((name, item[field]))
    return found


def after_the_end(probe: Probe, prompt: Prompt, idle: Seen) -> list[Seen]:
    """Updates of ``prompt``'s work that came after ``idle`` (its end), in wire order: of its
    messages, tool calls, terminals and plans, those the lifecycle gave its turn before the
    idle (or, when the prompt was not inserted before it, everything between the prompt and the
    idle: no host knows whose that is). Work the idle lists as background may go on; anything
    else after it is of no span the audit knows of."""
    sid = prompt.session_id
    turns = wire_turns(probe, sid)
    inserted = turns.inserted.get(prompt.id)
    ours = inserted is not None and inserted.index < idle.index
    work: set[tuple[str, str]] = set()
    for seen in updates(probe, sid, prompt.sent, probe.activity_kinds):
        if seen.index < idle.index and (not ours or turns.owner.get(seen.index) == prompt.id):
            work |= keys_of(seen)
    work -= background_of(idle)
    return [
        seen
        for seen in updates(probe, sid, kinds=probe.activity_kinds)
        if seen.index > idle.index and keys_of(seen) & work
    ]


def work_after(probe: Probe, sid: str, idle: Seen) -> list[Seen]:
    """Every turn update of ``sid`` after ``idle`` but the background work it lists: with no
    prompt sent since, work of no span (the ended one's, going on)."""
    background = background_of(idle)
    return [
        seen
        for seen in updates(probe, sid, kinds=probe.activity_kinds)
        if seen.index > idle.index and not (keys_of(seen) and keys_of(seen) <= background)
    ]


def kinds_of(seen: list[Seen]) -> str:
    return ", ".join(sorted({str(s.kind) for s in seen}))


async def wait_busy_v2(opts: argparse.Namespace, probe: Probe, prompt: Prompt) -> Busy | str:
    """Wait until the work of ``prompt`` is busy: its first turn activity, or ``--busy-after``,
    or ``--timeout``. Returns when to cancel, or (a string) why there is nothing to cancel: the
    work ended first (an idle), or the prompt was refused."""
    bound = opts.timeout if opts.busy_after is None else min(opts.busy_after, opts.timeout)

    def ended() -> str | None:
        idle = work_ended(probe, prompt)
        if idle is not None:
            return (
                f"the work ended ({describe_idle(idle)}) {ms(idle.at - prompt.sent)} after the prompt, "
                f"before the cancel could be sent; {BUSY_HINT}"
            )
        answer = reply(probe, prompt.id)
        if answer is not None and "error" in answer.message:
            return f"the prompt was refused ({describe_reply(answer)}): no work to cancel"
        return None

    def busy() -> str | None:
        return ended() or ("busy" if probe.first_activity(prompt.sent) is not None else None)

    await probe.wait_for(busy, max(prompt.sent + bound - time.monotonic(), 0))
    why = ended()
    if why is not None:
        return why
    first = probe.first_activity(prompt.sent)
    reason = "activity" if first is not None else ("busy-after" if opts.busy_after is not None else "bound")
    return Busy(time.monotonic(), prompt.sent, first, reason)


async def natural_span(opts: argparse.Namespace, probe: Probe, limit: float) -> float | None:
    """A control: the busy prompt again on the probe's session, uncancelled. How long until its
    idle if within ``limit``; None if it runs on (then it is cancelled, and not judged)."""
    prompt = await send_prompt(probe, opts.busy_prompt)
    idle = await wait_end(probe, prompt, min(limit, opts.timeout))
    if idle is None:
        probe.notify(p.SESSION_CANCEL, {"sessionId": prompt.session_id})
        await wait_end(probe, prompt, min(opts.timeout, 2.0))
        return None
    return idle.at - prompt.sent
