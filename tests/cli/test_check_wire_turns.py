"""The audit reads where a v2 turn ends through the host's lifecycle (``_check_spans.WireTurns``),
told the probe's record of the wire in wire order: pure, no agent, no clock."""

from __future__ import annotations

from typing import Any

from acp_driver.cli._check_spans import (
    Prompt,
    Seen,
    after_the_end,
    disowned,
    end_of,
    state_of,
    states,
    wire_turns,
    work_ended,
)
from acp_driver.cli._check_v2_held import answered_while_working
from acp_driver.cli._probe import Probe

SID = "s1"


def index(seen: Seen | None) -> int | None:
    """Where a message read is in the record (None: no message)."""
    return None if seen is None else seen.index


class Wire:
    """A probe's record, written as the wire went: ``send`` what the audit sent, ``read`` what
    arrived (one second apart, so that times order like the wire)."""

    def __init__(self) -> None:
        self.probe = Probe(argv=["agent"], cwd=".", session_cwd=".", timeout=1.0, version=2)
        self.t = 0.0

    def send(self, message: dict[str, Any]) -> float:
        self.t += 1
        self.probe.outgoing.append((len(self.probe.incoming), message))
        return self.t

    def read(self, message: dict[str, Any]) -> int:
        self.t += 1
        self.probe.incoming.append((self.t, message))
        return len(self.probe.incoming) - 1

    def prompt(self, rid: int) -> Prompt:
        sent = self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "session/prompt",
                "params": {"sessionId": SID, "prompt": []},
            }
        )
        return Prompt(task=None, ids=[rid], sent=sent, session_id=SID)  # type: ignore[arg-type]

    def answer(self, rid: int, result: Any = None, error: Any = None) -> int:
        if error is not None:
            return self.read({"jsonrpc": "2.0", "id": rid, "error": error})
        return self.read({"jsonrpc": "2.0", "id": rid, "result": result})

    def update(self, **update: Any) -> int:
        return self.read(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": update}}
        )

    def state(self, state: str, stop: str | None = None) -> int:
        extra = {} if stop is None else {"stopReason": stop}
        return self.update(sessionUpdate="state_update", state=state, **extra)

    def chunk(self, mid: str, text: str = "x") -> int:
        return self.update(
            sessionUpdate="agent_message_chunk", messageId=mid, content={"type": "text", "text": text}
        )

    def cancel(self) -> None:
        self.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}})


def test_a_turn_ends_at_the_idle_after_its_work_and_its_updates_are_its_own() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    chunk = wire.chunk("m1")
    idle = wire.state("idle", "end_turn")
    turns = wire_turns(wire.probe, SID)
    assert turns.owner[chunk] == 1
    end = end_of(wire.probe, prompt)
    assert index(end) == idle
    assert disowned(wire.probe, prompt, end) == ""


def test_a_message_id_of_an_ended_turn_is_the_working_turns() -> None:
    wire = Wire()
    wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    wire.chunk("same")
    wire.state("idle", "end_turn")
    second = wire.prompt(2)
    wire.answer(2, {"messageId": "u2"})
    wire.state("running")
    chunk = wire.chunk("same")  # the agent reuses its message id
    idle = wire.state("idle", "end_turn")
    assert wire_turns(wire.probe, SID).owner[chunk] == 2
    end = end_of(wire.probe, second)
    assert index(end) == idle


def test_an_idle_before_the_prompt_was_inserted_ends_nothing_and_the_audit_says_why() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.state("running")
    wire.chunk("m1")
    idle = wire.state("idle", "end_turn")
    wire.answer(1, {"messageId": "u1"})  # answered only after the work's idle
    assert end_of(wire.probe, prompt) is None
    claimed = work_ended(wire.probe, prompt)
    assert index(claimed) == idle
    assert "the prompt was not inserted before it; a host waits on" in disowned(wire.probe, prompt, claimed)


def test_an_idle_snapshot_during_a_resume_is_no_end() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    wire.send({"jsonrpc": "2.0", "id": 9, "method": "session/resume", "params": {"sessionId": SID}})
    snapshot = wire.state("idle")  # what the agent says while its work still runs
    wire.answer(9, {})
    wire.chunk("m1")
    wire.state("running")
    idle = wire.state("idle", "end_turn")
    end = end_of(wire.probe, prompt)
    assert index(end) == idle
    found = work_ended(wire.probe, prompt)
    assert index(found) == idle
    raw = next(s for s in states(wire.probe, SID, prompt.sent) if state_of(s) == "idle")
    assert index(raw) == snapshot  # what a reading of its own would take
    assert "a host ends the prompt's turn at a later idle" in disowned(wire.probe, prompt, raw)


