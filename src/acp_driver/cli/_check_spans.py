"""The audit's view of ACP v2 work on the wire: prompts answered at insertion, ``state_update``
spans, and what belongs to the work of a span.

In v2 the answer to ``session/prompt`` only says the user message was inserted (``{messageId}``);
the work is reported by ``state_update`` (``running`` / ``requires_action`` / ``idle`` +
``stopReason``). Everything here reads the probe's record of the wire (``Probe.incoming``: each
message with when it arrived, in the order read), so that an order ("the idle before the answer")
is the wire's and a latency is taken from when a message arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
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


def idle_after(probe: Probe, sid: str, after: float) -> Seen | None:
    """The first idle ``state_update`` of ``sid`` after ``after``."""
    return next((s for s in states(probe, sid, after) if state_of(s) == "idle"), None)


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


async def wait_idle(probe: Probe, sid: str, after: float, timeout: float) -> Seen | None:
    return await probe.wait_for(lambda: idle_after(probe, sid, after), timeout)


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


def after_the_end(probe: Probe, sid: str, since: float, idle: Seen) -> list[Seen]:
    """Updates of the work that ``idle`` ended (its messages, tool calls, terminals and plans
    seen between ``since`` and the idle) that came after it, in wire order. Work the idle lists
    as background may go on; anything else after it is of no span the audit knows of."""
    work: set[tuple[str, str]] = set()
    for seen in updates(probe, sid, since, probe.activity_kinds):
        if seen.index < idle.index:
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
    sid = prompt.session_id
    bound = opts.timeout if opts.busy_after is None else min(opts.busy_after, opts.timeout)

    def ended() -> str | None:
        idle = idle_after(probe, sid, prompt.sent)
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
    idle = await wait_idle(probe, prompt.session_id, prompt.sent, min(limit, opts.timeout))
    if idle is None:
        probe.notify(p.SESSION_CANCEL, {"sessionId": prompt.session_id})
        await wait_idle(probe, prompt.session_id, prompt.sent, min(opts.timeout, 2.0))
        return None
    return idle.at - prompt.sent
