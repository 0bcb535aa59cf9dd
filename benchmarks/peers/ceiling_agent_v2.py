"""The ceiling's ACP v2 agent: ``ceiling_agent.py``'s minimal asyncio + orjson peer, speaking v2.

The least protocol work a correct v2 agent does for the benchmark's prompts (``/stream N MS``,
``/sleep MS``): ``initialize`` answered with version 2 (v2's ``info``/``capabilities``),
``session/new``; a prompt is inserted at once: its ``user_message`` echo (the spec: the agent
MUST echo the inserted message during the live session), ``state_update`` ``running``, the
answer ``{messageId}``, then its ``agent_message_chunk`` updates (each with a ``messageId``), then
an idle ``state_update`` with ``stopReason`` ``end_turn``. ``session/cancel`` stops the sleeping
work and sends the idle with ``cancelled``. Answered inline from the read callback, writes
coalesced once per loop iteration, no validation, no held-prompt queue (the benchmark never
prompts a working session): an upper bound, not a usable agent.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ceiling_agent import Agent as V1Agent
from ceiling_agent import main


class Agent(V1Agent):
    def __init__(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
        super().__init__(loop, done)
        self.messages = 0

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "initialize":
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg.get("id"),
                    "result": {
                        "protocolVersion": 2,
                        "info": {"name": "ceiling-v2", "version": "0"},
                        "capabilities": {},
                    },
                }
            )
        elif method == "session/cancel":
            sid = str((msg.get("params") or {}).get("sessionId"))
            turn = self.turns.pop(sid, None)
            if turn is not None:
                _message_id, handle = turn
                if handle is not None:
                    handle.cancel()
                self.state(sid, "idle", "cancelled")
        else:
            super().handle(msg)

    def update(self, sid: Any, update: dict[str, Any]) -> None:
        self.send(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}
        )

    def state(self, sid: Any, state: str, stop_reason: str | None = None) -> None:
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop_reason is not None:
            update["stopReason"] = stop_reason
        self.update(sid, update)

    def prompt(self, rid: object, params: dict[str, Any]) -> None:
        sid = str(params.get("sessionId"))
        self.messages += 1
        user_id = f"u{self.messages}"
        self.update(
            sid, {"sessionUpdate": "user_message", "messageId": user_id, "content": params.get("prompt", [])}
        )
        self.state(sid, "running")
        self.send({"jsonrpc": "2.0", "id": rid, "result": {"messageId": user_id}})
        self.loop.create_task(self.run_work(sid, params))

    async def run_work(self, sid: str, params: dict[str, Any]) -> None:
        message_id = f"a{self.messages}"
        text = "\n".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
        for line in text.splitlines():
            words = line.split()
            if not words:
                continue
            if words[0] == "/stream":
                n = int(words[1])
                for i in range(n):
                    self.update(
                        sid,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "messageId": message_id,
                            "content": {"type": "text", "text": f"chunk {i + 1}/{n}\n"},
                        },
                    )
                    if len(self.out) >= 64:  # let the loop flush and read, like any streaming agent
                        await asyncio.sleep(0)
            elif words[0] == "/sleep":
                ms = int(words[1])
                handle = self.loop.call_later(ms / 1000, self.turn_done, sid, message_id)
                self.turns[sid] = (message_id, handle)
                return
        self.state(sid, "idle", "end_turn")

    def turn_done(self, sid: str, rid: object) -> None:
        if self.turns.pop(sid, None) is not None:
            self.state(sid, "idle", "end_turn")


if __name__ == "__main__":
    asyncio.run(main(Agent))
    sys.exit(0)
