"""The in-flight ledger: one per direction (incoming and outgoing ids are separate namespaces).

A request is *in flight* from the moment it is sent (outgoing) or received (incoming) until it
ends. How it ended is recorded apart from whether a cancel was requested:

- ``cancel_requested`` -- someone asked to cancel it (``$/cancel_request`` sent or received);
- ``Outcome`` -- how it ended: answered with a result, with an error, cancelled (``-32800``), or
  abandoned (nobody will see an answer: we stopped waiting, or the transport was gone).

An ended request leaves a tombstone (bounded, oldest dropped first) so a late ``$/cancel_request``
or a late reply is recognised and ignored quietly, never routed to another request. The bound is
kept with a ring of the remembered entries next to a plain dict (cheaper per request than an
``OrderedDict``): the entry a new one overwrites in the ring is the oldest, and it is forgotten
unless its id has been remembered again since.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from enum import Enum
from typing import Any

from ._errors import LocalProtocolError
from ._events import RequestId

DEFAULT_TOMBSTONES = 4096
MAX_AWAITED_LATE = 1 << 16
"""Requests abandoned after a ``$/cancel_request`` whose late answer is still expected."""


class Outcome(Enum):
    """How a request ended."""

    RESULT = "result"
    """Answered with a result (possibly a partial one after a cancel)."""
    ERROR = "error"
    """Answered with an error other than -32800."""
    CANCELLED = "cancelled"
    """Answered with -32800."""
    ABANDONED = "abandoned"
    """No answer will be seen: the caller stopped waiting, or the transport was gone."""


class InFlight:
    """One request in flight; once it ended, its tombstone (``outcome`` set)."""

    __slots__ = ("batch", "cancel_requested", "id", "method", "outcome", "parent")

    def __init__(self, id: RequestId, method: str, parent: RequestId = None, batch: Any = None) -> None:
        self.id = id
        self.method = method
        self.parent = parent
        self.cancel_requested = False
        self.batch = batch
        self.outcome: Outcome | None = None

    def __repr__(self) -> str:
        ended = f", outcome={self.outcome.value}" if self.outcome is not None else ""
        return (
            f"InFlight(id={self.id!r}, method={self.method!r}, parent={self.parent!r}, "
            f"cancel_requested={self.cancel_requested}{ended})"
        )


Tombstone = InFlight
"""What is remembered of an ended request: the ``InFlight`` itself, with its ``outcome`` set
(no second object per request)."""


class Ledger:
    """Requests in flight in one direction, plus tombstones of the ones that ended."""

    __slots__ = (
        "_children",
        "_in_flight",
        "_late",
        "_max_tombstones",
        "_reused_ids",
        "_ring",
        "_ring_at",
        "_tombstones",
        "direction",
    )

    def __init__(
        self, direction: str, max_tombstones: int = DEFAULT_TOMBSTONES, *, reused_ids: bool = True
    ) -> None:
        self.direction = direction
        # The peer may reuse an id once its request ended; our own ids never repeat.
        self._reused_ids = reused_ids
        self._in_flight: dict[RequestId, InFlight] = {}
        self._tombstones: dict[RequestId, Tombstone] = {}
        # The remembered entries in the order they were remembered, at most max_tombstones;
        # _ring_at is the slot the next one overwrites once the ring is full (the oldest).
        self._ring: list[Tombstone] = []
        self._ring_at = 0
        self._max_tombstones = max_tombstones
        # Abandoned after a cancel was sent: the peer still owes an answer (-32800 or a result).
        # Kept apart from the bounded tombstones so a storm of cancels cannot push them out
        # before their answers arrive (they would then look like unknown ids).
        self._late: OrderedDict[RequestId, Tombstone] = OrderedDict()
        # parent id (in the *other* direction) -> ids of requests opened while serving it
        self._children: dict[RequestId, set[RequestId]] = {}

    def __len__(self) -> int:
        return len(self._in_flight)

    def __contains__(self, id: object) -> bool:
        return id in self._in_flight

    def __iter__(self) -> Iterator[InFlight]:
        return iter(list(self._in_flight.values()))

    def get(self, id: RequestId) -> InFlight | None:
        return self._in_flight.get(id)

    def tombstone(self, id: RequestId) -> Tombstone | None:
        stone = self._tombstones.get(id)
        return stone if stone is not None else self._late.get(id)

    def settle(self, id: RequestId) -> None:
        """The late answer owed for the abandoned request ``id`` arrived: stop expecting it."""
        stone = self._late.pop(id, None)
        if stone is not None:
            self._remember(id, stone)

    @property
    def tombstone_count(self) -> int:
        return len(self._tombstones) + len(self._late)

    def open(self, id: RequestId, method: str, parent: RequestId = None, batch: Any = None) -> InFlight:
        if id in self._in_flight:
            raise LocalProtocolError(f"{self.direction} request id {id!r} is already in flight")
        entry = InFlight(id, method, parent, batch)
        self._in_flight[id] = entry
        if self._reused_ids:
            # An id may be reused once its request has ended; forget the old tombstone.
            if self._tombstones:
                self._tombstones.pop(id, None)
            if self._late:
                self._late.pop(id, None)
        if parent is not None:
            kids = self._children.get(parent)
            if kids is None:
                self._children[parent] = {id}
            else:
                kids.add(id)
        return entry

    def request_cancel(self, id: RequestId) -> bool:
        """Mark ``id`` cancel-requested; True only the first time for a request in flight."""
        entry = self._in_flight.get(id)
        if entry is None or entry.cancel_requested:
            return False
        entry.cancel_requested = True
        return True

    def close(self, id: RequestId, outcome: Outcome) -> InFlight:
        """End the request ``id``; it must be in flight (answering twice is a local error)."""
        entry = self._in_flight.pop(id, None)
        if entry is None:
            stone = self._tombstones.get(id)
            if stone is not None and stone.outcome is not None:
                raise LocalProtocolError(
                    f"{self.direction} request {id!r} ({stone.method}) already ended: {stone.outcome.value}"
                )
            raise LocalProtocolError(f"no {self.direction} request {id!r} is in flight")
        self._ended(entry, outcome)
        return entry

    def close_if_open(self, id: RequestId, outcome: Outcome) -> InFlight | None:
        """End the request ``id`` if it is in flight (then return it); None if it is not."""
        entry = self._in_flight.pop(id, None)
        if entry is not None:
            if outcome is Outcome.RESULT and entry.parent is None:
                # ``_ended`` and ``_remember`` inlined for the common case, the answer to a
                # request without a parent: the two calls cost ~1.2 % of a request's
                # instructions (host only, 1000 concurrent, ``benchmarks/instructions.py``),
                # over the 0.5 % an inline copy must save to stay (docs/benchmarks.md).
                entry.outcome = outcome
                ring = self._ring
                tombstones = self._tombstones
                if len(ring) < self._max_tombstones:
                    ring.append(entry)
                    tombstones[id] = entry
                elif ring:
                    at = self._ring_at
                    oldest = ring[at]
                    ring[at] = entry
                    self._ring_at = at + 1 if at + 1 < len(ring) else 0
                    if tombstones.get(oldest.id) is oldest:  # not remembered again since
                        del tombstones[oldest.id]
                    tombstones[id] = entry
            else:
                self._ended(entry, outcome)
        return entry

    def _ended(self, entry: InFlight, outcome: Outcome) -> None:
        entry.outcome = outcome
        id = entry.id
        if outcome is Outcome.ABANDONED and entry.cancel_requested:
            late = self._late
            late[id] = entry
            if len(late) > MAX_AWAITED_LATE:
                late.popitem(last=False)
        else:
            self._remember(id, entry)
        if entry.parent is not None:
            kids = self._children.get(entry.parent)
            if kids is not None:
                kids.discard(id)
                if not kids:
                    del self._children[entry.parent]

    def _remember(self, id: RequestId, stone: Tombstone) -> None:
        ring = self._ring
        if len(ring) < self._max_tombstones:
            ring.append(stone)
        elif ring:
            at = self._ring_at
            oldest = ring[at]
            ring[at] = stone
            self._ring_at = at + 1 if at + 1 < len(ring) else 0
            if self._tombstones.get(oldest.id) is oldest:  # not remembered again since
                del self._tombstones[oldest.id]
        else:
            return  # max_tombstones 0: nothing is remembered
        self._tombstones[id] = stone

    def children(self, parent: RequestId) -> list[InFlight]:
        """Requests in flight that were opened while serving ``parent`` (of the other direction)."""
        kids = self._children.get(parent)
        if not kids:
            return []
        return [self._in_flight[k] for k in kids if k in self._in_flight]
