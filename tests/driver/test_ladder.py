"""The pure cancel ladder: schedule, polling with a fake clock (plain floats), resolution."""

from __future__ import annotations

import math

import pytest

from acp_driver.driver import DEFAULT_BUDGET, CancelLadder, LadderPolicy, Resolution, Rung

ALL = [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST, Rung.TERMINATE, Rung.KILL]
T0 = 1000.0  # any monotonic origin


# ---------------------------------------------------------------------- policy


def test_default_policy() -> None:
    policy = LadderPolicy()
    assert policy.budget == DEFAULT_BUDGET
    assert policy.schedule() == [
        (0.0, Rung.SESSION_CANCEL),
        (DEFAULT_BUDGET * 0.5, Rung.CANCEL_REQUEST),
        (DEFAULT_BUDGET * 0.75, Rung.TERMINATE),
        (DEFAULT_BUDGET, Rung.KILL),
    ]


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (2.0, [0.0, 1.0, 1.5, 2.0]),
        (4.0, [0.0, 2.0, 3.0, 4.0]),
        (1.5, [0.0, 0.75, 1.125, 1.5]),
        (0.0, [0.0, 0.0, 0.0, 0.0]),
    ],
)
def test_schedule_offsets(budget: float, expected: list[float]) -> None:
    schedule = LadderPolicy(budget=budget).schedule()
    assert [rung for _, rung in schedule] == ALL
    assert [offset for offset, _ in schedule] == pytest.approx(expected)


def test_schedule_custom_fractions() -> None:
    policy = LadderPolicy(budget=10.0, cancel_request_at=0.2, terminate_at=0.9)
    assert policy.schedule() == [
        (0.0, Rung.SESSION_CANCEL),
        (2.0, Rung.CANCEL_REQUEST),
        (9.0, Rung.TERMINATE),
        (10.0, Rung.KILL),
    ]


def test_extreme_but_valid_fractions() -> None:
    # Everything at once after the session/cancel, or everything at the budget.
    assert [o for o, _ in LadderPolicy(budget=3.0, cancel_request_at=0, terminate_at=0).schedule()] == [
        0.0,
        0.0,
        0.0,
        3.0,
    ]
    assert [o for o, _ in LadderPolicy(budget=3.0, cancel_request_at=1, terminate_at=1).schedule()] == [
        0.0,
        3.0,
        3.0,
        3.0,
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget": -1.0},
        {"budget": -0.001},
        {"cancel_request_at": -0.1},
        {"terminate_at": 1.5},
        {"cancel_request_at": 0.8, "terminate_at": 0.7},
        {"cancel_request_at": 1.1, "terminate_at": 1.2},
        {"cancel_request_at": math.nan},
        {"terminate_at": math.nan},
    ],
)
def test_invalid_policy_raises(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"budget|cancel_request_at"):
        LadderPolicy(**kwargs)


def test_nan_budget_is_rejected() -> None:
    with pytest.raises(ValueError, match="budget"):
        LadderPolicy(budget=math.nan)


def test_policy_is_frozen() -> None:
    policy = LadderPolicy(budget=2.0)
    with pytest.raises(AttributeError):
        policy.budget = 3.0  # type: ignore[misc]


# ---------------------------------------------------------------------- polling


def test_poll_returns_each_step_once_in_order() -> None:
    ladder = CancelLadder(LadderPolicy(budget=4.0), T0)
    assert ladder.started_at == T0
    assert not ladder.resolved
    assert ladder.resolved_by is None
    assert ladder.elapsed is None
    assert ladder.next_deadline() == T0

    assert ladder.poll(T0 - 1.0) == []  # before the cancel: nothing
    assert ladder.poll(T0) == [Rung.SESSION_CANCEL]
    assert ladder.poll(T0) == []  # once only
    assert ladder.resolved_by is Rung.SESSION_CANCEL
    assert ladder.next_deadline() == pytest.approx(T0 + 2.0)

    assert ladder.poll(T0 + 1.999) == []
    assert ladder.poll(T0 + 2.0) == [Rung.CANCEL_REQUEST]
    assert ladder.poll(T0 + 2.5) == []
    assert ladder.next_deadline() == pytest.approx(T0 + 3.0)

    assert ladder.poll(T0 + 3.0) == [Rung.TERMINATE]
    assert ladder.next_deadline() == pytest.approx(T0 + 4.0)
    assert ladder.poll(T0 + 4.0) == [Rung.KILL]
    assert ladder.next_deadline() is None
    assert ladder.poll(T0 + 100.0) == []

    # Steps are recorded with the time they became due, not the time they were polled.
    assert ladder.taken == [
        (T0, Rung.SESSION_CANCEL),
        (T0 + 2.0, Rung.CANCEL_REQUEST),
        (T0 + 3.0, Rung.TERMINATE),
        (T0 + 4.0, Rung.KILL),
    ]
    assert ladder.resolved_by is Rung.KILL
    assert not ladder.resolved  # taking KILL does not resolve: the exit does


def test_late_poll_returns_every_overdue_step_in_order() -> None:
    ladder = CancelLadder(LadderPolicy(budget=2.0), T0)
    assert ladder.poll(T0 + 1.6) == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST, Rung.TERMINATE]
    assert ladder.next_deadline() == pytest.approx(T0 + 2.0)
    assert ladder.poll(T0 + 50.0) == [Rung.KILL]
    assert [r for _, r in ladder.taken] == ALL


