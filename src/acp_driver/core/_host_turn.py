"""A prompt turn as the host sees it: a pure state machine from observations to actions.

All the decisions about a turn's cancellation live here, in one table; the driver only
reports what it observed (with the time, from whatever clock it was given) and carries out the
actions it gets back. Nothing here waits, reads a clock or does I/O.

States and what moves them (``TRANSITIONS`` is the table)::

    RUNNING ---- cancel ------------> CANCELLING   actions: session_cancel (then the ladder)
    RUNNING ---- withdraw ----------> CANCELLING   v2, held behind work: cancel_request for it
                                                   only (the held ladder); no confirmation by
                                                   the budget: RESOLVED CANCELLED "unconfirmed"
    CANCELLING - inserted ----------> CANCELLING   v2, withdrawn but inserted anyway: the full
                                                   ladder from now, its deadlines from the cancel
    RUNNING ---- kill_now ----------> CANCELLING   actions: kill
    CANCELLING - tick (deadline) ---> CANCELLING   actions: the ladder's steps now due
    CANCELLING - kill_now ----------> CANCELLING   actions: kill (skips what was left)
    CANCELLING - tick after kill ---> RESOLVED     KILLED: SIGKILL sent, no exit seen in time
                                                   (remote: DISCONNECTED, the connection aborted)
    any -------- answered/failed/gone/abandoned -> RESOLVED  resolution from what ended it
    RESOLVED --- anything ----------> RESOLVED     no action (late observations are harmless)

How an ending maps to a ``Resolution`` (``resolve``):

- the connection ended before the answer: for a remote agent (``remote=True``: reached over
  a network, nothing to signal here) ``DISCONNECTED``, whoever ended it; else ``KILLED`` if the
  host signalled the agent (the ladder's terminate/kill, or a kill or shutdown of the agent),
  else ``AGENT_EXITED``;
- stop reason ``cancelled`` (or ``-32800`` on the prompt), or the host abandoned the prompt:
  ``CANCELLED``;
- an error answer, or (v2) the stop reason ``error``: ``ERROR``; any other stop reason:
  ``COMPLETED``.

What the result says happened (``attribute``, decided once, when the turn resolves):

- ``cancelled_by``: for a ``CANCELLED`` turn, who cancelled it -- ``host`` (the host asked,
  closed the session, or abandoned the prompt) or ``agent`` (stop reason ``cancelled`` or
  ``-32800`` that nobody here asked for); None for any other resolution;
- ``resolved_by``: for a cancelled-by-the-host turn, the ladder step that took effect (the last
  one taken before the end); v2, for a held prompt: ``withdrawn`` (the agent refused it at the
  withdrawal) or ``unconfirmed`` (it did not within the budget: the host resolved the turn,
  and cancels its span if the agent inserts it later); ``ignored`` when the agent ended the turn on its own terms after
  the cancel (``COMPLETED`` with another stop reason: it ignored the cancel, or finished first);
  ``unreported`` when it ended it with no stop reason at all (v2's idle may omit it); None when
  the host never cancelled.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from ._escalation import EXIT_WAIT
from ._ladder import HELD_SCHEDULE, CancelLadder, LadderPolicy, Observation, Resolution, Seen, Step
from ._profile import V1, ProtocolProfile
from ._rungs import Action, Rung


class TurnState(enum.Enum):
    """Where a turn is, as far as its cancellation goes."""

    __hash__ = object.__hash__  # a transition table key: identity (C) hash, not ``hash(name)``

    RUNNING = "running"
    """Prompt sent; nobody asked to cancel."""
    CANCELLING = "cancelling"
    """A cancel was requested; the ladder climbs until the turn resolves."""
    RESOLVED = "resolved"
    """The turn ended; its resolution is final."""


_NOTHING = Step()
_RESOLVED = {resolution: Step(resolution=resolution) for resolution in Resolution}


class TurnMachine:
    """The cancellation state of one prompt turn (see the module docstring)."""

    def __init__(
        self,
        policy: LadderPolicy,
        *,
        exit_wait: float = EXIT_WAIT,
        remote: bool = False,
        profile: ProtocolProfile = V1,
    ) -> None:
        self.policy = policy
        self.profile = profile
        """The connection's protocol version: what each rung does on the wire."""
        self.remote = remote
        """The agent is reached over a network: a lost connection resolves ``DISCONNECTED``."""
        self.exit_wait = exit_wait
        """After SIGKILL, how long the exit may take before the turn is resolved ``KILLED`` anyway."""
        self.state = TurnState.RUNNING
        self.ladder: CancelLadder | None = None
        self.resolution: Resolution | None = None
        self.cancel_requested_at: float | None = None
        self._kill_deadline: float | None = None
        self._abandoned = False
        self._unreported = False
        """v2: the idle that ended the turn reported no stop reason."""
        self._give_up_at: float | None = None
        """v2, a held prompt being withdrawn: when the host resolves it unconfirmed (the budget)."""
        self.withdrawing = False
        """v2: the cancel is a withdrawal of a held prompt (it never ran)."""
        self.gave_up = False
        """v2: that withdrawal was not confirmed in time; the host resolved the turn itself."""
        self.host_closed = False
        """The host closed the turn's session (``session/close`` cancels its work): a
        cancellation that follows is the host's."""
        self.cancelled_by: str | None = None
        """Who cancelled a ``CANCELLED`` turn: ``host`` or ``agent`` (see the module docstring)."""
        self.resolved_by: str | None = None
        """The cancel's effect: the ladder step that took effect, ``ignored``, or None (no cancel)."""

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_requested_at is not None

    @property
    def signalled(self) -> bool:
        """This turn's ladder sent SIGTERM or SIGKILL."""
        ladder = self.ladder
        return ladder is not None and any(r in (Rung.TERMINATE, Rung.KILL) for _, r in ladder.taken)

    def observe(self, observation: Observation, now: float) -> Step:
        """Feed one observation made at ``now``; returns what to do."""
        handler = TRANSITIONS.get((self.state, observation.seen))
        if handler is None:
            return _NOTHING
        return handler(self, observation, now)

    # ------------------------------------------------------------------ transitions

    def _start_cancel(self, observation: Observation, now: float) -> Step:
        self.state = TurnState.CANCELLING
        self.cancel_requested_at = now
        self.ladder = CancelLadder(self.policy, now)
        if observation.seen is Seen.KILL_NOW:
            return self._after(self.ladder.skip_to_kill(now), now)
        return self._after(self.ladder.poll(now), now)

    def _start_withdraw(self, observation: Observation, now: float) -> Step:
        self.state = TurnState.CANCELLING
        self.cancel_requested_at = now
        self.withdrawing = True
        self.ladder = CancelLadder(self.policy, now, HELD_SCHEDULE)
        self._give_up_at = now + self.policy.budget
        return self._after(self.ladder.poll(now), now)

    def _inserted(self, observation: Observation, now: float) -> Step:
        if self._give_up_at is None:
            return _NOTHING
        assert self.ladder is not None
        self._give_up_at = None
        return self._after(self.ladder.escalate(now), now)

    def _tick(self, observation: Observation, now: float) -> Step:
        if self._give_up_at is not None and now >= self._give_up_at:
            return self._give_up(now)
        if self._kill_deadline is not None and now >= self._kill_deadline:
            return self._resolve_as(Resolution.DISCONNECTED if self.remote else Resolution.KILLED, now)
        assert self.ladder is not None
        return self._after(self.ladder.poll(now), now)

    def _give_up(self, now: float) -> Step:
        """The withdrawal of a held prompt was not confirmed in time: the host resolves it."""
        self.gave_up = True
        return self._resolve_as(Resolution.CANCELLED, now)

    def _kill_now(self, observation: Observation, now: float) -> Step:
        if self._give_up_at is not None:
            return self._give_up(now)  # held: nothing of it runs to kill
        assert self.ladder is not None
        return self._after(self.ladder.skip_to_kill(now), now)

    def _end(self, observation: Observation, now: float) -> Step:
        self._abandoned = observation.seen is Seen.ABANDONED
        self._unreported = observation.seen is Seen.ANSWERED and observation.stop_reason is None
        return self._resolve_as(self.resolve(observation), now)

    def _after(self, rungs: list[Rung], now: float) -> Step:
        ladder = self.ladder
        assert ladder is not None
        if Rung.KILL in rungs:
            self._kill_deadline = now + self.exit_wait
        deadline = ladder.next_deadline()
        if deadline is None and self._give_up_at is not None:
            deadline = self._give_up_at  # withdrawn: the agent's -32800 or the host's own end
        if deadline is None and self._kill_deadline is not None:
            deadline = self._kill_deadline  # SIGKILL sent: the exit is certain; wait for it, bounded
        table = self.profile.rung_actions
        actions: tuple[Action, ...]
        if len(rungs) == 1:  # the common case (a cancel, one tick): no generator
            actions = table.get(rungs[0], ())
        else:
            actions = tuple(a for rung in rungs for a in table.get(rung, ()))
        return Step(tuple(rungs), actions, deadline)

    def _resolve_as(self, resolution: Resolution, now: float) -> Step:
        self.state = TurnState.RESOLVED
        self.resolution = resolution
        if self.ladder is not None:
            self.ladder.resolve(now, resolution)
        self.cancelled_by, self.resolved_by = self.attribute(resolution)
        return _RESOLVED[resolution]

    def attribute(self, resolution: Resolution) -> tuple[str | None, str | None]:
        """(who cancelled, what the cancel did) for a turn ending in ``resolution``."""
        host_cancelled = self.cancel_requested
        if resolution is Resolution.CANCELLED:
            cancelled_by = "host" if host_cancelled or self._abandoned or self.host_closed else "agent"
        else:
            cancelled_by = None
        if not host_cancelled:
            return cancelled_by, None
        if resolution is Resolution.COMPLETED:
            # v2: an idle with no stop reason after the cancel says nothing either way.
            return cancelled_by, "unreported" if self._unreported else "ignored"
        ladder = self.ladder
        assert ladder is not None
        last = ladder.resolved_by
        if last is Rung.WITHDRAW and resolution is Resolution.CANCELLED:
            return cancelled_by, "unconfirmed" if self.gave_up else "withdrawn"
        return cancelled_by, last.value if last is not None else None

    # ------------------------------------------------------------------ the mapping

    def resolve(self, observation: Observation) -> Resolution:
        """The resolution an ending observation stands for (see the module docstring)."""
        if observation.seen is Seen.GONE:
            if self.remote:
                return Resolution.DISCONNECTED
            return Resolution.KILLED if observation.signalled or self.signalled else Resolution.AGENT_EXITED
        if self.profile.confirms_cancel(observation.stop_reason) or observation.seen is Seen.ABANDONED:
            return Resolution.CANCELLED
        if observation.seen is Seen.FAILED or observation.stop_reason in self.profile.error_stop_reasons:
            return Resolution.ERROR
        return Resolution.COMPLETED


