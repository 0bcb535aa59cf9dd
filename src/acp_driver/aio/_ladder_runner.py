"""The one executor of the cancel ladder: a core machine's steps, on a clock, against a peer.

Whoever owns a cancel -- the host's prompt turn (``driver``), a served connection whose client
went (``remote``) -- builds a pure machine from the core (``TurnMachine``,
``ConnectionEndMachine``), a ``PeerControl`` for what the agent is to it, and one
``LadderRunner``. The runner feeds the machine what the owner observed, with the time of the
injected ``Clock``; carries out the actions of every step it gets back, in order; reports
each rung taken (``on_rung``, before its actions: the owner's own part of a rung, such as
cancelling the tasks that serve pending permission requests -- their ``cancelled`` answers are
written after the rung's ``session/cancel``, the order the spec gives); asks the clock for a tick at
the deadline the machine named; and reports the resolution once (``on_resolved``). Adding a
rung is a change to the core's tables and to ``PeerControl``'s implementations, never to this
executor's callers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from ..core import Action, CancelMachine, Observation, RequestId, Resolution, Rung, Seen, Step
from ._clock import Clock, Timer

logger = logging.getLogger("acp_driver.ladder")

_TICK = Observation(Seen.TICK)


def _none() -> tuple[()]:
    return ()


class PeerControl(Protocol):
    """What a cancel ladder can do to an agent. A local process, a network connection and
    ``serve``'s backend each implement it; none of these may block or raise."""

    def cancel_session(self, session_id: str) -> None:
        """Send ``session/cancel`` for ``session_id``."""

    def cancel_request(self, request_id: RequestId) -> None:
        """Send ``$/cancel_request`` for one of the requests the agent is serving."""

    def close_input(self) -> None:
        """End the agent's input (a stdio agent sees EOF on stdin)."""

    def terminate(self) -> None:
        """SIGTERM to the agent's process group (a network connection: close it gracefully)."""

    def kill(self) -> None:
        """SIGKILL to the agent's process group (a network connection: abort it)."""


class LadderRunner:
    """Runs one cancel machine (see the module docstring)."""

    def __init__(
        self,
        machine: CancelMachine,
        peer: PeerControl,
        clock: Clock,
        *,
        sessions: Callable[[], Iterable[str]],
        requests: Callable[[], Iterable[RequestId]],
        on_rung: Callable[[Rung], object] | None = None,
        on_resolved: Callable[[Resolution, float], object] | None = None,
        name: str = "ladder",
    ) -> None:
        self.machine = machine
        self.peer = peer
        self.clock = clock
        self.sessions = sessions
        """The sessions ``SESSION_CANCEL`` is for (asked when the action is carried out)."""
        self.requests = requests
        """The requests ``CANCEL_REQUEST`` is for (asked when the action is carried out)."""
        self.on_rung = on_rung
        self.on_resolved = on_resolved
        self.name = name
        self.resolution: Resolution | None = None
        self._timer: Timer | None = None

    def observe(self, observation: Observation) -> Step:
        """Tell the machine what was seen now; carry out what it says. Returns the step."""
        if self.resolution is not None:
            return Step()
        now = self.clock.now()
        step = self.machine.observe(observation, now)
        for rung in step.rungs:
            if self.on_rung is not None:
                try:
                    self.on_rung(rung)
                except Exception:
                    logger.exception("%s: the %s rung's hook failed", self.name, rung.value)
        for action in step.actions:
            self._carry_out(action)
        if step.resolution is not None:
            self.resolution = step.resolution
            self.stop()
            on_resolved = self.on_resolved
            # Resolved: nothing more is carried out, so the owner's hooks are dropped -- no cycle
            # is left between the owner and its runner, and both are freed without the collector.
            self.on_rung = self.on_resolved = None
            self.sessions = self.requests = _none
            if on_resolved is not None:
                on_resolved(step.resolution, now)
        elif step.deadline is not None:
            self.stop()
            self._timer = self.clock.call_at(step.deadline, self._tick)
        return step

    def stop(self) -> None:
        """Forget the pending tick (the owner is done with the ladder)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        self.observe(_TICK)

    def _carry_out(self, action: Action) -> None:
        peer = self.peer
        try:
            if action is Action.SESSION_CANCEL:
                for session_id in dict.fromkeys(self.sessions()):
                    peer.cancel_session(session_id)
            elif action is Action.CANCEL_REQUEST:
                for request_id in self.requests():
                    peer.cancel_request(request_id)
            elif action is Action.CLOSE_INPUT:
                peer.close_input()
            elif action is Action.TERMINATE:
                peer.terminate()
            elif action is Action.KILL:
                peer.kill()
        except Exception:
            logger.exception("%s: %s failed", self.name, action.value)
        else:
            logger.debug("%s: %s", self.name, action.value)
