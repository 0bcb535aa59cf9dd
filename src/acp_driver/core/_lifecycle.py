"""A prompt's life on the host's side, one lifecycle per protocol version behind one interface.

Everything that decides when a host's turn starts, whose an update is, and when the turn ends
lives here; the host (``driver``) reports what it read, in wire order, and carries out the
decisions it gets back. Pure: no I/O, no clock.

Events in (one method each): a prompt ``sent``, its result ``answered``, its error ``refused``,
an ``update`` read, a ``cancel`` or a ``withdraw`` the host sent, a withdrawal the host
``gave_up`` on, the turn ``forget``-ed. Decisions out (``Decision``): ``INSERTED``, ``ENDED``
with a stop reason, ``REFUSED``, ``RESEND``, ``CANCEL_SPAN``, ``SPEAKS_V1``.

**v1** (``V1Session``): the answer to ``session/prompt`` ends the turn with its stop reason.
An update belongs to the turn whose prompt is unanswered at that point of the input; after the
answer it is late (a peer violation), and so is an update of a tool call the previous turn
started that the running one never announced. Session-wide updates go to the running turn too.

**v2** (``V2Session``): the answer says the prompt was *inserted*; the work it starts ends with
an idle ``state_update``; a prompt sent while the agent works is *held*, inserted later, in
order. Each prompt's life is a row of ``V2_TRANSITIONS``::

              sent
               │                      withdraw (the host cancels it while work runs ahead)
               ▼            ┌───────────────────────────────────────────┐
             HELD ──────────┤ cancel of another turn     ┌──► WITHDRAWING ─ -32800 ─► (refused: withdrawn)
               │            └──────► COLLATERAL          │        │  │
      inserted │                  │ -32800 ─► RESEND ─► HELD      │  └ gave up (budget) ─► ABANDONED
  (answer or   │                  │ inserted ─► LIVE       inserted: CANCEL_SPAN   inserted: CANCEL_SPAN,
  user_message)▼                                                  ▼              never live
             LIVE ───── cancel ────────────────────────────► CANCELLING
               │ idle after its work                              │ next idle
               ▼                                                  ▼
            (ENDED, stop reason)                           (ENDED, stop reason or none)

- **insertion**: by the prompt's answer (``{messageId}``), or earlier by a ``user_message``
  with a message id not of a live turn while the prompt is the oldest held (prompts are
  inserted in the order sent);
- **what ends a v2 turn** (decided here and nowhere else, ``V2Session._idle``): an idle
  ``state_update`` ends every live turn that has seen foreground work (``running`` or
  ``requires_action`` while it was live, or inserted while the agent was busy) and every
  cancelling one; a repeated idle is a snapshot, except one with a stop reason right after a
  new insertion (work so quick the agent never said ``running``). While a ``session/resume``
  is in flight every state update is a snapshot;
- **ownership**: a message's updates belong to the live turn that inserted it or works on it
  (a message id of an ended turn means nothing: agents reuse ids); a tool call, terminal or
  plan belongs to the live turn it was first seen in; anything else of no live turn is
  background work (normal in v2, not a late update).

The version spoken is the connection's (``core.negotiation``); a v2 agent that answers a prompt
the v1 way says it speaks v1 (``SPEAKS_V1``), and the host switches lifecycles.

Keys are whatever the host uses for a turn (hashable).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ._negotiation import answers_like_v1
from ._profile import V1, V2, ProtocolProfile

K = TypeVar("K", bound=Hashable)

_UNSEEN: Any = object()
"""An entity id not seen before (None in the table: seen, of a turn that ended)."""

BUSY_STATES = frozenset({"running", "requires_action"})
_MESSAGE_UPDATES = frozenset(
    {
        "user_message",
        "user_message_chunk",
        "agent_message",
        "agent_message_chunk",
        "agent_thought",
        "agent_thought_chunk",
    }
)
_USER_MESSAGE = frozenset({"user_message", "user_message_chunk"})


class Decision(enum.Enum):
    """What the host is to do about one of its turns."""

    __hash__ = object.__hash__

    INSERTED = "inserted"
    """v2: the prompt is the agent's now (``message_id``); its turn is live."""
    ENDED = "ended"
    """The turn is over (``stop_reason``; v2: None when the idle reported none)."""
    REFUSED = "refused"
    """The prompt failed before it ran, or its answer is malformed (``error``: why)."""
    RESEND = "resend"
    """v2: another turn's ``session/cancel`` refused this held prompt: send it again."""
    CANCEL_SPAN = "cancel_span"
    """v2: a prompt the host withdrew was inserted anyway: ``session/cancel`` now."""
    SPEAKS_V1 = "speaks_v1"
    """v2 was agreed but the agent answered the v1 way: speak v1; the turn ended (``stop_reason``)."""


