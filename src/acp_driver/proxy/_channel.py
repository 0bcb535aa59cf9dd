"""A relay ``Backend`` with no process of ours (the conductor's successor, a remote agent): the
agent is reached over a channel, and "the agent exited" is that channel ending."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core import OversizedLine

if TYPE_CHECKING:
    from ..trace import TraceSink


class ChannelBackend:
    """What every channel backend shares: no pid, no signals of ours, no output to pause; it is
    gone once ``ended()``. A subclass says how to send, close and describe its channel."""

    def __init__(self) -> None:
        self.deliver: Callable[[bytes | OversizedLine], None] | None = None
        """Where the agent's messages go (the relay's, from ``start``)."""
        self._gone: Callable[[], None] | None = None
        self._ended = asyncio.Event()

    def ended(self) -> None:
        """The channel ended: the agent is gone for us (once)."""
        if not self._ended.is_set():
            self._ended.set()
            if self._gone is not None:
                self._gone()

    # -- Backend

    @property
    def pid(self) -> int | None:
        return None

    @property
    def exited(self) -> bool:
        return self._ended.is_set()

    def start(self, deliver: Callable[[bytes | OversizedLine], None], gone: Callable[[], None]) -> None:
        self.deliver = deliver
        self._gone = gone
        if self._ended.is_set():
            gone()

    @property
    def send_backlog(self) -> int:
        return 0

    def pause_output(self) -> None:
        pass

    def resume_output(self) -> None:
        pass

    async def wait_exited(self) -> None:
        await self._ended.wait()

    def observe(self, trace: TraceSink) -> None:
        return None  # no process: the messages and the ladder are recorded by the relay
