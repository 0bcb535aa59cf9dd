"""ACP v2 on the agent side: the runtime's guarantees, seen on the wire from a raw client over
real pipes (the bundled reference agent, and ``agents/tricky.py`` for handlers that misbehave).

Every story checks the order of what the agent wrote: the prompt answered at insertion after its
``user_message``, ``running``, the work, exactly one idle per span with the right stop reason
(``cancelled`` after a cancel whatever the handler did), held prompts in order, and what a
cancel may and may not touch.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]
TRICKY = [sys.executable, str(Path(__file__).parent / "agents" / "tricky.py")]
TIMEOUT = 30.0


class Raw:
    """A v2 client that writes raw lines and keeps everything the agent wrote, in order."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._ids = 100
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.seen.append(json.loads(line))
            self._arrived.set()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        await self.send({"id": self._ids, "method": method, "params": params})
        return self._ids

    async def until(self, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """The first message (already seen or to come) that matches."""
        async with asyncio.timeout(TIMEOUT):
            while True:
                found = next((m for m in self.seen if predicate(m)), None)
                if found is not None:
                    return found
                self._arrived.clear()
                await self._arrived.wait()

    async def answer(self, rid: int) -> dict[str, Any]:
        return await self.until(lambda m: m.get("id") == rid and "method" not in m, f"the answer to {rid}")

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.seen
            if m.get("method") == "session/update"
            and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)
        ]

    def index(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return next(i for i, m in enumerate(self.seen) if predicate(m))

    def idles(self) -> list[dict[str, Any]]:
        return [u for u in self.updates("state_update") if u["state"] == "idle"]

    async def idle(self, count: int) -> list[dict[str, Any]]:
        await self.until(lambda m: len(self.idles()) >= count, f"{count} idle(s)")
        return self.idles()

    async def open(self) -> str:
        rid = await self.request(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "raw", "version": "0"},
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
                "clientCapabilities": {},
            },
        )
        assert (await self.answer(rid))["result"]["protocolVersion"] == 2
        rid = await self.request("session/new", {"cwd": "/", "mcpServers": []})
        sid: str = (await self.answer(rid))["result"]["sessionId"]
        return sid

    async def prompt(self, sid: str, text: str) -> int:
        return await self.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        )


@pytest.fixture
async def agent(request: pytest.FixtureRequest) -> AsyncIterator[Raw]:
    argv = getattr(request, "param", REFERENCE)
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    raw = Raw(process)
    try:
        yield raw
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(TIMEOUT):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raw._reader.cancel()