@dataclass(frozen=True, slots=True)
class Decided(Generic[K]):
    """One decision about one turn."""

    decision: Decision
    key: K
    stop_reason: str | None = None
    message_id: str | None = None
    error: str | None = None
    """For ``REFUSED``: a protocol error's text (None: the agent's own error answer; with
    ``stop_reason`` ``cancelled`` when that was ``-32800``)."""


@dataclass
class Effects(Generic[K]):
    """What one update did besides finding its owner: the turns it inserted and ended."""

    inserted: list[Decided[K]] = field(default_factory=list)
    ended: list[Decided[K]] = field(default_factory=list)


class CancelPlan(enum.Enum):
    """How a host cancel of one turn goes on the wire."""

    __hash__ = object.__hash__

    LADDER = "ladder"
    """``session/cancel`` and the ladder (the turn runs, or nothing runs ahead of its prompt)."""
    WITHDRAW = "withdraw"
    """v2: the prompt is held behind other work: ``$/cancel_request`` it, nothing else."""


class SessionLifecycle(Protocol[K]):
    """One session's turns, as one protocol version sees them (see the module docstring)."""

    profile: ProtocolProfile
    resuming: bool

    def sent(self, key: K, answered: Callable[[], bool]) -> None: ...
    def answered(self, key: K, answer: Any) -> list[Decided[K]]: ...
    def refused(self, key: K, cancelled: bool) -> list[Decided[K]]: ...
    def route(self, raw: dict[str, Any], kind: Any) -> K | None: ...

    effects: Effects[K] | None

    def late_of(self, raw: dict[str, Any]) -> tuple[bool, K | None]: ...
    def plan(self, key: K) -> CancelPlan: ...
    def cancel(self, key: K, followers: list[K]) -> None: ...
    def withdraw(self, key: K) -> None: ...
    def gave_up(self, key: K) -> None: ...
    def cancel_requests(self, key: K) -> list[K]: ...
    def owner_of(self, entity_id: str) -> K | None: ...
    def forget(self, key: K) -> None: ...


# ---------------------------------------------------------------------------------------- v1


