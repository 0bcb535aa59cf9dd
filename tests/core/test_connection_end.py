"""The ladder ``serve`` runs for an agent whose client went (``ConnectionEndMachine``): each rung
at its time, the agent's input closed before SIGTERM and only once, and the one bound
(``resolve_within``) when even SIGKILL's exit is never seen. Pure: time is a number passed in."""

from __future__ import annotations

from acp_driver.core import (
    EXIT_WAIT,
    Action,
    ConnectionEndMachine,
    LadderPolicy,
    Observation,
    Resolution,
    Rung,
    Seen,
    resolve_within,
)

T0 = 1000.0
B = 8.0
TICK = Observation(Seen.TICK)


def test_a_wedged_agent_gets_every_rung_and_its_input_closed_before_sigterm() -> None:
    m = ConnectionEndMachine(LadderPolicy(budget=B))
    step = m.observe(Observation(Seen.CANCEL, in_flight=True), T0)
    assert step.rungs == (Rung.SESSION_CANCEL,)
    assert step.actions == (Action.SESSION_CANCEL,)  # a prompt in flight: the input stays open
    assert step.deadline == T0 + B * 0.5
    step = m.observe(TICK, T0 + B * 0.5)
    assert step.actions == (Action.CANCEL_REQUEST,)
    step = m.observe(TICK, T0 + B * 0.75)
    assert step.rungs == (Rung.TERMINATE,)
    assert step.actions == (Action.CLOSE_INPUT, Action.TERMINATE)  # EOF first, then the signal
    step = m.observe(TICK, T0 + B)
    assert step.actions == (Action.KILL,)
    assert step.deadline == T0 + resolve_within(B)  # SIGKILL sent: its exit waited for, bounded
    step = m.observe(TICK, T0 + resolve_within(B))
    assert step.resolution is Resolution.KILLED
    assert m.ladder is not None
    assert m.ladder.resolved_at == T0 + B + EXIT_WAIT


def test_an_input_already_closed_is_not_closed_again_at_sigterm() -> None:
    m = ConnectionEndMachine(LadderPolicy(budget=B))
    m.observe(Observation(Seen.CANCEL, in_flight=True), T0)
    step = m.observe(Observation(Seen.NOTHING_IN_FLIGHT), T0 + 1.0)
    assert step.actions == (Action.CLOSE_INPUT,)
    m.observe(TICK, T0 + B * 0.5)
    step = m.observe(TICK, T0 + B * 0.75)
    assert step.actions == (Action.TERMINATE,)
    step = m.observe(Observation(Seen.GONE), T0 + B * 0.8)
    assert step.resolution is Resolution.CANCELLED
