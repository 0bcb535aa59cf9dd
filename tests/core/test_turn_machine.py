"""The turn machines of the core: the host side (``TurnMachine``: observations and times in,
actions out) and the agent side (``AgentTurnMachine``).

Pure: plain floats for time. Each story feeds observations in order and checks every step.
"""

from __future__ import annotations

import pytest

from acp_driver.core import (
    Action,
    AgentTurnEvent,
    AgentTurnMachine,
    AgentTurnState,
    LadderPolicy,
    Observation,
    Resolution,
    Rung,
    Seen,
    Step,
    TurnMachine,
    TurnState,
)
from acp_driver.core._agent_turn import AGENT_TURN_TRANSITIONS
from acp_driver.core._host_turn import TRANSITIONS

T0 = 500.0
POLICY = LadderPolicy(budget=4.0)  # cancel_request at +2, terminate at +3, kill at +4
CANCEL = Observation(Seen.CANCEL)
TICK = Observation(Seen.TICK)
KILL_NOW = Observation(Seen.KILL_NOW)


def machine() -> TurnMachine:
    return TurnMachine(POLICY, exit_wait=5.0)


def test_a_turn_that_ends_on_its_own_needs_no_action() -> None:
    m = machine()
    step = m.observe(Observation(Seen.ANSWERED, stop_reason="end_turn"), T0)
    assert step == Step((), (), None, Resolution.COMPLETED)
    assert m.state is TurnState.RESOLVED
    assert m.ladder is None
    assert not m.cancel_requested


def test_cancel_starts_with_session_cancel_and_asks_for_the_next_deadline() -> None:
    m = machine()
    assert m.observe(CANCEL, T0) == Step((Rung.SESSION_CANCEL,), (Action.SESSION_CANCEL,), T0 + 2.0)
    assert m.state is TurnState.CANCELLING
    assert m.cancel_requested_at == T0
    assert m.observe(CANCEL, T0 + 0.5) == Step()  # a second cancel changes nothing


def test_the_whole_ladder_tick_by_tick() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    assert m.observe(TICK, T0 + 1.0) == Step((), (), T0 + 2.0)  # early tick: nothing due yet
    assert m.observe(TICK, T0 + 2.0) == Step((Rung.CANCEL_REQUEST,), (Action.CANCEL_REQUEST,), T0 + 3.0)
    assert m.observe(TICK, T0 + 3.0) == Step((Rung.TERMINATE,), (Action.TERMINATE,), T0 + 4.0)
    assert m.signalled
    assert m.observe(TICK, T0 + 4.0) == Step(
        (Rung.KILL,), (Action.KILL,), T0 + 4.0 + 5.0
    )  # then wait for the exit
    step = m.observe(Observation(Seen.GONE), T0 + 4.1)
    assert step.resolution is Resolution.KILLED
    assert m.ladder is not None
    assert m.ladder.resolved_by is Rung.KILL
    assert m.ladder.elapsed == pytest.approx(4.1)


def test_a_late_tick_takes_every_overdue_step_at_once() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    step = m.observe(TICK, T0 + 3.5)
    assert step.rungs == (Rung.CANCEL_REQUEST, Rung.TERMINATE)
    assert step.actions == (Action.CANCEL_REQUEST, Action.TERMINATE)
    assert step.deadline == T0 + 4.0


def test_no_exit_after_sigkill_resolves_killed_at_the_exit_wait() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(TICK, T0 + 4.0)
    assert m.observe(TICK, T0 + 8.9) == Step((), (), T0 + 9.0)
    assert m.observe(TICK, T0 + 9.0) == Step((), (), None, Resolution.KILLED)
    assert m.state is TurnState.RESOLVED


def test_kill_now_from_running_and_from_mid_ladder() -> None:
    m = machine()
    assert m.observe(KILL_NOW, T0) == Step((Rung.KILL,), (Action.KILL,), T0 + 5.0)
    assert m.cancel_requested
    m = machine()
    m.observe(CANCEL, T0)
    assert m.observe(KILL_NOW, T0 + 1.0) == Step((Rung.KILL,), (Action.KILL,), T0 + 6.0)
    assert m.observe(KILL_NOW, T0 + 1.5) == Step((), (), T0 + 6.0)  # already sent: nothing more
    assert m.observe(TICK, T0 + 2.0) == Step((), (), T0 + 6.0)  # the skipped steps never come


@pytest.mark.parametrize(
    ("observation", "cancelled_first", "expected"),
    [
        (Observation(Seen.ANSWERED, stop_reason="cancelled"), True, Resolution.CANCELLED),
        (Observation(Seen.FAILED, stop_reason="cancelled"), True, Resolution.CANCELLED),  # -32800
        (Observation(Seen.ANSWERED, stop_reason="end_turn"), True, Resolution.COMPLETED),  # ignored
        (Observation(Seen.FAILED), True, Resolution.ERROR),
        (Observation(Seen.FAILED), False, Resolution.ERROR),
        (Observation(Seen.GONE), True, Resolution.AGENT_EXITED),  # before any signal of ours
        (Observation(Seen.GONE), False, Resolution.AGENT_EXITED),
        (Observation(Seen.GONE, signalled=True), False, Resolution.KILLED),  # agent.kill()
        (Observation(Seen.ABANDONED), False, Resolution.CANCELLED),
        (Observation(Seen.ANSWERED, stop_reason="max_tokens"), False, Resolution.COMPLETED),
    ],
)
def test_how_an_ending_maps_to_a_resolution(
    observation: Observation, cancelled_first: bool, expected: Resolution
) -> None:
    m = machine()
    if cancelled_first:
        m.observe(CANCEL, T0)
    assert m.observe(observation, T0 + 1.0).resolution is expected
    if cancelled_first:
        assert m.ladder is not None
        assert m.ladder.resolution is expected


