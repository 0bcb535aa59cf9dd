"""``SessionSpans``: a v2 session's prompts, spans of foreground work and turn ownership, as
short stories of what a host reads, in order (the orders real agents use: docs/interop.md)."""

from __future__ import annotations

import weakref
from typing import Any

from acp_driver.core import SessionSpans


def state(name: str, stop: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "state_update", "state": name}
    if stop is not None:
        update["stopReason"] = stop
    return update


def user(message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": []}


def chunk(message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": {"type": "text"}}


def tool(tool_call_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "pending"}


def test_a_turn_is_inserted_by_its_user_message_and_ends_at_the_idle() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    assert spans.update(user("u1")).inserted == ["A"]
    assert spans.update(state("running")).resolved == []
    assert spans.update(chunk("a1")).owner == "A"
    routed = spans.update(state("idle", "end_turn"))
    assert routed.resolved == [("A", "end_turn")]
    assert spans.answered("A", "u1") is False  # the answer after the idle: already inserted
    assert spans.live == []
    assert spans.waiting == []


def test_the_answer_inserts_when_no_user_message_came_first() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    assert spans.answered("A", "u1") is True
    assert spans.update(user("u1")).owner == "A"  # the same message, later
    spans.update(state("running"))
    assert spans.update(state("idle", "cancelled")).resolved == [("A", "cancelled")]


def test_a_held_prompt_is_not_ended_by_the_idle_of_the_work_before_it() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))
    spans.update(state("running"))
    spans.sent("B")  # held: the agent works
    assert spans.update(chunk("a1")).owner == "A"
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn")]
    assert spans.waiting == ["B"]
    assert spans.update(user("u2")).inserted == ["B"]
    spans.update(state("running"))
    assert spans.update(chunk("a2")).owner == "B"
    assert spans.update(state("idle", "end_turn")).resolved == [("B", "end_turn")]


def test_a_prompt_inserted_into_running_work_ends_with_it() -> None:
    # An agent that queues a held prompt into the work under way (promptQueueing).
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))
    spans.update(state("running"))
    spans.sent("B")
    assert spans.update(user("u2")).inserted == ["B"]
    assert spans.update(chunk("a9")).owner == "B"  # the newest turn the work is on
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn"), ("B", "end_turn")]


def test_a_repeated_idle_without_a_reason_is_a_snapshot_not_a_completion() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered("A", "u1")
    assert spans.update(state("idle")).resolved == []
    spans.update(state("running"))
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn")]


def test_work_too_quick_for_running_ends_at_an_idle_with_a_reason() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn")]


def test_while_resuming_state_updates_are_snapshots() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))
    spans.update(state("running"))
    spans.resuming = True
    assert spans.update(state("idle", "cancelled")).resolved == []  # the replay's snapshot
    spans.resuming = False
    assert spans.live == ["A"]
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn")]


def test_a_refused_prompt_never_runs_and_does_not_shift_the_order() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.sent("B")
    spans.refused("A")  # -32800: withdrawn while held
    assert spans.update(user("u2")).inserted == ["B"]


def test_updates_after_their_turn_ended_are_the_sessions_background() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))
    spans.update(state("running"))
    assert spans.update(tool("t1")).owner == "A"
    spans.update(state("idle", "end_turn"))
    assert spans.update(tool("t1")).owner is None  # its tool call goes on in the background
    assert spans.update({"sessionUpdate": "session_info_update", "title": "x"}).owner is None


def test_an_unknown_state_counts_as_busy() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered("A", "u1")
    spans.update(state("_thinking_hard"))
    assert spans.busy
    assert spans.update(state("idle")).resolved == [("A", None)]  # worked: no reason reported


def test_a_running_state_while_resuming_still_counts_as_work() -> None:
    # A resume on the same connection while the turn's work starts: its "running" is true,
    # and the turn still ends at its idle (only an idle snapshot is ignored).
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.update(user("u1"))  # inserted while idle
    spans.resuming = True
    spans.update(state("running"))
    spans.resuming = False
    assert spans.update(state("idle", "end_turn")).resolved == [("A", "end_turn")]


def test_after_a_cancel_any_idle_ends_the_cancelled_turn() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered("A", "u1")  # inserted, no running yet
    spans.cancel_sent(["A"])
    assert spans.update(state("idle")).resolved == [("A", None)]  # unreported, but the end


def test_background_work_is_listed_by_the_last_state_update() -> None:
    spans: SessionSpans[str] = SessionSpans()
    listed = [{"type": "tool_call", "toolCallId": "t9"}, {"type": "terminal", "terminalId": "term1"}]
    spans.update({**state("idle", "end_turn"), "background": listed})
    assert spans.background == {"t9", "term1"}
    spans.update(state("running"))  # not reported: unchanged
    assert spans.background == {"t9", "term1"}
    spans.update({**state("idle", "end_turn"), "background": []})
    assert spans.background == set()


def test_a_forgotten_turn_is_held_nowhere_and_its_late_updates_stay_the_sessions() -> None:
    spans: SessionSpans[Turn] = SessionSpans()
    first, second = Turn(), Turn()
    spans.sent(first)
    spans.answered(first, "u1")
    spans.update(state("running"))
    assert spans.update(chunk("a1")).owner is first
    assert spans.update(tool("t1")).owner is first
    spans.update(state("idle", "end_turn"))
    spans.forget(first)
    freed = weakref.ref(first)
    del first
    assert freed() is None, "the spans still hold a turn that was forgotten"
    spans.sent(second)
    spans.answered(second, "u2")
    spans.update(state("running"))
    # Late updates of the forgotten turn's message and tool call: not the new live turn's.
    assert spans.update(chunk("a1")).owner is None
    assert spans.update(tool("t1")).owner is None
    assert spans.update(chunk("a2")).owner is second


class Turn:
    """A host's turn (any hashable key; an object, so that its lifetime can be watched)."""
