"""An ACP v2 agent written with the official Python SDK's ``acp.experimental.v2`` (1.0.0rc3), run
with the SDK's ``v2.run_agent`` on stdio, for the v2 benchmark rows (``benchmarks/v2.py``).

The SDK gives an agent typed handlers and nothing of the v2 lifecycle, and enforces no
cancellation rule: an agent that does nothing about ``session/cancel`` never sends the idle
``cancelled`` and leaves its client waiting. So this agent does what a correct v2 agent must, the
way an SDK user writes it, and no more:

- ``session/prompt``: held while the session works (an ``asyncio.Lock``, in order); inserted:
  the ``user_message`` echo, ``running``, the work started as a task, the answer ``{messageId}``;
- the work: ``/stream N MS`` (N ``agent_message_chunk``, typed, each with the message's id),
  ``/sleep MS``; then an idle ``state_update`` ``end_turn``;
- ``session/cancel``: the work's task is cancelled, and it ends with the idle ``cancelled``
  (held prompts' handlers are cancelled too: the SDK answers them ``-32800``).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from acp.experimental import v2
from acp.experimental.v2 import schema

_ids = itertools.count(1)


class Session:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.work: asyncio.Task[None] | None = None
        self.held: set[asyncio.Task[Any]] = set()
        self.started = False
        """The work's task has run: cancelling it now interrupts it (before, its body never runs)."""
        self.cancel_first = False


class BenchV2Agent:
    """Implements the SDK's v2 ``Agent`` protocol."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self, protocol_version: int, info: Any, capabilities: Any = None, **kwargs: Any
    ) -> Any:
        return schema.InitializeResponse(
            protocol_version=v2.PROTOCOL_VERSION,
            info=schema.Implementation(name="bench-sdk-v2-agent", version="0"),
            capabilities=schema.AgentCapabilities(),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        session_id = f"sess_{next(_ids)}"
        self.sessions[session_id] = Session()
        return schema.NewSessionResponse(session_id=session_id)

    async def state(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id=session_id, update=update)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        session = self.sessions[session_id]
        me = asyncio.current_task()
        assert me is not None
        session.held.add(me)
        try:
            await session.lock.acquire()  # held while the session works (cancelled: -32800)
        finally:
            session.held.discard(me)
        n = next(_ids)
        message_id = f"u{n}"
        try:
            await self.state(session_id, schema.UserMessageUpdate(message_id=message_id, content=prompt))
            await self.state(session_id, schema.RunningSessionStateUpdate())
        except BaseException:
            session.lock.release()
            raise
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        session.work = asyncio.create_task(self.work(session_id, session, text, f"a{n}"))
        return schema.PromptResponse(message_id=message_id)

    async def work(self, session_id: str, session: Session, text: str, message_id: str) -> None:
        stop = "end_turn"
        session.started = True
        try:
            if session.cancel_first:  # cancelled between insertion and the task's first step
                raise asyncio.CancelledError
            for line in text.splitlines():
                words = line.split()
                if words and words[0] == "/stream":
                    n, ms = int(words[1]), int(words[2]) if len(words) > 2 else 0
                    for i in range(n):
                        if i and ms:
                            await asyncio.sleep(ms / 1000)
                        chunk = schema.AgentMessageChunk(
                            message_id=message_id,
                            content=schema.TextContentBlock(type="text", text=f"chunk {i + 1}/{n}\n"),
                        )
                        await self.state(session_id, chunk)
                elif words and words[0] == "/sleep":
                    await asyncio.sleep(int(words[1]) / 1000)
        except asyncio.CancelledError:
            stop = "cancelled"  # a cancel ends in the idle `cancelled`, never an error
        finally:
            try:
                await self.state(session_id, schema.IdleSessionStateUpdate(stop_reason=stop))
            finally:
                session.work = None
                session.started = session.cancel_first = False
                session.lock.release()

    async def cancel_session(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            return
        for handler in list(session.held):
            handler.cancel()
        if session.work is not None:
            if session.started:
                session.work.cancel()
            else:
                session.cancel_first = True


async def main() -> None:
    await v2.run_agent(BenchV2Agent())


if __name__ == "__main__":
    asyncio.run(main())
