"""The cancel ladder: a pure schedule of escalating steps that always resolves a turn.

After a host cancels a turn, the agent gets ever less polite requests to stop:

    t = 0                    SESSION_CANCEL   send session/cancel (and answer pending permissions)
    t = budget * 0.5         CANCEL_REQUEST   send $/cancel_request for the session/prompt
    t = budget * 0.75        TERMINATE        SIGTERM to the agent's process group
    t = budget               KILL             SIGKILL to the agent's process group

For a remote agent (over a network) TERMINATE and KILL are carried out as "close the
connection gracefully" and "abort it": the server ends the agent's work.

Whatever happens first -- the agent answers the prompt, or its process is gone -- resolves
the ladder; ``resolved_by`` names the last step taken before that. A host may jump to KILL at
any time (``skip_to_kill``, e.g. a second Ctrl-C).

Pure: no clock, no I/O. The caller passes ``now`` (any monotonic seconds), executes the steps
``poll`` returns and sleeps until ``next_deadline``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Protocol

from ._rungs import Action, Rung

DEFAULT_BUDGET = 6.0
"""Seconds from the cancel to SIGKILL, by default."""


class Resolution(Enum):
    """How a turn ended."""

    __hash__ = object.__hash__  # members are singletons: identity (C) hash, not ``hash(name)``

    COMPLETED = "completed"
    """The agent answered a stop reason of its own (no cancel, or a cancel it did not honour)."""
    CANCELLED = "cancelled"
    """The agent complied with the cancel (stopReason ``cancelled`` or ``-32800``)."""
    KILLED = "killed"
    """The ladder had to kill the agent."""
    AGENT_EXITED = "agent_exited"
    """The agent process ended (or closed its output) before answering, unprompted by a kill."""
    ERROR = "error"
    """The agent answered the prompt with a JSON-RPC error (or a protocol error occurred)."""
    DISCONNECTED = "disconnected"
    """A remote agent's connection ended before the answer: the network or the server dropped
    it, or the ladder closed it (there is no process on the host's side to kill)."""


@dataclass(frozen=True)
class LadderPolicy:
    """When each step happens, as fractions of one ``budget`` (seconds from cancel to SIGKILL)."""

    budget: float = DEFAULT_BUDGET
    cancel_request_at: float = 0.5
    terminate_at: float = 0.75
    _schedule: tuple[tuple[float, Rung], ...] = field(init=False, repr=False, compare=False)
    """``schedule()``, computed once (every cancel reads it)."""

    def __post_init__(self) -> None:
        if not self.budget >= 0 or self.budget == float("inf"):  # NaN fails every comparison
            raise ValueError("budget must be a finite number >= 0")
        if not 0 <= self.cancel_request_at <= self.terminate_at <= 1:
            raise ValueError("need 0 <= cancel_request_at <= terminate_at <= 1")
        b = self.budget
        steps = (
            (0.0, Rung.SESSION_CANCEL),
            (b * self.cancel_request_at, Rung.CANCEL_REQUEST),
            (b * self.terminate_at, Rung.TERMINATE),
            (b, Rung.KILL),
        )
        object.__setattr__(self, "_schedule", steps)  # frozen: set once, here

    def schedule(self) -> list[tuple[float, Rung]]:
        """(offset in seconds, step), in order."""
        return list(self._schedule)


HELD_SCHEDULE: tuple[tuple[float, Rung], ...] = ((0.0, Rung.WITHDRAW),)
"""v2, a prompt held behind other work: withdrawn at once; the host gives up at the budget."""


class CancelLadder:
    """The ladder for one cancel, started at ``started_at``."""

    def __init__(
        self, policy: LadderPolicy, started_at: float, steps: tuple[tuple[float, Rung], ...] | None = None
    ) -> None:
        self.policy = policy
        self.started_at = started_at
        self._steps = policy._schedule if steps is None else steps
        self._next = 0
        """Index in ``_steps`` of the first step not taken (``len``: none left)."""
        self.taken: list[tuple[float, Rung]] = []
        """Steps executed so far, with the time they became due."""
        self.resolution: Resolution | None = None
        self.resolved_at: float | None = None

    @property
    def resolved(self) -> bool:
        return self.resolution is not None

    @property
    def resolved_by(self) -> Rung | None:
        """The last step taken before the turn resolved (None: resolved before any step)."""
        return self.taken[-1][1] if self.taken else None

    @property
    def elapsed(self) -> float | None:
        """Seconds from the cancel to the resolution."""
        return None if self.resolved_at is None else self.resolved_at - self.started_at

    def poll(self, now: float) -> list[Rung]:
        """Steps due at ``now`` that were not taken yet, in order (each returned once)."""
        if self.resolution is not None:
            return []
        due = []
        steps, i, started_at = self._steps, self._next, self.started_at
        while i < len(steps) and started_at + steps[i][0] <= now:
            rung = steps[i][1]
            self.taken.append((started_at + steps[i][0], rung))
            due.append(rung)
            i += 1
        self._next = i
        return due

    def next_deadline(self) -> float | None:
        """When the next step is due (None once resolved or when every step was taken)."""
        if self.resolution is not None or self._next >= len(self._steps):
            return None
        return self.started_at + self._steps[self._next][0]

    def escalate(self, now: float) -> list[Rung]:
        """Go on as the full ladder from ``now`` (v2: a held prompt the host was withdrawing was
        inserted anyway): ``SESSION_CANCEL`` now, the later steps at their times from the
        original cancel (the budget still counts from it)."""
        if self.resolution is not None:
            return []
        self._steps = self.policy._schedule
        self._next = 1
        self.taken.append((now, Rung.SESSION_CANCEL))
        return [Rung.SESSION_CANCEL, *self.poll(now)]

    def skip_to_kill(self, now: float) -> list[Rung]:
        """Jump straight to SIGKILL: returns ``[KILL]`` unless it was taken or the ladder resolved."""
        if self.resolution is not None or self._next >= len(self._steps):
            return []
        self._next = len(self._steps)
        self.taken.append((now, Rung.KILL))
        return [Rung.KILL]

    def resolve(self, now: float, resolution: Resolution) -> bool:
        """The turn ended; True the first time. Later steps are dropped."""
        if self.resolution is not None:
            return False
        self.resolution = resolution
        self.resolved_at = now
        self._next = len(self._steps)
        return True

    def __repr__(self) -> str:
        steps = ", ".join(r.value for _, r in self.taken)
        return f"CancelLadder(taken=[{steps}], resolution={self.resolution})"


# ---------------------------------------------------------------------- the machines' vocabulary
# What a cancel machine (the host turn's ``TurnMachine``, a served connection's
# ``ConnectionEndMachine``) is told and what it answers; ``aio.LadderRunner`` feeds the one and
# carries out the other.


class Seen(enum.Enum):
    """What the ladder's owner observed."""

    __hash__ = object.__hash__  # a transition table key: identity (C) hash, not ``hash(name)``

    CANCEL = "cancel"
    """The host asked to cancel the turn (idempotent)."""
    KILL_NOW = "kill_now"
    """The host asked to skip to SIGKILL (e.g. a second Ctrl-C)."""
    TICK = "tick"
    """Time passed: the deadline the machine asked for has come."""
    ANSWERED = "answered"
    """The agent answered the prompt with a stop reason."""
    FAILED = "failed"
    """The agent answered the prompt with an error (``-32800`` counts as ``cancelled``)."""
    GONE = "gone"
    """The connection ended before the answer (the agent exited or was killed)."""
    ABANDONED = "abandoned"
    """The host stopped waiting for the answer (the task awaiting the prompt was cancelled)."""
    WITHDRAW = "withdraw"
    """v2: the host cancelled a prompt held behind other work (the held ladder: withdraw it)."""
    INSERTED = "inserted"
    """v2: the agent inserted a prompt the host was withdrawing (the full ladder takes over)."""
    NOTHING_IN_FLIGHT = "nothing_in_flight"
    """A connection's end: no prompt is unanswered any more (the agent's input can close)."""


class Observation(NamedTuple):
    """What was seen (immutable; a named tuple: made on every observation, at half the cost of
    a frozen dataclass)."""

    seen: Seen
    stop_reason: str | None = None
    """For ``ANSWERED`` (and ``FAILED`` with ``-32800``: ``cancelled``)."""
    signalled: bool = False
    """For ``GONE``: the host signalled the agent's process group outside this turn's ladder."""
    in_flight: bool = True
    """For a connection's end (``CANCEL``): whether any prompt is still unanswered."""


class Step(NamedTuple):
    """What to do after an observation (immutable; a named tuple, like ``Observation``)."""

    rungs: tuple[Rung, ...] = ()
    """Ladder steps taken now, in order (what a progress display shows)."""
    actions: tuple[Action, ...] = ()
    """What to do to the agent for them, in order (the runner carries these out)."""
    deadline: float | None = None
    """When to report the next ``TICK`` (None: nothing to wait for)."""
    resolution: Resolution | None = None
    """Set on the step that resolves the turn (reported once)."""


class CancelMachine(Protocol):
    """A pure machine that decides a cancel: observations in, steps out."""

    @property
    def ladder(self) -> CancelLadder | None: ...

    def observe(self, observation: Observation, now: float) -> Step: ...
