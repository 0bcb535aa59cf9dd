"""``V2Session`` (core/_lifecycle.py): a v2 session's prompts, spans of foreground work and
turn ownership, as short stories of what a host reads, in order (the orders real agents use:
docs/interop.md); and ``V1Session``'s fence."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from acp_driver.core import CancelPlan, Decision, PromptState, V1Session, V2Session

K = TypeVar("K")


@dataclass
class Routed(Generic[K]):
    owner: K | None = None
    inserted: list[K] = field(default_factory=list)
    resolved: list[tuple[K, str | None]] = field(default_factory=list)


class SessionSpans(V2Session[K]):
    """The lifecycle, with each update's effects returned (for short assertions)."""

    def sent(self, key: K, answered: Any = None) -> None:  # type: ignore[override]
        super().sent(key, _never)

    def update(self, raw: dict[str, Any]) -> Routed[K]:
        owner = self.route(raw, raw.get("sessionUpdate"))
        routed: Routed[K] = Routed(owner)
        effects, self.effects = self.effects, None
        if effects is not None:
            routed.inserted = [s.key for s in effects.inserted]
            routed.resolved = [(s.key, s.stop_reason) for s in effects.ended]
        return routed

    def answered_id(self, key: K, message_id: str) -> bool:
        """Its answer ``{messageId}``; True if that inserted it."""
        return any(s.decision is Decision.INSERTED for s in self.answered(key, {"messageId": message_id}))


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
    assert spans.answered_id("A", "u1") is False  # the answer after the idle: already inserted
    assert spans.live == []
    assert spans.waiting == []


def test_the_answer_inserts_when_no_user_message_came_first() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    assert spans.answered_id("A", "u1") is True
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
    spans.answered_id("A", "u1")
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
    spans.refused("A", True)  # -32800: withdrawn while held
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
    spans.answered_id("A", "u1")
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
    spans.answered_id("A", "u1")  # inserted, no running yet
    spans.cancel("A", [])
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
    spans.answered_id(first, "u1")
    spans.update(state("running"))
    assert spans.update(chunk("a1")).owner is first
    assert spans.update(tool("t1")).owner is first
    spans.update(state("idle", "end_turn"))
    spans.forget(first)
    freed = weakref.ref(first)
    del first
    assert freed() is None, "the spans still hold a turn that was forgotten"
    spans.sent(second)
    spans.answered_id(second, "u2")
    spans.update(state("running"))
    # A late update of the forgotten turn's tool call is background, not the new live turn's;
    # its message id means nothing any more (agents reuse them): the working turn's.
    assert spans.update(tool("t1")).owner is None
    assert spans.update(chunk("a1")).owner is second
    assert spans.update(chunk("a2")).owner is second


class Turn:
    """A host's turn (any hashable key; an object, so that its lifetime can be watched)."""


# ------------------------------------------------------------------ the prompt table (v2)


def test_a_withdrawn_prompt_the_agent_inserts_anyway_is_cancelled_and_the_ones_behind_it_resent() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered_id("A", "u1")
    spans.update(state("running"))
    spans.sent("B")
    spans.sent("C")
    assert spans.plan("B") is CancelPlan.WITHDRAW  # held behind A's work
    spans.withdraw("B")
    assert spans.state_of("B") is PromptState.WITHDRAWING
    assert spans.cancel_requests("B") == ["B"]
    spans.update(state("idle", "end_turn"))
    routed = spans.update(user("u2"))  # the agent ignored the withdrawal: B inserted
    assert routed.inserted == ["B"]
    effects = spans.answered("B", {"messageId": "u2"})
    assert effects == []  # the same insertion, confirmed
    assert spans.state_of("B") is PromptState.CANCELLING
    # The session/cancel that stops B also refuses C: not C's own cancel, so C is sent again.
    assert spans.state_of("C") is PromptState.COLLATERAL
    (resend,) = spans.refused("C", True)
    assert (resend.decision, spans.state_of("C")) == (Decision.RESEND, PromptState.HELD)
    assert spans.update(state("idle", "cancelled")).resolved == [("B", "cancelled")]