class V1Session(Generic[K]):
    """v1: the answer ends the turn (see the module docstring)."""

    profile = V1

    def __init__(self) -> None:
        self.resuming = False
        self.effects: Effects[K] | None = None
        """Never set: in v1 no update inserts or ends a turn (the answer does)."""
        self._answered: Callable[[], bool] = _never
        """Whether the running turn's prompt is answered at this point of the input (the host's
        request futures are resolved in the order read, errors included)."""
        self.running: K | None = None
        """The turn whose prompt was sent last and not forgotten."""
        self.last: K | None = None
        """The turn before it (or the last one, when none runs)."""
        self._tools: dict[str, K] = {}
        """Each tool call's turn, for the turns ``running`` and ``last``."""

    def sent(self, key: K, answered: Callable[[], bool]) -> None:
        self.running = key
        self._answered = answered

    def answered(self, key: K, answer: Any) -> list[Decided[K]]:
        stop = self.profile.answer_stop_reason(answer)
        if stop is None:
            return [Decided(Decision.REFUSED, key, error=f"invalid session/prompt response: {answer!r:.200}")]
        return [Decided(Decision.ENDED, key, stop)]

    def refused(self, key: K, cancelled: bool) -> list[Decided[K]]:
        return [Decided(Decision.REFUSED, key, "cancelled" if cancelled else None)]

    def route(self, raw: dict[str, Any], kind: Any) -> K | None:
        turn = self.running
        if turn is None or self._answered():
            return None  # no turn, or its answer came earlier in the input: late
        tid = raw.get("toolCallId")
        if tid is not None and isinstance(tid, str):
            owner = self._tools.get(tid)
            if owner is None:
                self._tools[tid] = turn
            elif owner != turn:
                return None  # a tool call of the finished turn the running one never announced
        return turn

    def late_of(self, raw: dict[str, Any]) -> tuple[bool, K | None]:
        """An update of no turn: late (a peer violation), after the turn it came after."""
        if self.running is not None and self._answered():
            return True, self.running
        tid = raw.get("toolCallId")
        if isinstance(tid, str) and tid in self._tools:
            return True, self._tools[tid]
        return True, self.last

    def plan(self, key: K) -> CancelPlan:
        return CancelPlan.LADDER

    def cancel(self, key: K, followers: list[K]) -> None:
        pass

    def withdraw(self, key: K) -> None:
        pass

    def gave_up(self, key: K) -> None:
        pass

    def cancel_requests(self, key: K) -> list[K]:
        """The prompts the middle rung's ``$/cancel_request`` is for: the turn's own, unanswered."""
        return [key] if self.running == key and not self._answered() else []

    def owner_of(self, entity_id: str) -> K | None:
        return self.running

    def forget(self, key: K) -> None:
        if self.running == key:
            self.running = None
            self._answered = _never
        if self.last is not None and self.last != key:
            self._tools = {t: k for t, k in self._tools.items() if k != self.last}
        self.last = key


# ---------------------------------------------------------------------------------------- v2


class PromptState(enum.Enum):
    """Where one v2 prompt is (the rows of ``V2_TRANSITIONS``)."""

    __hash__ = object.__hash__

    HELD = "held"
    """Sent, not inserted."""
    WITHDRAWING = "withdrawing"
    """Held, and the host cancelled it: ``-32800`` is its own cancel confirmed."""
    COLLATERAL = "collateral"
    """Held when another turn's ``session/cancel`` went out: a ``-32800`` is not its own."""
    LIVE = "live"
    """Inserted: its span runs."""
    CANCELLING = "cancelling"
    """Inserted, and ``session/cancel`` went out: the next idle ends it."""
    ABANDONED = "abandoned"
    """Withdrawn, unconfirmed within the budget: resolved by the host; never live."""


class Event(enum.Enum):
    """What happened to one v2 prompt (the columns of ``V2_TRANSITIONS``)."""

    __hash__ = object.__hash__

    INSERTED = "inserted"
    CANCELLED = "cancelled"
    """``-32800`` on the prompt."""
    FAILED = "failed"
    """Any other error answer."""
    WITHDRAW = "withdraw"
    CANCEL = "cancel"
    """``session/cancel`` for this turn (it leads the cancel)."""
    GAVE_UP = "gave_up"


_GONE = None
"""The prompt leaves the table (refused)."""

