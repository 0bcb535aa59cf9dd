"""The agent runtime's v2 guarantees that the interop tests found unguarded, seen on the wire from a
raw v2 client over real pipes (the SDK clients' view of the same is tests/interop)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .test_runtime import REFERENCE, Client


class V2Client(Client):
    """``Client``, asking for ACP v2 (the reference agent speaks both)."""

    async def start(self) -> None:
        from acp_driver.aio import AgentProcess

        self.child = await AgentProcess.spawn(self.argv, self.conn)
        self.process = self.child.process
        answer = await self.conn.request(
            "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}
        )
        assert answer["protocolVersion"] == 2
        result = await self.conn.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        self.session_id = result["sessionId"]

    def updates(self) -> list[dict[str, Any]]:
        return [m["params"]["update"] for _, m in self.received("session/update")]


@pytest.fixture
async def reference_v2() -> AsyncIterator[V2Client]:
    c = V2Client(REFERENCE)
    try:
        async with asyncio.timeout(60):
            await c.start()
            yield c
    finally:
        await c.close()


async def test_resume_of_a_held_session_replays_then_snapshots_then_answers(reference_v2: V2Client) -> None:
    """``session/resume`` with ``replayFrom: start`` of a session this connection already holds:
    the agent sees that resume's params (its ``replayFrom``), so the history is replayed, then the
    state snapshot, then the answer."""
    c = reference_v2
    for text in ("first", "second"):
        await c.prompt(text)
        await eventually_idle(c, text)
    before = len(c.received("session/update"))
    answer = await c.conn.request(
        "session/resume",
        {"sessionId": c.session_id, "cwd": os.getcwd(), "mcpServers": [], "replayFrom": {"type": "start"}},
    )
    assert answer == {}
    replay = c.updates()[before:]
    assert [u.get("content", [{}])[0].get("text") for u in replay[:-1]] == ["first", "second"], replay
    assert [u["sessionUpdate"] for u in replay[:-1]] == ["user_message", "user_message"], replay
    assert replay[-1] == {"sessionUpdate": "state_update", "state": "idle"}, replay


async def eventually_idle(c: V2Client, text: str) -> None:
    from ..waiting import eventually

    def ended() -> bool:
        updates = c.updates()
        inserted = [
            i
            for i, u in enumerate(updates)
            if u.get("sessionUpdate") == "user_message" and u["content"][0].get("text") == text
        ]
        return bool(inserted) and any(u.get("state") == "idle" for u in updates[inserted[-1] :])

    await eventually(ended, f"the span of {text!r} to end")


def test_the_reference_agent_replays_on_a_resume_of_a_session_it_holds() -> None:
    """The same story from a plain synchronous client over pipes: the live user_message, then the
    replayed one."""
    seen = _session_then_resume()
    replayed = [
        m["params"]["update"]
        for m in seen
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "user_message"
    ]
    assert len(replayed) == 2, replayed  # live, then replayed


def _session_then_resume() -> list[dict[str, Any]]:
    """One reference agent: initialize (v2), session/new, a prompt whose work ends, then a resume
    of that session with ``replayFrom: start``; what it sent until the resume's answer."""
    proc = subprocess.Popen(REFERENCE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    def until(found: Any) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            assert line, "the agent closed its output"
            seen.append(json.loads(line))
            if found(seen[-1]):
                return seen[-1]

    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 2, "info": {"name": "t", "version": "1"}},
            }
        )
        until(lambda m: m.get("id") == 1)
        send({"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
        sid = until(lambda m: m.get("id") == 2)["result"]["sessionId"]
        send(
            {
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]},
            }
        )
        until(lambda m: m.get("params", {}).get("update", {}).get("state") == "idle")
        resume = {"sessionId": sid, "cwd": "/", "mcpServers": [], "replayFrom": {"type": "start"}}
        send({"id": 4, "method": "session/resume", "params": resume})
        until(lambda m: m.get("id") == 4 and "method" not in m)
    finally:
        proc.kill()
        proc.wait()
    return seen