def test_the_cancel_span_decision_comes_with_the_insertion() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered_id("A", "u1")
    spans.update(state("running"))
    spans.sent("B")
    spans.withdraw("B")
    (step,) = spans.answered("B", {"messageId": "u2"})
    assert (step.decision, step.key, step.message_id) == (Decision.CANCEL_SPAN, "B", "u2")


def test_a_withdrawal_given_up_leaves_a_span_that_is_never_a_live_turn() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    spans.answered_id("A", "u1")
    spans.update(state("running"))
    spans.sent("B")
    spans.sent("C")
    spans.withdraw("B")
    spans.gave_up("B")  # the budget passed, unconfirmed: the host resolved B itself
    spans.forget("B")
    assert spans.state_of("B") is PromptState.ABANDONED
    spans.update(state("idle", "end_turn"))
    # The agent inserts B after all (it is still first in its queue): its span is cancelled at
    # once, and it is no turn's.
    owner = spans.route(user("u2"), "user_message")
    effects, spans.effects = spans.effects, None
    assert effects is not None
    assert [(s.decision, s.key) for s in effects.inserted] == [(Decision.CANCEL_SPAN, "B")]
    assert owner is None
    assert spans.live == []
    spans.sent("D")
    assert spans.answered("B", {"messageId": "u2"}) == []  # the same insertion, confirmed
    assert spans.update(chunk("b1")).owner is None  # B's work is nobody's turn
    assert spans.waiting == ["C", "D"]


def test_a_prompt_with_nothing_ahead_of_it_is_cancelled_by_the_ladder() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")  # never answered, no user_message: a wedged agent
    assert spans.plan("A") is CancelPlan.LADDER
    spans.cancel("A", [])
    assert spans.cancel_requests("A") == ["A"]
    (step,) = spans.refused("A", True)  # session/cancel refused it: its own cancel, confirmed
    assert (step.decision, step.stop_reason) == (Decision.REFUSED, "cancelled")


@pytest.mark.parametrize("answer", [None, 5, "u1", [], {"messageId": 7}, {"messageId": ["u1"]}, {}])
def test_a_malformed_answer_refuses_the_prompt_with_a_clear_error(answer: Any) -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    (step,) = spans.answered("A", answer)
    assert step.decision is Decision.REFUSED
    assert step.error is not None
    assert "messageId" in step.error
    assert spans.waiting == []


def test_a_v1_answer_says_the_agent_speaks_v1() -> None:
    spans: SessionSpans[str] = SessionSpans()
    spans.sent("A")
    (step,) = spans.answered("A", {"stopReason": "end_turn"})
    assert (step.decision, step.stop_reason) == (Decision.SPEAKS_V1, "end_turn")


# ------------------------------------------------------------------ v1


def test_v1_an_update_after_the_answer_is_late_and_never_the_next_turns() -> None:
    answered: set[str] = set()
    life: V1Session[str] = V1Session()
    life.sent("A", lambda: "A" in answered)
    assert life.route(tool("t1"), "tool_call_update") == "A"
    answered.add("A")
    assert life.route(chunk("x"), "agent_message_chunk") is None
    assert life.late_of(chunk("x")) == (True, "A")
    (step,) = life.answered("A", {"stopReason": "end_turn"})
    assert (step.decision, step.stop_reason) == (Decision.ENDED, "end_turn")
    life.forget("A")
    life.sent("B", lambda: "B" in answered)
    # A's tool call, which B never announced: late (A's), not B's.
    assert life.route(tool("t1"), "tool_call_update") is None
    assert life.late_of(tool("t1")) == (True, "A")
    assert life.route(chunk("y"), "agent_message_chunk") == "B"
    (bad,) = life.answered("B", {"stopReason": "nope"})
    assert bad.decision is Decision.REFUSED
    assert bad.error is not None


def _never() -> bool:
    return False
