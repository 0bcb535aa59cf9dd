"""The transport seam: what a ``Connection`` sits on, and what it offers its transport.

A transport carries whole messages -- one JSON text each -- in order, in both directions. It
knows nothing of JSON-RPC; the connection knows nothing of framing or sockets. NDJSON over
pipes or any byte stream (``_ndjson``), and message-oriented media (WebSocket text frames, HTTP
bodies and server-sent events) are peers under the same connection.

The contract, both ways:

- ``Transport.send(messages)`` writes the messages in order; it never blocks. Each message
  is its JSON text and a ``\n`` terminator (free for NDJSON; others drop the last byte). When its buffer
  fills it calls ``pause_writing`` on the connection, and ``resume_writing`` when it drains.
- Incoming messages go to ``Connection.feed_messages`` in the order they arrived; a message the
  transport dropped for its size is reported in place as a ``core.OversizedLine``.
- The end of the peer's output is ``Connection.feed_eof`` (at most once is enough; more are
  ignored); a lost write side (the peer stopped reading) is ``Connection.write_lost``.
- ``close_write`` ends our output and keeps reading where the medium allows (pipes: the peer
  sees end of input); ``close`` ends both directions and releases everything. Both idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core import Received


class Transport(Protocol):
    """A message-level, ordered, two-way channel to the peer."""

    def send(self, messages: list[bytes]) -> None:
        """Write ``messages`` in order, without blocking. Each is a JSON text followed by one
        ``\n`` (NDJSON sends them as they are; a message-oriented medium drops that byte)."""

    def close_write(self) -> None:
        """End our output (the peer sees end of input); keep reading if the medium allows."""

    def close(self) -> None:
        """End both directions and release the resources held."""

    def is_closing(self) -> bool:
        """Whether the write side is closed or closing."""


class TransportReceiver(Protocol):
    """What a transport calls on its connection (``Connection`` implements it)."""

    name: str
    max_message_bytes: int

    def feed_messages(self, messages: Sequence[Received]) -> None: ...

    def feed_eof(self) -> None: ...

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...

    def write_lost(self, exc: BaseException | None) -> None: ...
