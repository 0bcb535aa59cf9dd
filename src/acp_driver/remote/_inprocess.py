"""An ``Agent`` served in this process behind a served connection.

Each connection gets a fresh ``Agent`` from the factory, an ``AgentRuntime`` for it and a
``Connection`` attached to a message transport (``aio._transport``): what the connection sends
goes to the client without its ``\\n`` terminator, what the client sends is fed in as it came.
The ladder's rungs map onto the runtime: end of input -> the connection's ``feed_eof``;
terminate -> ``aclose`` (every handler cancelled, every request answered); kill -> the turns'
tasks cancelled and the connection closed without waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..agent import Agent, AgentRuntime
from ..aio import Clock, Connection
from ..core import OversizedLine, Received
from ._backend import Backend, Deliver

logger = logging.getLogger("acp_driver.remote.inprocess")


class _MessageTransport:
    """The ``Transport`` an in-process runtime's connection writes to."""

    def __init__(self, backend: InProcessBackend) -> None:
        self._backend = backend
        self._closing = False

    def send(self, messages: list[bytes]) -> None:
        deliver = self._backend._deliver
        for message in messages:
            text = message[:-1] if message.endswith(b"\n") else message
            if deliver is not None:
                deliver(text)

    def close_write(self) -> None:
        self._closing = True
        self._backend._output_ended()

    def close(self) -> None:
        self._closing = True
        self._backend._output_ended()

    def is_closing(self) -> bool:
        return self._closing


class InProcessBackend:
    """An ``Agent`` on its own ``AgentRuntime`` for one connection (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        name: str,
        *,
        max_message_bytes: int,
        cancel_timeout: float,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.connection = Connection(name=name, max_line_bytes=max_message_bytes, close_timeout=0.5)
        self.runtime = AgentRuntime(agent, self.connection, cancel_timeout=cancel_timeout, clock=clock)
        self._deliver: Deliver | None = None
        self._gone: Callable[[], None] | None = None
        self._gone_called = False
        self._pending: list[Received] = []
        self._closing: asyncio.Task[None] | None = None

    # -- Backend

    @property
    def pid(self) -> int | None:
        return None

    @property
    def exited(self) -> bool:
        return self.connection.closed

    def start(self, deliver: Deliver, gone: Callable[[], None]) -> None:
        self._deliver = deliver
        self._gone = gone
        self.connection.attach(_MessageTransport(self))
        self.connection.on_close.append(lambda _reason: self._output_ended())

    def _output_ended(self) -> None:
        if not self._gone_called and self._gone is not None:
            self._gone_called = True
            self._gone()

    def send(self, text: bytes) -> None:
        if self.connection.is_open:
            self.connection.feed_messages((text,))

    def feed(self, items: Sequence[bytes | OversizedLine]) -> None:
        if self.connection.is_open:
            self.connection.feed_messages(items)

    def pause_output(self) -> None:
        # The runtime's connection is told its transport is full: the agent's next update
        # (``notify``) waits until the client has read, as a subprocess agent blocks on its pipe.
        self.connection.pause_writing()

    def resume_output(self) -> None:
        self.connection.resume_writing()

    @property
    def send_backlog(self) -> int:
        return 0

    def close_input(self) -> None:
        self.connection.feed_eof()

    def terminate(self) -> None:
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self.connection.aclose("terminated"))

    def kill(self) -> None:
        for session in self.runtime.sessions.values():
            turn: Any = session.turn
            if turn is not None and turn.task is not None:
                turn.task.cancel("killed")
        self.terminate()

    async def wait_exited(self) -> None:
        await self.connection.wait_closed()

    async def release(self) -> None:
        await self.connection.aclose("released")

    def describe(self) -> str:
        return f"in-process agent, connection {self.connection.close_reason or 'open'}"

    def observe(self, trace: object) -> None:
        pass  # no process: the messages and the ladder are recorded by the served connection


def make_in_process(
    factory: Callable[[], Agent],
    *,
    max_message_bytes: int,
    cancel_timeout: float,
    clock: Clock | None = None,
) -> Callable[[str], Any]:
    """A ``BackendFactory`` serving ``factory()`` in-process, one agent per connection (its
    runtime's cancel timeout on ``clock``)."""

    async def start(name: str) -> Backend:
        return InProcessBackend(
            factory(), name, max_message_bytes=max_message_bytes, cancel_timeout=cancel_timeout, clock=clock
        )

    return start
