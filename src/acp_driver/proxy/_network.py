"""A remote agent behind the proxy: ``acp-driver proxy -- ws://…`` (or ``http://…``).

The agent is reached with the library's own client transports (``net.open_transport``:
WebSocket, or Streamable HTTP; the ``remote`` extra), and ``NetworkBackend`` presents that
connection as the relay's ``Backend``. The ladder's last rungs keep their remote meaning: SIGTERM
is a graceful close (WebSocket close handshake, HTTP ``DELETE``), SIGKILL an abort; the server at
the other end (``acp-driver serve``) then cancels the agent's turns and reaps it. A lost
connection is the agent's end: the proxy answers the editor and connects again (a respawn), the
sessions resumed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ..core import OversizedLine
from ._channel import ChannelBackend

if TYPE_CHECKING:
    from ..core import Received
    from ..net import ClientTransport


class _Receiver:
    """What the client transport feeds (``aio.TransportReceiver`` and ``attach``)."""

    def __init__(self, backend: NetworkBackend, max_message_bytes: int) -> None:
        self.name = "agent"
        self.max_message_bytes = max_message_bytes
        self._backend = backend

    def attach(self, transport: Any) -> None:
        pass

    def feed_messages(self, messages: Sequence[Received]) -> None:
        deliver = self._backend.deliver
        for message in messages:
            item: bytes | OversizedLine
            if isinstance(message, str):
                item = message.encode()
            elif isinstance(message, bytes):
                item = message.rstrip(b"\n")
            else:
                item = message
            if deliver is not None:
                deliver(item)

    def feed_eof(self) -> None:
        self._backend.ended()

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def write_lost(self, exc: BaseException | None) -> None:
        self._backend.ended()


class NetworkBackend(ChannelBackend):
    """A remote agent's connection as the relay's ``Backend`` (module docstring)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.transport: ClientTransport | None = None

    @classmethod
    async def connect(cls, url: str, *, max_message_bytes: int) -> NetworkBackend:
        """Connect (``OSError``/``TimeoutError`` when the server cannot be reached)."""
        from ..net import open_transport

        backend = cls(url)
        receiver = _Receiver(backend, max_message_bytes)
        backend.transport = await open_transport(url, cast("Any", receiver))
        return backend

    # -- Backend

    def send(self, text: bytes) -> None:
        if self.transport is not None and not self._ended.is_set():
            self.transport.send([text + b"\n"])

    # send_backlog 0: the client transport pauses itself past its own high-water mark

    def close_input(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def terminate(self) -> None:
        self.close_input()  # the graceful close: the server cancels the agent's turns

    def kill(self) -> None:
        if self.transport is not None:
            self.transport.abort("the proxy's cancel ladder aborted the connection")
        self.ended()

    async def release(self) -> None:
        if self.transport is not None:
            await self.transport.aclose(0)

    def describe(self) -> str:
        reason = self.transport.end_reason if self.transport is not None else None
        return f"the connection to {self.url} ended: {reason or 'closed'}"
