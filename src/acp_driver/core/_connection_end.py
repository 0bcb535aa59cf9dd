"""The ladder a server runs for an agent whose client's connection ended: a pure machine.

Nobody will read the agent's answers any more; the server does what the client no longer can
and then ends the agent (``acp-driver serve``, ``remote._served``). One ``CancelLadder``
(budget ``B``), with what each rung does here::

    CANCEL (the connection ended) -> session/cancel for every session with a prompt in flight;
                                     the agent's input closed at once if no prompt is in flight
    NOTHING_IN_FLIGHT ------------>  the agent's input closed (once): a stdio agent exits on EOF
    t = B/2   CANCEL_REQUEST ------>  $/cancel_request for every prompt still unanswered
    t = 3B/4  TERMINATE ----------->  the agent's input closed (if not yet), then SIGTERM
    t = B     KILL ---------------->  SIGKILL; the exit is then waited for ``exit_wait`` at most
    GONE (the agent exited) ------->  resolved: KILLED if the KILL rung was taken, else CANCELLED

Answering the agent's own pending requests for the client is the owner's part of the first
rung (it is not an action on the agent). Pure: no clock, no I/O.
"""

from __future__ import annotations

from ._escalation import EXIT_WAIT
from ._ladder import CancelLadder, LadderPolicy, Observation, Resolution, Seen, Step
from ._rungs import Action, Rung

_RUNG_ACTIONS: dict[Rung, tuple[Action, ...]] = {
    Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),
    Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),
    Rung.TERMINATE: (Action.CLOSE_INPUT, Action.TERMINATE),
    Rung.KILL: (Action.KILL,),
}


class ConnectionEndMachine:
    """The cancel state of one ended connection (see the module docstring)."""

    def __init__(self, policy: LadderPolicy, *, exit_wait: float = EXIT_WAIT) -> None:
        self.policy = policy
        self.exit_wait = exit_wait
        self.ladder: CancelLadder | None = None
        self.resolution: Resolution | None = None
        self.input_closed = False
        self._kill_deadline: float | None = None

    def observe(self, observation: Observation, now: float) -> Step:
        """Feed one observation made at ``now``; returns what to do."""
        if self.resolution is not None:
            return Step()
        seen = observation.seen
        ladder = self.ladder
        if ladder is None:
            if seen is not Seen.CANCEL:
                return Step()
            ladder = self.ladder = CancelLadder(self.policy, now)
            return self._after(ladder.poll(now), now, close=not observation.in_flight)
        if seen is Seen.GONE:
            self.resolution = Resolution.KILLED if ladder.resolved_by is Rung.KILL else Resolution.CANCELLED
            ladder.resolve(now, self.resolution)
            return Step(resolution=self.resolution)
        if seen is Seen.NOTHING_IN_FLIGHT:
            return self._after([], now, close=True)
        if seen is Seen.TICK:
            if self._kill_deadline is not None and now >= self._kill_deadline:
                self.resolution = Resolution.KILLED
                ladder.resolve(now, self.resolution)
                return Step(resolution=self.resolution)
            return self._after(ladder.poll(now), now, close=False)
        if seen is Seen.KILL_NOW:
            return self._after(ladder.skip_to_kill(now), now, close=False)
        return Step()

    def _after(self, rungs: list[Rung], now: float, *, close: bool) -> Step:
        ladder = self.ladder
        assert ladder is not None
        actions: list[Action] = []
        for rung in rungs:
            for action in _RUNG_ACTIONS[rung]:
                if action is Action.CLOSE_INPUT:
                    if self.input_closed:
                        continue
                    self.input_closed = True
                actions.append(action)
            if rung is Rung.KILL:
                self._kill_deadline = now + self.exit_wait
        if close and not self.input_closed:
            self.input_closed = True
            actions.append(Action.CLOSE_INPUT)
        deadline = ladder.next_deadline()
        if deadline is None:
            deadline = self._kill_deadline
        return Step(tuple(rungs), tuple(actions), deadline)