V2_TRANSITIONS: dict[tuple[PromptState, Event], tuple[PromptState | None, Decision | None]] = {
    (PromptState.HELD, Event.INSERTED): (PromptState.LIVE, Decision.INSERTED),
    (PromptState.HELD, Event.CANCELLED): (_GONE, Decision.REFUSED),
    (PromptState.HELD, Event.FAILED): (_GONE, Decision.REFUSED),
    (PromptState.HELD, Event.WITHDRAW): (PromptState.WITHDRAWING, None),
    (PromptState.HELD, Event.CANCEL): (PromptState.WITHDRAWING, None),
    (PromptState.WITHDRAWING, Event.INSERTED): (PromptState.CANCELLING, Decision.CANCEL_SPAN),
    (PromptState.WITHDRAWING, Event.CANCELLED): (_GONE, Decision.REFUSED),
    (PromptState.WITHDRAWING, Event.FAILED): (_GONE, Decision.REFUSED),
    (PromptState.WITHDRAWING, Event.CANCEL): (PromptState.WITHDRAWING, None),
    (PromptState.WITHDRAWING, Event.GAVE_UP): (PromptState.ABANDONED, None),
    (PromptState.COLLATERAL, Event.INSERTED): (PromptState.LIVE, Decision.INSERTED),
    (PromptState.COLLATERAL, Event.CANCELLED): (PromptState.HELD, Decision.RESEND),
    (PromptState.COLLATERAL, Event.FAILED): (_GONE, Decision.REFUSED),
    (PromptState.COLLATERAL, Event.WITHDRAW): (PromptState.WITHDRAWING, None),
    (PromptState.COLLATERAL, Event.CANCEL): (PromptState.WITHDRAWING, None),
    (PromptState.LIVE, Event.CANCEL): (PromptState.CANCELLING, None),
    (PromptState.ABANDONED, Event.INSERTED): (_GONE, Decision.CANCEL_SPAN),
    (PromptState.ABANDONED, Event.CANCELLED): (_GONE, None),
    (PromptState.ABANDONED, Event.FAILED): (_GONE, None),
}
"""(state, event) -> (next state, decision). Pairs not listed change nothing (a second cancel,
an insertion seen twice -- by the ``user_message`` and then by the answer)."""

_HELD_STATES = frozenset({PromptState.HELD, PromptState.WITHDRAWING, PromptState.COLLATERAL})
_QUEUED_STATES = _HELD_STATES | {PromptState.ABANDONED}
"""Not inserted yet, as the agent sees its queue (an abandoned prompt is still in it)."""
_LIVE_STATES = frozenset({PromptState.LIVE, PromptState.CANCELLING})


