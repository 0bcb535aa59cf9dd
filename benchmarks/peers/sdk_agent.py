"""An ACP agent written with the official Python SDK (``agent-client-protocol``, import ``acp``).

Works with 0.12.x and 1.0.0rc3 (same ``Agent`` interface): run with the SDK's ``run_agent`` on
stdio. Speaks what the benchmark needs, the way an SDK user would write it:

- ``initialize``, ``session/new``;
- ``session/prompt``: prompt lines ``/stream N MS`` (N ``agent_message_chunk`` updates sent with
  ``conn.session_update``) and ``/sleep MS`` (waits, ends early with ``cancelled`` on
  ``session/cancel``);
- extension methods ``_bench/echo`` (returns its params) and ``_bench/sleep`` ``{"ms": N}``
  (the SDK cancels it on ``$/cancel_request`` where it supports that, i.e. 1.0.0rc3).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    TextContentBlock,
)

_ids = itertools.count(1)


class BenchAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancels: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sess_{next(_ids)}")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "\n".join(
            getattr(block, "text", "") for block in prompt if getattr(block, "type", "") == "text"
        )
        for line in text.splitlines():
            words = line.split()
            if not words:
                continue
            if words[0] == "/stream":
                n = int(words[1])
                delay = int(words[2]) / 1000 if len(words) > 2 else 0.0
                for i in range(n):
                    await self.conn.session_update(
                        session_id,
                        AgentMessageChunk(
                            session_update="agent_message_chunk",
                            content=TextContentBlock(type="text", text=f"chunk {i + 1}/{n}\n"),
                        ),
                    )
                    if delay:
                        await asyncio.sleep(delay)
            elif words[0] == "/sleep":
                cancelled = self.cancels[session_id] = asyncio.Event()
                try:
                    await asyncio.wait_for(cancelled.wait(), int(words[1]) / 1000)
                except TimeoutError:
                    pass
                else:
                    return PromptResponse(stop_reason="cancelled")
                finally:
                    self.cancels.pop(session_id, None)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self.cancels.get(session_id)
        if event is not None:
            event.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "bench/echo":
            return params
        if method == "bench/sleep":
            await asyncio.sleep(params.get("ms", 0) / 1000)
            return {"slept": params.get("ms", 0)}
        from acp import RequestError

        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(BenchAgent()))
