"""The proxy's deadlines by time, on a fake clock: the proxy runs in this process on real pipes
(``run_proxy(stdin=..., stdout=...)``) with ``ProxySettings(clock=...)``, in front of a real
reference agent; time moves only when the test says so, so each rung and the editor's
``cancelled`` are asserted at their instants, not only by their outcome."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from acp_driver.proxy import GuardSettings, ProxySettings, run_proxy

from ..fakeclock import FakeClock
from ..waiting import eventually
from .editor import AGENT

T0 = 1000.0
BUDGET = 8.0


class PipeEditor:
    """An editor on two pipes to an in-process proxy."""

    def __init__(self, writer: int, reader: asyncio.StreamReader) -> None:
        self.writer = writer
        self.reader = reader
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.writer, json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, method: str, params: Any) -> int:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def answer(self, rid: int) -> dict[str, Any]:
        while True:
            for message in self.seen:
                if "method" not in message and message.get("id") == rid:
                    return message
            line = await self.reader.readline()
            assert line, "the proxy closed its output"
            self.seen.append(json.loads(line))

    def answered(self, rid: int) -> bool:
        return any("method" not in m and m.get("id") == rid for m in self.seen)


async def _proxy(clock: FakeClock, behavior: str) -> tuple[PipeEditor, asyncio.Task[int]]:
    editor_in, proxy_out = os.pipe()
    proxy_in, editor_out = os.pipe()
    settings = ProxySettings(guard=GuardSettings(cancel_budget=BUDGET), clock=clock)
    loop = asyncio.get_running_loop()
    task = loop.create_task(
        run_proxy(
            [*AGENT, "--behavior", behavior],
            settings,
            stdin=os.fdopen(proxy_in, "rb", buffering=0),
            stdout=os.fdopen(proxy_out, "wb", buffering=0),
        )
    )
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(editor_in, "rb"))
    return PipeEditor(editor_out, reader), task


async def test_the_editors_cancel_is_answered_at_the_rung_that_ended_the_turn() -> None:
    """An agent that ignores every cancel is SIGTERMed at 3/4 of the budget: the editor's prompt
    is answered ``cancelled`` then, and not before (an echo sent just before that instant comes
    back first)."""
    clock = FakeClock(T0)
    editor, task = await _proxy(clock, "ignore-cancel")
    try:
        await _cancel_story(clock, editor)
        os.close(editor.writer)  # the editor leaves
        editor.writer = -1
        assert await asyncio.wait_for(task, 30) == 0
    finally:
        await _stop(clock, editor, task)


async def _stop(clock: FakeClock, editor: PipeEditor, task: asyncio.Task[int]) -> None:
    """Whatever happened, the proxy ends: its input closes, and its fake time moves on (its
    ladder and graces run on it) until it is done."""
    if editor.writer >= 0:
        os.close(editor.writer)
        editor.writer = -1
    for _ in range(600):
        if task.done():
            return
        clock.advance(1.0)
        await asyncio.wait({task}, timeout=0.05)
    task.cancel()


async def _cancel_story(clock: FakeClock, editor: PipeEditor) -> None:
    async with asyncio.timeout(60):
        init = await editor.answer(
            editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        )
        assert init["result"]["protocolVersion"] == 1
        new = await editor.answer(editor.request("session/new", {"cwd": os.getcwd(), "mcpServers": []}))
        sid = new["result"]["sessionId"]
        prompt = editor.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/sleep 300000"}]}
        )
        echo = editor.request("_acp_driver/echo", {"before": "the cancel"})
        await editor.answer(echo)  # the prompt is with the agent
        editor.send({"method": "session/cancel", "params": {"sessionId": sid}})
        await eventually(lambda: T0 + BUDGET * 0.5 in clock.deadlines, "the ladder's next rung")
        clock.advance_to(T0 + BUDGET * 0.5)  # $/cancel_request: ignored too
        assert T0 + BUDGET * 0.75 in clock.deadlines
        probe = editor.request("_acp_driver/echo", {"before": "SIGTERM"})
        await editor.answer(probe)
        assert not editor.answered(prompt)  # nothing ended the turn before its rung
        clock.advance_to(T0 + BUDGET * 0.75)  # SIGTERM: the agent dies of it
        answer = await editor.answer(prompt)
        assert answer["result"] == {"stopReason": "cancelled"}