def test_budget_zero_everything_due_at_once() -> None:
    ladder = CancelLadder(LadderPolicy(budget=0.0), T0)
    assert ladder.next_deadline() == T0
    assert ladder.poll(T0) == ALL
    assert ladder.poll(T0) == []
    assert ladder.next_deadline() is None
    assert [at for at, _ in ladder.taken] == [T0] * 4


def test_next_deadline_tracks_the_first_pending_step() -> None:
    ladder = CancelLadder(LadderPolicy(budget=8.0, cancel_request_at=0.25, terminate_at=0.5), T0)
    deadlines = []
    now = T0
    while (deadline := ladder.next_deadline()) is not None:
        deadlines.append(deadline)
        now = deadline
        assert ladder.poll(now)
    assert deadlines == pytest.approx([T0, T0 + 2.0, T0 + 4.0, T0 + 8.0])


# ---------------------------------------------------------------------- resolution


def test_resolve_stops_everything_and_records_how() -> None:
    ladder = CancelLadder(LadderPolicy(budget=2.0), T0)
    assert ladder.poll(T0) == [Rung.SESSION_CANCEL]
    assert ladder.resolve(T0 + 0.25, Resolution.CANCELLED) is True
    assert ladder.resolved
    assert ladder.resolution is Resolution.CANCELLED
    assert ladder.resolved_at == T0 + 0.25
    assert ladder.elapsed == pytest.approx(0.25)
    assert ladder.resolved_by is Rung.SESSION_CANCEL
    # Nothing more is ever due.
    assert ladder.next_deadline() is None
    assert ladder.poll(T0 + 100.0) == []
    assert ladder.skip_to_kill(T0 + 100.0) == []
    assert [r for _, r in ladder.taken] == [Rung.SESSION_CANCEL]
    # Only the first resolution counts.
    assert ladder.resolve(T0 + 5.0, Resolution.KILLED) is False
    assert ladder.resolution is Resolution.CANCELLED
    assert ladder.elapsed == pytest.approx(0.25)


def test_resolve_mid_ladder_records_last_step_taken() -> None:
    ladder = CancelLadder(LadderPolicy(budget=2.0), T0)
    assert ladder.poll(T0 + 1.5) == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST, Rung.TERMINATE]
    assert ladder.resolve(T0 + 1.7, Resolution.KILLED)
    assert ladder.resolved_by is Rung.TERMINATE
    assert ladder.elapsed == pytest.approx(1.7)
    assert ladder.poll(T0 + 2.0) == []


def test_resolve_before_any_step() -> None:
    ladder = CancelLadder(LadderPolicy(budget=2.0), T0)
    assert ladder.resolve(T0, Resolution.COMPLETED)
    assert ladder.resolved_by is None
    assert ladder.elapsed == 0.0
    assert ladder.poll(T0 + 10.0) == []
    assert ladder.taken == []


# ---------------------------------------------------------------------- skip to kill


def test_skip_to_kill_from_the_start() -> None:
    ladder = CancelLadder(LadderPolicy(budget=10.0), T0)
    assert ladder.skip_to_kill(T0 + 0.1) == [Rung.KILL]
    assert ladder.taken == [(T0 + 0.1, Rung.KILL)]
    assert ladder.resolved_by is Rung.KILL
    assert ladder.next_deadline() is None
    assert ladder.poll(T0 + 100.0) == []
    assert ladder.skip_to_kill(T0 + 0.2) == []  # once


def test_skip_to_kill_mid_ladder_drops_the_remaining_steps() -> None:
    ladder = CancelLadder(LadderPolicy(budget=10.0), T0)
    assert ladder.poll(T0) == [Rung.SESSION_CANCEL]
    assert ladder.skip_to_kill(T0 + 1.0) == [Rung.KILL]
    assert [r for _, r in ladder.taken] == [Rung.SESSION_CANCEL, Rung.KILL]
    assert ladder.poll(T0 + 100.0) == []
    assert ladder.resolve(T0 + 1.2, Resolution.KILLED)
    assert ladder.resolved_by is Rung.KILL
    assert ladder.elapsed == pytest.approx(1.2)


def test_skip_to_kill_after_kill_or_resolution_is_a_no_op() -> None:
    ladder = CancelLadder(LadderPolicy(budget=1.0), T0)
    assert ladder.poll(T0 + 1.0) == ALL
    assert ladder.skip_to_kill(T0 + 1.0) == []
    assert [r for _, r in ladder.taken] == ALL

    resolved = CancelLadder(LadderPolicy(budget=1.0), T0)
    resolved.resolve(T0, Resolution.CANCELLED)
    assert resolved.skip_to_kill(T0) == []
    assert resolved.taken == []


def test_rung_and_resolution_wire_names() -> None:
    assert [r.value for r in ALL] == ["session_cancel", "cancel_request", "terminate", "kill"]
    assert {r.value for r in Resolution} == {
        "completed",
        "cancelled",
        "killed",
        "agent_exited",
        "error",
        "disconnected",
    }


def test_repr_names_the_steps() -> None:
    ladder = CancelLadder(LadderPolicy(budget=1.0), T0)
    ladder.poll(T0)
    assert "session_cancel" in repr(ladder)