def is_answer(rid: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("id") == rid and "method" not in m


def is_update(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(m: dict[str, Any]) -> bool:
        if m.get("method") != "session/update":
            return False
        update = m["params"]["update"]
        return bool(update["sessionUpdate"] == kind and all(update.get(k) == v for k, v in fields.items()))

    return match


async def test_version_negotiation(agent: Raw) -> None:
    asked = {}
    for version, extra in ((0, {}), (1, {}), (3, {}), (2, {"info": {"name": "x", "version": "0"}})):
        rid = await agent.request("initialize", {"protocolVersion": version, **extra})
        asked[version] = (await agent.answer(rid))["result"]
    assert asked[0]["protocolVersion"] == 1  # never its own 0 back
    assert asked[1]["protocolVersion"] == 1
    assert "agentCapabilities" in asked[1]
    assert asked[3]["protocolVersion"] == 2  # the highest spoken below what was asked
    assert asked[2]["protocolVersion"] == 2
    assert asked[2]["info"]["name"] == "acp-driver-reference-agent"
    assert "session" in asked[2]["capabilities"]  # v2: the baseline session methods


@pytest.mark.parametrize("agent", [[*REFERENCE, "--protocol", "1"]], indirect=True)
async def test_an_agent_restricted_to_v1_answers_1_to_a_v2_client(agent: Raw) -> None:
    rid = await agent.request(
        "initialize",
        {
            "protocolVersion": 2,
            "info": {"name": "x", "version": "0"},
            "clientInfo": {"name": "x", "version": "0"},
        },
    )
    result = (await agent.answer(rid))["result"]
    assert result["protocolVersion"] == 1
    assert "agentInfo" in result


async def test_a_prompt_is_answered_at_insertion_and_its_span_ends_with_one_idle(agent: Raw) -> None:
    sid = await agent.open()
    rid = await agent.prompt(sid, "/stream 3 5")
    answer = await agent.answer(rid)
    message_id = answer["result"]["messageId"]
    inserted = agent.index(is_update("user_message", messageId=message_id))
    running = agent.index(is_update("state_update", state="running"))
    assert inserted < running < agent.index(is_answer(rid))  # echoed, running, then answered
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "end_turn"
    chunks = agent.updates("agent_message_chunk")
    assert [c["content"]["text"] for c in chunks] == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"]
    assert all(isinstance(c.get("messageId"), str) for c in chunks)  # v2: required
    last_chunk = max(i for i, m in enumerate(agent.seen) if is_update("agent_message_chunk")(m))
    assert last_chunk < agent.index(is_update("state_update", state="idle"))


async def test_held_prompts_cancels_and_withdrawals(agent: Raw) -> None:
    sid = await agent.open()
    running = await agent.prompt(sid, "/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    held = await agent.prompt(sid, "held one")
    withdrawn = await agent.prompt(sid, "held two")
    await agent.send({"method": "$/cancel_request", "params": {"requestId": withdrawn}})
    assert (await agent.answer(withdrawn))["error"]["code"] == -32800
    assert agent.idles() == []  # the running span is untouched
    assert not any(is_answer(held)(m) for m in agent.seen)  # still held
    await agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    assert (await agent.answer(held))["error"]["code"] == -32800  # held at the cancel: cancelled
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    assert "result" in await agent.answer(running)
    # A prompt sent after the cancel is untouched by it: it runs, and ends on its own.
    after = await agent.prompt(sid, "after")
    assert "messageId" in (await agent.answer(after))["result"]
    idles = await agent.idle(2)
    assert idles[1]["stopReason"] == "end_turn"
    assert len(agent.idles()) == 2  # exactly one idle per span


@pytest.mark.parametrize("agent", [TRICKY], indirect=True)
@pytest.mark.parametrize("mode", ["raise", "end_turn", "swallow"])
async def test_a_cancelled_span_ends_cancelled_whatever_the_handler_does(agent: Raw, mode: str) -> None:
    sid = await agent.open()
    rid = await agent.prompt(sid, mode)
    await agent.answer(rid)
    await agent.until(is_update("agent_message_chunk"), "the handler to run")
    await agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    assert all("error" not in m for m in agent.seen if m.get("id") == rid)  # never an error after insertion


@pytest.mark.parametrize("agent", [TRICKY], indirect=True)
async def test_a_handler_that_raises_ends_its_span_with_error_not_a_json_rpc_error(agent: Raw) -> None:
    sid = await agent.open()
    rid = await agent.prompt(sid, "error")
    assert "result" in await agent.answer(rid)
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "error"
    assert isinstance(idle["error"]["code"], int)


async def test_a_permission_makes_the_state_requires_action_and_a_cancel_withdraws_it(agent: Raw) -> None:
    sid = await agent.open()
    await agent.prompt(sid, "/permission")
    asked = await agent.until(lambda m: m.get("method") == "session/request_permission", "the question")
    assert asked["params"]["subject"]["type"] == "tool_call"  # v2's shape
    assert agent.index(is_update("state_update", state="requires_action")) < agent.index(lambda m: m is asked)
    await agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    withdrawal = await agent.until(
        lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked["id"],
        "the agent to withdraw its question",
    )
    await agent.send({"id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    assert agent.index(lambda m: m is withdrawal) < agent.index(is_update("state_update", state="idle"))


async def test_close_sends_the_idle_cancelled_before_its_answer_and_nothing_after(agent: Raw) -> None:
    sid = await agent.open()
    await agent.prompt(sid, "/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    close = await agent.request("session/close", {"sessionId": sid})
    assert (await agent.answer(close))["result"] == {}
    idle_at = agent.index(is_update("state_update", state="idle"))
    assert idle_at < agent.index(is_answer(close))
    assert agent.idles()[0]["stopReason"] == "cancelled"
    count = len(agent.seen)
    ping = await agent.request("_acp_driver/echo", {"x": 1})  # a round trip: nothing came meanwhile
    await agent.answer(ping)
    assert [m for m in agent.seen[count:] if m.get("method") == "session/update"] == []


async def test_resume_replays_then_snapshots_then_answers(agent: Raw) -> None:
    sid = await agent.open()
    rid = await agent.prompt(sid, "hello")
    await agent.answer(rid)
    await agent.idle(1)
    count = len(agent.seen)
    bad = await agent.request(
        "session/resume", {"sessionId": sid, "cwd": "/", "replayFrom": {"type": "_nope"}}
    )
    assert (await agent.answer(bad))["error"]["code"] == -32602
    resume = await agent.request(
        "session/resume", {"sessionId": sid, "cwd": "/", "replayFrom": {"type": "start"}}
    )
    await agent.answer(resume)
    after = agent.seen[count:]
    replay = next(i for i, m in enumerate(after) if is_update("user_message")(m))
    snapshot = next(i for i, m in enumerate(after) if is_update("state_update")(m))
    answer = next(i for i, m in enumerate(after) if is_answer(resume)(m))
    assert replay < snapshot < answer
    assert after[snapshot]["params"]["update"]["state"] == "idle"


@pytest.mark.parametrize("agent", [[*REFERENCE, "--behavior", "never-idle"]], indirect=True)
async def test_the_never_idle_misbehaviour_sends_no_idle_after_a_cancel(agent: Raw) -> None:
    sid = await agent.open()
    await agent.prompt(sid, "/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    await agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    ping = await agent.request("_acp_driver/sleep", {"ms": 300})  # bounded: a fixed wait is the point
    await agent.answer(ping)
    assert agent.idles() == []
