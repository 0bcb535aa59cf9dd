"""The pure turn machine for a remote agent (``TurnMachine(remote=True)``): the same ladder, but a
lost connection resolves ``DISCONNECTED`` -- whoever ended it -- never ``KILLED`` or
``AGENT_EXITED`` (there is no process on the host's side). Plain floats for time."""

from __future__ import annotations

from acp_driver.core import LadderPolicy, Observation, Resolution, Rung, Seen, TurnMachine
from acp_driver.driver import CancelOutcome
from acp_driver.driver._results import worst

T0 = 500.0
POLICY = LadderPolicy(budget=4.0)  # cancel_request at +2, close at +3, abort at +4


def test_the_ladder_is_the_same_and_the_close_rung_resolves_disconnected() -> None:
    m = TurnMachine(POLICY, exit_wait=5.0, remote=True)
    assert m.observe(Observation(Seen.CANCEL), T0).rungs == (Rung.SESSION_CANCEL,)
    assert m.observe(Observation(Seen.TICK), T0 + 2).rungs == (Rung.CANCEL_REQUEST,)
    step = m.observe(Observation(Seen.TICK), T0 + 3)
    assert step.rungs == (Rung.TERMINATE,)  # carried out as "close the connection"
    assert step.deadline == T0 + 4
    step = m.observe(Observation(Seen.GONE, signalled=True), T0 + 3.01)
    assert step.resolution is Resolution.DISCONNECTED
    assert m.resolved_by == "terminate"
    assert m.cancelled_by is None


def test_a_dropped_connection_is_disconnected_not_an_exit() -> None:
    remote = TurnMachine(POLICY, remote=True)
    assert remote.observe(Observation(Seen.GONE), T0).resolution is Resolution.DISCONNECTED
    local = TurnMachine(POLICY)
    assert local.observe(Observation(Seen.GONE), T0).resolution is Resolution.AGENT_EXITED
    signalled = TurnMachine(POLICY)
    assert signalled.observe(Observation(Seen.GONE, signalled=True), T0).resolution is Resolution.KILLED


def test_after_the_abort_the_backstop_tick_resolves_disconnected() -> None:
    m = TurnMachine(POLICY, exit_wait=1.0, remote=True)
    step = m.observe(Observation(Seen.KILL_NOW), T0)
    assert step.rungs == (Rung.KILL,)  # carried out as "abort the connection"
    assert step.deadline == T0 + 1.0
    assert m.observe(Observation(Seen.TICK), T0 + 1.0).resolution is Resolution.DISCONNECTED


def test_an_answer_still_wins_over_the_network() -> None:
    m = TurnMachine(POLICY, remote=True)
    m.observe(Observation(Seen.CANCEL), T0)
    step = m.observe(Observation(Seen.ANSWERED, stop_reason="cancelled"), T0 + 0.1)
    assert step.resolution is Resolution.CANCELLED


def test_disconnected_ranks_among_the_least_graceful() -> None:
    assert (
        worst([Resolution.CANCELLED, Resolution.DISCONNECTED, Resolution.COMPLETED])
        is Resolution.DISCONNECTED
    )
    assert worst([Resolution.DISCONNECTED, Resolution.KILLED]) is Resolution.KILLED
    assert (
        CancelOutcome("agent", Resolution.DISCONNECTED, "terminate", 1.0).resolution.value == "disconnected"
    )