_Transition = Callable[[TurnMachine, Observation, float], Step]

TRANSITIONS: dict[tuple[TurnState, Seen], _Transition] = {
    (TurnState.RUNNING, Seen.CANCEL): TurnMachine._start_cancel,
    (TurnState.RUNNING, Seen.KILL_NOW): TurnMachine._start_cancel,
    (TurnState.RUNNING, Seen.WITHDRAW): TurnMachine._start_withdraw,
    (TurnState.CANCELLING, Seen.INSERTED): TurnMachine._inserted,
    (TurnState.RUNNING, Seen.ANSWERED): TurnMachine._end,
    (TurnState.RUNNING, Seen.FAILED): TurnMachine._end,
    (TurnState.RUNNING, Seen.GONE): TurnMachine._end,
    (TurnState.RUNNING, Seen.ABANDONED): TurnMachine._end,
    (TurnState.CANCELLING, Seen.TICK): TurnMachine._tick,
    (TurnState.CANCELLING, Seen.KILL_NOW): TurnMachine._kill_now,
    (TurnState.CANCELLING, Seen.ANSWERED): TurnMachine._end,
    (TurnState.CANCELLING, Seen.FAILED): TurnMachine._end,
    (TurnState.CANCELLING, Seen.GONE): TurnMachine._end,
    (TurnState.CANCELLING, Seen.ABANDONED): TurnMachine._end,
}
"""(state, what was seen) -> transition. Pairs not listed change nothing: a second cancel, a
tick while running or after the end, anything after the resolution."""