class V2Session(Generic[K]):
    """v2: turns are spans of work (see the module docstring)."""

    profile = V2

    def __init__(self) -> None:
        self.state = "idle"
        """The last foreground state reported (a new session is idle); an unknown one is kept
        as reported and counts as busy (the schema: never treat it as idle)."""
        self.resuming = False
        """A ``session/resume`` is in flight: state updates are snapshots."""
        self.prompts: dict[K, PromptState] = {}
        """Every prompt not ended, in the order sent (held ones are inserted in this order)."""
        self.live: list[K] = []
        """Inserted turns not ended yet, oldest first (ABANDONED spans are not turns)."""
        self.message_of: dict[str, K | None] = {}
        """Each message id's turn; None once that turn ended (an id an agent reuses later is
        the working turn's then, see ``route``)."""
        self._entity_of: dict[str, K | None] = {}
        """Each tool call's, terminal's and plan's turn; None once that turn ended (tool call
        ids are unique in a session: what comes of it later is background, not the next turn's)."""
        self._ids_of: dict[K, list[tuple[dict[str, Any], str]]] = {}
        self._worked: set[K] = set()
        self._fresh: set[K] = set()
        """Turns inserted since the last idle (the quick-work rule)."""
        self._cutoff: dict[K, list[K]] = {}
        """For a turn leading a cancel: the prompts held at that moment (the middle rung's)."""
        self.background: set[str] = set()
        """Ids of the tool calls and terminals the last state update listed as background work."""
        self.effects: Effects[K] | None = None
        """What the last update did besides finding its owner (the host takes and clears it)."""

    @property
    def busy(self) -> bool:
        return self.state != "idle"

    @property
    def waiting(self) -> list[K]:
        """Prompts sent and not inserted, in the order sent."""
        return [k for k, s in self.prompts.items() if s in _HELD_STATES]

    def state_of(self, key: K) -> PromptState | None:
        return self.prompts.get(key)

    # ------------------------------------------------------------------ the table

    def _fire(self, key: K, event: Event, **step: Any) -> list[Decided[K]]:
        state = self.prompts.get(key)
        if state is None:
            return []
        row = V2_TRANSITIONS.get((state, event))
        if row is None:
            return []
        after, decision = row
        if after is None:
            del self.prompts[key]
        else:
            self.prompts[key] = after
        if event is Event.INSERTED and after in _LIVE_STATES and state not in _LIVE_STATES:
            self.live.append(key)
            self._fresh.add(key)
            if self.busy:
                self._worked.add(key)
        if decision is Decision.CANCEL_SPAN:
            # The session/cancel that stops this span also refuses every prompt held now: none
            # of them is that cancel's (each is sent again when refused).
            for other, other_state in list(self.prompts.items()):
                if other != key and other_state is PromptState.HELD:
                    self.prompts[other] = PromptState.COLLATERAL
        return [] if decision is None else [Decided(decision, key, **step)]

    # ------------------------------------------------------------------ prompts

    def sent(self, key: K, answered: Callable[[], bool]) -> None:
        self.prompts[key] = PromptState.HELD

    def answered(self, key: K, answer: Any) -> list[Decided[K]]:
        if answers_like_v1(self.profile, answer):
            self.prompts.pop(key, None)
            return [Decided(Decision.SPEAKS_V1, key, answer.get("stopReason"))]
        message_id = answer.get("messageId") if isinstance(answer, dict) else None
        if not isinstance(message_id, str):
            state = self.prompts.pop(key, None)
            if state is None:
                return []
            if key in self.live:
                self.live.remove(key)
            why = f"session/prompt answered without a messageId (v2): {answer!r:.200}"
            return [Decided(Decision.REFUSED, key, error=why)]
        if self.prompts.get(key) in _LIVE_STATES:
            self._own(self.message_of, message_id, key)  # inserted by its user message already
            return []
        steps = self._fire(key, Event.INSERTED, message_id=message_id)
        if key in self.live:
            self._own(self.message_of, message_id, key)
        return steps

    def refused(self, key: K, cancelled: bool) -> list[Decided[K]]:
        stop = "cancelled" if cancelled else None
        return self._fire(key, Event.CANCELLED if cancelled else Event.FAILED, stop_reason=stop)

    def plan(self, key: K) -> CancelPlan:
        """Withdraw a prompt held behind work; anything else climbs the ladder (a running turn,
        or a prompt nothing runs ahead of: the agent is wedged, and only the ladder ends it)."""
        state = self.prompts.get(key)
        if state in _HELD_STATES and (self.live or self.busy):
            return CancelPlan.WITHDRAW
        return CancelPlan.LADDER

    def withdraw(self, key: K) -> None:
        self._fire(key, Event.WITHDRAW)

    def cancel(self, key: K, followers: list[K]) -> None:
        """The host's ``session/cancel``, led by ``key``, with the session's other turns not
        cancelled yet (``followers``): it ends every live turn at the next idle and refuses
        every prompt held now -- each is cancelled by the host with it."""
        self._cutoff[key] = [k for k in followers if self.prompts.get(k) in _HELD_STATES]
        for turn in (key, *followers):
            self._fire(turn, Event.CANCEL)

    def gave_up(self, key: K) -> None:
        self._fire(key, Event.GAVE_UP)

    def cancel_requests(self, key: K) -> list[K]:
        """The prompts the middle rung's ``$/cancel_request`` is for: the turn's own while it is
        not inserted; for a running turn, the prompts held at its cancel still held (a running
        turn's prompt was answered at insertion: nothing is left to cancel of it)."""
        own = [key] if self.prompts.get(key) in _HELD_STATES else []
        held = self.prompts
        return own + [k for k in self._cutoff.get(key, ()) if held.get(k) in _HELD_STATES]

    def owner_of(self, entity_id: str) -> K | None:
        """The live turn a tool call or terminal was first seen in, else the turn working now;
        None for background work (listed by the last state update) or with no live turn."""
        if entity_id in self.background:
            return None
        owner = self._entity_of.get(entity_id)
        if owner is not None and owner in self.live:
            return owner
        return self.live[-1] if self.live else None

    def forget(self, key: K) -> None:
        """The turn is over for the host (ended, or the connection ended)."""
        state = self.prompts.get(key)
        if state is not PromptState.ABANDONED:
            self.prompts.pop(key, None)
        if key in self.live:
            self.live.remove(key)
        self._worked.discard(key)
        self._fresh.discard(key)
        self._cutoff.pop(key, None)
        for table, ident in self._ids_of.pop(key, ()):
            table[ident] = None  # seen, of a turn that ended (and no turn is held by the table)

    def _own(self, table: dict[str, Any], ident: str, key: K) -> K:
        table[ident] = key
        self._ids_of.setdefault(key, []).append((table, ident))
        return key

    # ------------------------------------------------------------------ updates

    def _effect(self) -> Effects[K]:
        if self.effects is None:
            self.effects = Effects()
        return self.effects

    def late_of(self, raw: dict[str, Any]) -> tuple[bool, K | None]:
        """An update of no live turn is background work (normal in v2), never late."""
        return False, None

    def route(self, raw: dict[str, Any], kind: Any) -> K | None:
        """One ``session/update``'s ``update`` object, in the order read: its owner (None: the
        session's); insertions and endings are left in ``effects`` for the host."""
        if kind == "state_update":
            self._state(raw)
            return None
        if kind not in self.profile.turn_updates:
            return None
        message_id = raw.get("messageId")
        if kind in _MESSAGE_UPDATES and isinstance(message_id, str):
            owner = self.message_of.get(message_id)
            if owner is not None and owner in self.live:
                return owner
            # Unseen, or of an ended turn (agents reuse message ids): the working turn's.
            if kind in _USER_MESSAGE:
                queued = [k for k, s in self.prompts.items() if s in _QUEUED_STATES]
                if queued:
                    key = queued[0]
                    steps = self._fire(key, Event.INSERTED, message_id=message_id)
                    self._effect().inserted.extend(steps)
                    if key in self.live:
                        return self._own(self.message_of, message_id, key)
                    return None  # an ABANDONED span: never live
            if self.live:
                return self._own(self.message_of, message_id, self.live[-1])
            return None
        plan = raw.get("plan")
        entity = (
            raw.get("toolCallId")
            or raw.get("terminalId")
            or (plan.get("planId") if isinstance(plan, dict) else None)
        )
        if isinstance(entity, str):
            owner = self._entity_of.get(entity, _UNSEEN)
            if owner is _UNSEEN:
                return self._own(self._entity_of, entity, self.live[-1]) if self.live else None
            return owner if owner in self.live else None  # None: of a turn ended (background now)
        return self.live[-1] if self.live else None

    def _state(self, raw: dict[str, Any]) -> None:
        state = raw.get("state")
        if not isinstance(state, str):
            return
        listed = raw.get("background")
        if isinstance(listed, list):  # a complete snapshot (absent: not reported, keep ours)
            self.background = {
                str(item.get("toolCallId") or item.get("terminalId"))
                for item in listed
                if isinstance(item, dict) and (item.get("toolCallId") or item.get("terminalId"))
            }
        previous = self.state
        self.state = state
        if state != "idle":
            self._worked.update(self.live)  # work runs (a snapshot that says so is true too)
            return
        if self.resuming:
            return  # an idle snapshot: never a completion, never a cancel's confirmation
        self._idle(raw, previous)

    def _idle(self, raw: dict[str, Any], previous: str) -> None:
        """What ends a v2 turn (the one place it is decided; see the module docstring)."""
        stop = self.profile.idle_stop_reason(raw)
        reported = isinstance(raw.get("stopReason"), str)
        ended = [
            key
            for key in self.live
            if key in self._worked
            or self.prompts.get(key) is PromptState.CANCELLING
            or (previous == "idle" and reported and key in self._fresh)
        ]
        for key in ended:
            self.live.remove(key)
            self.prompts.pop(key, None)
            self._worked.discard(key)
            self._effect().ended.append(Decided(Decision.ENDED, key, stop))
        self._fresh.clear()


LIFECYCLES: dict[int, Callable[[], SessionLifecycle[Any]]] = {1: V1Session, 2: V2Session}
"""Each version's lifecycle, by version number."""


def lifecycle_for(profile: ProtocolProfile) -> SessionLifecycle[Any]:
    """A new session's lifecycle in ``profile``'s version."""
    return LIFECYCLES[profile.version]()


def _never() -> bool:
    return False