def test_a_prompt_held_at_the_cancel_and_inserted_anyway_ends_at_the_next_idle() -> None:
    wire = Wire()
    work = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    held = wire.prompt(2)
    wire.cancel()
    first = wire.state("idle", "cancelled")
    wire.answer(2, {"messageId": "u2"})  # inserted though the cancel refused it
    wire.state("running")
    second = wire.state("idle", "end_turn")
    ended = end_of(wire.probe, work)
    assert index(ended) == first
    late = end_of(wire.probe, held)
    assert index(late) == second


def test_a_prompt_sent_after_an_idle_is_not_ended_by_it() -> None:
    wire = Wire()
    wire.state("idle", "end_turn")  # read before the prompt went out
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    assert end_of(wire.probe, prompt) is None
    assert work_ended(wire.probe, prompt) is None


def test_a_refused_prompt_is_over_unrun() -> None:
    wire = Wire()
    wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    held = wire.prompt(2)
    refusal = wire.answer(2, error={"code": -32800, "message": "cancelled"})
    turns = wire_turns(wire.probe, SID)
    assert turns.refused[2].index == refusal
    assert end_of(wire.probe, held) is None


def test_other_sessions_and_hostile_kinds_are_read_without_harm() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    wire.read(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "other", "update": {"sessionUpdate": "state_update", "state": "idle"}},
        }
    )
    wire.update(sessionUpdate=["not", "a", "kind"])
    idle = wire.state("idle", "end_turn")
    end = end_of(wire.probe, prompt)
    assert index(end) == idle


def test_a_cancelled_turn_ends_at_the_next_idle_though_it_never_said_running() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.chunk("m1")  # work, with no running
    wire.state("idle")  # a snapshot: no stop reason, no work said to run -- no end
    assert end_of(wire.probe, prompt) is None
    wire.cancel()
    idle = wire.state("idle")  # the cancel's end (without its stop reason: another rule's finding)
    assert index(end_of(wire.probe, prompt)) == idle


def test_what_goes_on_after_the_end_is_only_the_turns_own_work() -> None:
    wire = Wire()
    wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    wire.update(sessionUpdate="tool_call_update", toolCallId="t0", title="watch", status="in_progress")
    wire.state("idle", "end_turn")
    prompt = wire.prompt(2)
    wire.answer(2, {"messageId": "u2"})
    wire.state("running")
    wire.update(sessionUpdate="tool_call_update", toolCallId="t0", status="in_progress")  # background
    wire.update(sessionUpdate="tool_call_update", toolCallId="t2", title="edit", status="in_progress")
    idle = wire.state("idle", "cancelled")
    wire.update(sessionUpdate="tool_call_update", toolCallId="t0", status="completed")
    late = wire.update(sessionUpdate="tool_call_update", toolCallId="t2", status="completed")
    end = end_of(wire.probe, prompt)
    assert index(end) == idle
    assert end is not None
    assert [s.index for s in after_the_end(wire.probe, prompt, end)] == [late]


def test_what_the_audit_sent_is_told_in_its_place_among_what_it_read() -> None:
    wire = Wire()
    prompt = wire.prompt(1)
    wire.answer(1, {"messageId": "u1"})
    wire.state("running")
    idle = wire.state("idle", "end_turn")  # read before the resume went out: an end, no snapshot
    wire.send({"jsonrpc": "2.0", "id": 9, "method": "session/resume", "params": {"sessionId": SID}})
    wire.state("idle")
    wire.answer(9, {})
    assert index(end_of(wire.probe, prompt)) == idle


def test_held_prompts_answered_after_the_works_idle_were_held_as_they_should_be() -> None:
    """Quick work that ends while the audit watches its held prompts: those answered after its
    idle were inserted when they should be (the held rules then have nothing to judge); only an
    answer before the idle, or with no idle yet, is a prompt that was not held."""
    idle = Seen(5, 5.0, {})
    before, after = Seen(4, 4.0, {}), Seen(6, 6.0, {})
    assert answered_while_working(idle, [after, None, after]) == []
    assert answered_while_working(idle, [before, after]) == [(0, before)]
    assert answered_while_working(None, [None, after]) == [(1, after)]