def test_gone_after_our_sigterm_is_killed() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(TICK, T0 + 3.0)  # terminate
    assert m.observe(Observation(Seen.GONE), T0 + 3.2).resolution is Resolution.KILLED


def test_nothing_moves_a_resolved_turn() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(Observation(Seen.ANSWERED, stop_reason="cancelled"), T0 + 0.1)
    for seen in Seen:
        assert m.observe(Observation(seen), T0 + 10.0) == Step()
    assert m.resolution is Resolution.CANCELLED


def test_the_table_has_no_transition_out_of_resolved() -> None:
    assert not [key for key in TRANSITIONS if key[0] is TurnState.RESOLVED]
    # Every ending is handled in both live states.
    for state in (TurnState.RUNNING, TurnState.CANCELLING):
        for seen in (Seen.ANSWERED, Seen.FAILED, Seen.GONE, Seen.ABANDONED, Seen.KILL_NOW):
            assert (state, seen) in TRANSITIONS


# ---------------------------------------------------------------------- the agent side


def test_agent_turn_cancel_then_end() -> None:
    m = AgentTurnMachine()
    assert m.state is AgentTurnState.RUNNING
    assert not m.cancel_requested
    assert m.feed(AgentTurnEvent.CANCEL, "session/cancel")
    assert m.state is AgentTurnState.CANCELLING
    assert m.cancel_reason == "session/cancel"
    assert not m.feed(AgentTurnEvent.CANCEL, "$/cancel_request")  # the first reason stays
    assert m.cancel_reason == "session/cancel"
    assert m.feed(AgentTurnEvent.END)
    assert m.ended
    assert m.cancel_requested


def test_agent_turn_ended_is_final() -> None:
    m = AgentTurnMachine()
    assert m.feed(AgentTurnEvent.END)
    assert not m.feed(AgentTurnEvent.CANCEL, "late")  # a cancel after the answer changes nothing
    assert not m.cancel_requested
    assert not m.feed(AgentTurnEvent.END)
    assert m.state is AgentTurnState.ENDED
    assert not [key for key in AGENT_TURN_TRANSITIONS if key[0] is AgentTurnState.ENDED]


# ---------------------------------------------------------------------------- what the result says


def test_a_cancelled_stop_reason_nobody_asked_for_is_the_agents_cancel() -> None:
    m = machine()
    step = m.observe(Observation(Seen.ANSWERED, stop_reason="cancelled"), T0)
    assert step.resolution is Resolution.CANCELLED
    assert m.cancelled_by == "agent"
    assert m.resolved_by is None  # the host never cancelled: no step took effect


def test_minus_32800_nobody_asked_for_is_the_agents_cancel_too() -> None:
    m = machine()
    m.observe(Observation(Seen.FAILED, stop_reason="cancelled"), T0)
    assert (m.resolution, m.cancelled_by, m.resolved_by) == (Resolution.CANCELLED, "agent", None)


def test_a_cancel_the_agent_honoured_names_the_host_and_the_step_that_took_effect() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(TICK, T0 + 2.0)  # cancel_request
    m.observe(Observation(Seen.ANSWERED, stop_reason="cancelled"), T0 + 2.1)
    assert (m.resolution, m.cancelled_by, m.resolved_by) == (Resolution.CANCELLED, "host", "cancel_request")


def test_a_cancel_the_agent_ignored_says_so() -> None:
    # The turn then ended on its own with end_turn: the cancel did not take effect, whatever
    # steps were taken before.
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(TICK, T0 + 2.0)
    m.observe(Observation(Seen.ANSWERED, stop_reason="end_turn"), T0 + 2.5)
    assert (m.resolution, m.cancelled_by, m.resolved_by) == (Resolution.COMPLETED, None, "ignored")


def test_an_abandoned_prompt_is_the_hosts_cancel() -> None:
    m = machine()
    m.observe(Observation(Seen.ABANDONED), T0)
    assert (m.resolution, m.cancelled_by, m.resolved_by) == (Resolution.CANCELLED, "host", None)


def test_a_kill_names_the_step_and_no_canceller() -> None:
    m = machine()
    m.observe(CANCEL, T0)
    m.observe(TICK, T0 + 4.0)
    m.observe(Observation(Seen.GONE), T0 + 4.1)
    assert (m.resolution, m.cancelled_by, m.resolved_by) == (Resolution.KILLED, None, "kill")


def test_a_turn_that_ends_normally_names_nobody() -> None:
    m = machine()
    m.observe(Observation(Seen.ANSWERED, stop_reason="end_turn"), T0)
    assert (m.cancelled_by, m.resolved_by) == (None, None)
