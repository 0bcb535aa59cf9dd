"""A v2 session as its host sees it: prompts, spans of foreground work, and which turn is whose.

In ACP v2 the answer to ``session/prompt`` only says that the user message was *inserted*; the
work it starts is reported by ``state_update`` (``running`` / ``requires_action`` / ``idle`` +
``stopReason``), and a prompt sent while the agent works is *held*, inserted later, in order. A
host's turn is therefore a span of foreground work, and this pure tracker decides, from the
order of what was read:

- **insertion**: a prompt is inserted when its answer (``{messageId}``) arrives, or earlier when a
  ``user_message``/``user_message_chunk`` with a new ``messageId`` arrives while it is the oldest
  prompt still waiting (prompts are inserted in the order they were sent; the answer then confirms
  the id). A prompt refused before insertion (an error, ``-32800`` for a held prompt withdrawn or
  cancelled) settles without one.
- **resolution**: an idle ``state_update`` ends every inserted turn that has seen foreground work
  (``running``/``requires_action`` while it was inserted, or inserted while the agent was busy),
  and every inserted turn whose ``session/cancel`` went out (the idle answers it, with a stop
  reason or without). A repeated idle is a snapshot, not a completion -- except one carrying a
  stop reason right after a new insertion (work so quick the agent never said ``running``). While a ``session/resume`` is
  in flight every ``state_update`` is a snapshot: it never ends a turn or confirms a cancel.
- **ownership** (the fence, by span): an update of a message belongs to the turn that inserted it
  or is working on it (the newest turn inserted and not yet resolved); a tool call or terminal
  belongs to the turn it was first seen in while that turn is live; everything else, and anything
  after its turn resolved, is the session's (background work after idle is normal in v2, not a
  late update).

Keys are whatever the host uses for a turn (hashable). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

_UNSEEN: Any = object()
"""An id not seen before (``None`` in the tables: seen, of a turn since forgotten)."""

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


@dataclass
class Routed(Generic[K]):
    """What one update did: the turn it belongs to (None: the session's), and the turns it
    inserted and ended (with the idle's stop reason, None when it reported none)."""

    owner: K | None = None
    inserted: list[K] = field(default_factory=list)
    resolved: list[tuple[K, str | None]] = field(default_factory=list)


class SessionSpans(Generic[K]):
    """The host's view of one v2 session (see the module docstring)."""

    def __init__(self) -> None:
        self.state = "idle"
        """The last foreground state reported (a new session is idle); an unknown one is kept
        as reported and counts as busy (the schema: never treat it as idle)."""
        self.resuming = False
        """A ``session/resume`` is in flight: state updates are snapshots."""
        self.waiting: list[K] = []
        """Prompts sent and not inserted (held), in the order they were sent."""
        self.live: list[K] = []
        """Inserted turns not resolved yet, oldest first."""
        self.message_of: dict[str, K | None] = {}
        """Each message's turn; None once that turn is forgotten (its messages stay the
        session's, and the table holds no turn that ended)."""
        self._worked: set[K] = set()
        self._fresh: set[K] = set()
        """Turns inserted since the last idle (the quick-work rule)."""
        self._cancelled: set[K] = set()
        """Turns whose cancel was sent: the next idle ends them, with or without a reason."""
        self._entity_of: dict[str, K | None] = {}
        """Each tool call's, terminal's and plan's turn (None: forgotten), as ``message_of``."""
        self._ids_of: dict[K, list[tuple[dict[str, K | None], str]]] = {}
        """The entries of ``message_of`` and ``_entity_of`` each turn owns (cleared by ``forget``)."""
        self.background: set[str] = set()
        """Ids of the tool calls and terminals the last state update listed as background work
        (a permission request about one of them is not the foreground's: a cancel leaves it)."""

    @property
    def busy(self) -> bool:
        return self.state != "idle"

    # ------------------------------------------------------------------ prompts

    def sent(self, key: K) -> None:
        """A ``session/prompt`` went out for ``key``."""
        self.waiting.append(key)

    def answered(self, key: K, message_id: str | None) -> bool:
        """Its answer came (inserted, with ``message_id``); True if that inserted it (False:
        a ``user_message`` already had)."""
        if isinstance(message_id, str) and message_id not in self.message_of:
            self._own(self.message_of, message_id, key)
        if key in self.waiting:
            self._insert(key)
            return True
        return False

    def refused(self, key: K) -> None:
        """Its ``session/prompt`` failed before insertion (error, ``-32800``): it never runs."""
        if key in self.waiting:
            self.waiting.remove(key)

    def owner_of(self, entity_id: str) -> K | None:
        """The live turn a tool call or terminal was first seen in (None: none live)."""
        owner = self._entity_of.get(entity_id)
        return owner if owner in self.live else None

    def cancel_sent(self, keys: list[K]) -> None:
        """``session/cancel`` went out for these turns: the next idle is the answer to it."""
        self._cancelled.update(keys)

    def forget(self, key: K) -> None:
        """The turn is over for the host (resolved, or the connection ended)."""
        for bucket in (self.waiting, self.live):
            if key in bucket:
                bucket.remove(key)
        self._worked.discard(key)
        self._fresh.discard(key)
        self._cancelled.discard(key)
        for table, ident in self._ids_of.pop(key, ()):
            table[ident] = None

    def _own(self, table: dict[str, K | None], ident: str, key: K) -> K:
        """Record ``ident`` as ``key``'s (in ``message_of`` or ``_entity_of``)."""
        table[ident] = key
        self._ids_of.setdefault(key, []).append((table, ident))
        return key

    def _insert(self, key: K) -> None:
        self.waiting.remove(key)
        self.live.append(key)
        self._fresh.add(key)
        if self.busy:
            self._worked.add(key)

    # ------------------------------------------------------------------ updates

    def update(self, raw: dict[str, Any]) -> Routed[K]:
        """One ``session/update``'s ``update`` object, in the order read."""
        routed: Routed[K] = Routed()
        kind = raw.get("sessionUpdate")
        if kind == "state_update":
            self._state(raw, routed)
            return routed
        message_id = raw.get("messageId")
        if kind in _MESSAGE_UPDATES and isinstance(message_id, str):
            owner = self.message_of.get(message_id, _UNSEEN)
            if owner is _UNSEEN and kind in _USER_MESSAGE and self.waiting:
                owner = self._own(self.message_of, message_id, self.waiting[0])
                self._insert(owner)
                routed.inserted.append(owner)
            if owner is _UNSEEN and self.live:
                owner = self._own(self.message_of, message_id, self.live[-1])
            routed.owner = owner if owner in self.live else None
            return routed
        plan = raw.get("plan")
        entity = (
            raw.get("toolCallId")
            or raw.get("terminalId")
            or (plan.get("planId") if isinstance(plan, dict) else None)
        )
        if isinstance(entity, str):
            owner = self._entity_of.get(entity, _UNSEEN)
            if owner is _UNSEEN and self.live:
                owner = self._own(self._entity_of, entity, self.live[-1])
            routed.owner = owner if owner in self.live else None
            return routed
        if self.live:
            routed.owner = self.live[-1]
        return routed

    def _state(self, raw: dict[str, Any], routed: Routed[K]) -> None:
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
        reason = raw.get("stopReason")
        stop = reason if isinstance(reason, str) else None
        ended = [
            key
            for key in self.live
            if key in self._worked
            or key in self._cancelled
            or (previous == "idle" and stop is not None and key in self._fresh)
        ]
        for key in ended:
            self.live.remove(key)
            self._worked.discard(key)
            self._cancelled.discard(key)
            routed.resolved.append((key, stop))
        self._fresh.clear()
