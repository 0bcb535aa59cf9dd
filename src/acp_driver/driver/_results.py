"""What the host learns of a turn and of a cancel: ``TurnResult``, ``CancelOutcome``, tool calls."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import CancelLadder, Resolution, RpcError


@dataclass(frozen=True)
class CancelOutcome:
    """What a cancel achieved."""

    scope: str
    resolution: Resolution | None
    """How the target ended (None: nothing was running)."""
    resolved_by: str
    """``finished`` (it had already ended), ``idle`` (nothing to cancel), the ladder step that
    took effect (``session_cancel``, ``cancel_request``, ``terminate``, ``kill``), ``ignored``
    (the agent ended the turn on its own terms, e.g. ``end_turn``, after the cancel: it ignored
    the cancel or finished first), ``unreported`` (v2: it ended with an idle that gave no stop
    reason), ``withdrawn`` (v2: a held prompt, withdrawn before it ran), or ``closed``."""
    elapsed: float
    """Seconds from the cancel to the resolution."""
    stop_reason: str | None = None
    steps: tuple[str, ...] = ()
    """Ladder steps taken, in order."""


@dataclass(frozen=True)
class TurnResult:
    """How a prompt turn ended."""

    stop_reason: str | None
    """The agent's stop reason (``cancelled`` also when it answered ``-32800``); None on error."""
    resolution: Resolution
    elapsed: float
    """Seconds from sending the prompt to the resolution."""
    error: RpcError | None = None
    """The error, when the agent answered one or the connection ended."""
    cancel: CancelOutcome | None = None
    """What the host's cancel did, if the host cancelled (None otherwise)."""
    cancelled_by: str | None = None
    """For a ``cancelled`` turn, who cancelled it: ``host``, or ``agent`` (it answered
    ``cancelled`` though nobody here asked)."""


@dataclass
class ToolCallState:
    """What the host knows of one tool call of a turn."""

    id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    cancelled: bool = False
    """Marked cancelled locally when the turn was cancelled before it finished (spec SHOULD)."""
    updates: int = 0

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


def outcome_from_ladder(
    scope: str, ladder: CancelLadder, stop_reason: str | None, resolved_by: str | None = None
) -> CancelOutcome:
    """The outcome of a cancel; ``resolved_by`` is the machine's verdict (``TurnMachine.resolved_by``)."""
    if resolved_by is None:
        last = ladder.resolved_by
        resolved_by = last.value if last is not None else "finished"
    return CancelOutcome(
        scope=scope,
        resolution=ladder.resolution,
        resolved_by=resolved_by,
        elapsed=ladder.elapsed or 0.0,
        stop_reason=stop_reason,
        steps=tuple(r.value for _, r in ladder.taken),
    )


_WORST_FIRST = (
    Resolution.KILLED,
    Resolution.DISCONNECTED,
    Resolution.AGENT_EXITED,
    Resolution.ERROR,
    Resolution.COMPLETED,
    Resolution.CANCELLED,
)


def worst(resolutions: list[Resolution | None]) -> Resolution | None:
    """The least graceful of several resolutions (for a cancel of many turns)."""
    present = {r for r in resolutions if r is not None}
    for resolution in _WORST_FIRST:
        if resolution in present:
            return resolution
    return None
