"""ACP v2 on the agent side: the runtime's guarantees, seen on the wire from a raw client over
real pipes (the bundled reference agent, and ``agents/tricky.py`` for handlers that misbehave;
the SDK clients' view of the same is tests/interop).

Every story checks the order of what the agent wrote: the prompt answered at insertion after its
``user_message``, ``running``, the work, exactly one idle per span with the right stop reason
(``cancelled`` after a cancel whatever the handler did), held prompts in order, what a cancel may
and may not touch, and a resume's replay before its snapshot before its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from acp_driver import RpcError
from acp_driver.aio import PendingRequest

from ..waiting import eventually
from .test_runtime import REFERENCE, TRICKY, Client

TIMEOUT = 30.0

Message = dict[str, Any]


class V2Client(Client):
    """``Client`` asking for ACP v2, with the look-ups a v2 story makes on what the agent wrote."""

    async def initialize(self) -> None:
        answer = await self.conn.request(
            "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}
        )
        assert answer["protocolVersion"] == 2

    def new_session_params(self) -> dict[str, Any]:
        return {"cwd": os.getcwd()}  # all v2 requires (no mcpServers)

    def seen(self) -> list[Message]:
        """Everything the agent wrote, in order."""
        return [m for _, m in self.received()]

    def index(self, predicate: Callable[[Message], bool]) -> int:
        """Position in ``seen()`` of the first message that matches."""
        for i, m in enumerate(self.seen()):
            if predicate(m):
                return i
        raise AssertionError("no such message from the agent")

    async def until(self, predicate: Callable[[Message], bool], what: str) -> Message:
        """The first message (already seen or to come) that matches."""
        await eventually(lambda: any(predicate(m) for m in self.seen()), what, TIMEOUT)
        return self.seen()[self.index(predicate)]

    async def answer(self, request: PendingRequest) -> Message:
        """The agent's answer to ``request`` as it came on the wire (a result or an error)."""
        with contextlib.suppress(RpcError):
            async with asyncio.timeout(TIMEOUT):
                await request
        return self.seen()[self.index(is_answer(request.rid))]

    def updates(self, kind: str | None = None) -> list[Message]:
        return [
            m["params"]["update"]
            for m in self.seen()
            if m.get("method") == "session/update"
            and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)
        ]

    def idles(self) -> list[Message]:
        return [u for u in self.updates("state_update") if u["state"] == "idle"]

    async def idle(self, count: int) -> list[Message]:
        await eventually(lambda: len(self.idles()) >= count, f"{count} idle(s)", TIMEOUT)
        return self.idles()


async def v2_client(request: pytest.FixtureRequest, *, session: bool) -> AsyncIterator[V2Client]:
    """A ``V2Client`` of ``request.param`` (default: the reference agent); with ``session``,
    initialized (v2) and holding a session, else only spawned. Once the story is over, its input
    closed, the agent must exit on its own."""
    c = V2Client(getattr(request, "param", REFERENCE))
    try:
        async with asyncio.timeout(TIMEOUT):
            await (c.start() if session else c.spawn())
        yield c
        await exits_on_its_own(c)
    finally:
        await c.close()


async def exits_on_its_own(c: Client) -> None:
    await c.conn.aclose()
    assert c.process is not None
    async with asyncio.timeout(TIMEOUT):
        await c.process.wait()


@pytest.fixture
async def agent(request: pytest.FixtureRequest) -> AsyncIterator[V2Client]:
    async for c in v2_client(request, session=True):
        yield c


@pytest.fixture
async def spawned(request: pytest.FixtureRequest) -> AsyncIterator[V2Client]:
    async for c in v2_client(request, session=False):
        yield c


def is_answer(rid: Any) -> Callable[[Message], bool]:
    return lambda m: m.get("id") == rid and "method" not in m


def is_update(kind: str, **fields: Any) -> Callable[[Message], bool]:
    def match(m: Message) -> bool:
        if m.get("method") != "session/update":
            return False
        update = m["params"]["update"]
        return bool(update["sessionUpdate"] == kind and all(update.get(k) == v for k, v in fields.items()))

    return match


async def test_version_negotiation(spawned: V2Client) -> None:
    asked = {}
    for version, extra in ((0, {}), (1, {}), (3, {}), (2, {"info": {"name": "x", "version": "0"}})):
        asked[version] = await spawned.conn.request("initialize", {"protocolVersion": version, **extra})
    assert asked[0]["protocolVersion"] == 1  # never its own 0 back
    assert asked[1]["protocolVersion"] == 1
    assert "agentCapabilities" in asked[1]
    assert asked[3]["protocolVersion"] == 2  # the highest spoken below what was asked
    assert asked[2]["protocolVersion"] == 2
    assert asked[2]["info"]["name"] == "acp-driver-reference-agent"
    assert "session" in asked[2]["capabilities"]  # v2: the baseline session methods


@pytest.mark.parametrize("spawned", [[*REFERENCE, "--protocol", "1"]], indirect=True)
async def test_an_agent_restricted_to_v1_answers_1_to_a_v2_client(spawned: V2Client) -> None:
    result = await spawned.conn.request(
        "initialize",
        {
            "protocolVersion": 2,
            "info": {"name": "x", "version": "0"},
            "clientInfo": {"name": "x", "version": "0"},
        },
    )
    assert result["protocolVersion"] == 1
    assert "agentInfo" in result


V2_BAD_PARAMS = [
    ("session/new", {}, 'missing required member "cwd"'),
    (
        "session/prompt",
        {"sessionId": "SID", "prompt": [{"type": "text", "text": 5}]},
        '"text" must be a string',
    ),
    ("session/prompt", {"sessionId": "SID", "prompt": [{"type": "image", "data": "x"}]}, '"mimeType"'),
    ("session/prompt", {"sessionId": "SID", "prompt": [{"type": "resource", "resource": "x"}]}, "an object"),
    ("tool_call/cancel", {"sessionId": "SID"}, 'missing required member "toolCallId"'),
    ("initialize", {"protocolVersion": 2}, 'missing required member "info"'),
]


@pytest.mark.parametrize(("method", "params", "reason"), V2_BAD_PARAMS)
async def test_v2_params_are_checked_against_v2s_schema(
    agent: V2Client, method: str, params: dict[str, Any], reason: str
) -> None:
    if params.get("sessionId") == "SID":
        params = {**params, "sessionId": agent.session_id}
    with pytest.raises(RpcError) as info:
        await agent.conn.request(method, params)
    assert (info.value.code, reason in info.value.message) == (-32602, True), info.value.message
    assert agent.updates() == []  # nothing ran
    turn = agent.prompt("still here")
    assert "messageId" in (await agent.answer(turn))["result"]
    assert [i["stopReason"] for i in await agent.idle(1)] == ["end_turn"]


@pytest.mark.parametrize(
    ("block", "taken"),
    [
        ({"type": "text", "text": "hi"}, True),
        ({"type": "resource_link", "uri": "file:///x", "name": "x"}, True),  # baseline
        ({"type": "resource", "resource": {"uri": "file:///x", "text": "hi"}}, True),  # embeddedContext
        ({"type": "image", "data": "AA==", "mimeType": "image/png"}, False),  # not advertised
        ({"type": "audio", "data": "AA==", "mimeType": "audio/wav"}, False),
        ({"type": "_vendor/thing", "x": 1}, False),
        ({"type": "future"}, False),
    ],
)
async def test_a_block_type_the_agent_does_not_take_is_invalid_params(
    agent: V2Client, block: dict[str, Any], taken: bool
) -> None:
    # v2 (ContentBlock): "Agents MUST reject a session/prompt request with a content block type
    # they do not support with -32602". The reference agent takes embeddedContext only.
    turn = agent.conn.request_nowait(
        "session/prompt", {"sessionId": agent.session_id, "prompt": [{"type": "text", "text": "x"}, block]}
    )
    answer = await agent.answer(turn)
    if taken:
        assert "messageId" in answer["result"]
        assert [i["stopReason"] for i in await agent.idle(1)] == ["end_turn"]
    else:
        assert answer["error"]["code"] == -32602
        assert f"prompt[1] is a {block['type']!r} block" in answer["error"]["message"]
        assert agent.updates() == []  # neither inserted nor held


async def test_a_v2_session_needs_only_a_cwd(agent: V2Client) -> None:
    # v1's table applied to v2 refused this (missing "mcpServers"): v2 requires only cwd.
    opened = await agent.conn.request("session/new", {"cwd": os.getcwd()})
    assert set(opened) >= {"sessionId"}
    resumed = await agent.conn.request(
        "session/resume", {"sessionId": opened["sessionId"], "cwd": os.getcwd()}
    )
    assert isinstance(resumed, dict)


async def test_a_prompt_is_answered_at_insertion_and_its_span_ends_with_one_idle(agent: V2Client) -> None:
    turn = agent.prompt("/stream 3 5")
    message_id = (await agent.answer(turn))["result"]["messageId"]
    inserted = agent.index(is_update("user_message", messageId=message_id))
    running = agent.index(is_update("state_update", state="running"))
    assert inserted < running < agent.index(is_answer(turn.rid))  # echoed, running, then answered
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "end_turn"
    chunks = agent.updates("agent_message_chunk")
    assert [c["content"]["text"] for c in chunks] == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"]
    assert all(isinstance(c.get("messageId"), str) for c in chunks)  # v2: required
    last_chunk = max(i for i, m in enumerate(agent.seen()) if is_update("agent_message_chunk")(m))
    assert last_chunk < agent.index(is_update("state_update", state="idle"))


async def test_held_prompts_cancels_and_withdrawals(agent: V2Client) -> None:
    running = agent.prompt("/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    held = agent.prompt("held one")
    withdrawn = agent.prompt("held two")
    agent.conn.cancel_request(withdrawn.rid)  # $/cancel_request; we keep waiting for the answer
    assert (await agent.answer(withdrawn))["error"]["code"] == -32800
    assert agent.idles() == []  # the running span is untouched
    assert not any(is_answer(held.rid)(m) for m in agent.seen())  # still held
    agent.cancel()
    assert (await agent.answer(held))["error"]["code"] == -32800  # held at the cancel: cancelled
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    assert "result" in await agent.answer(running)
    # A prompt sent after the cancel is untouched by it: it runs, and ends on its own.
    after = agent.prompt("after")
    assert "messageId" in (await agent.answer(after))["result"]
    idles = await agent.idle(2)
    assert idles[1]["stopReason"] == "end_turn"
    assert len(agent.idles()) == 2  # exactly one idle per span


@pytest.mark.parametrize("agent", [TRICKY], indirect=True)
@pytest.mark.parametrize("mode", ["raise", "end_turn", "swallow"])
async def test_a_cancelled_span_ends_cancelled_whatever_the_handler_does(agent: V2Client, mode: str) -> None:
    turn = agent.prompt(mode)
    await agent.answer(turn)
    await agent.until(is_update("agent_message_chunk"), "the handler to run")
    agent.cancel()
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    answers = [m for m in agent.seen() if is_answer(turn.rid)(m)]
    assert len(answers) == 1  # never an error after insertion
    assert "result" in answers[0]


@pytest.mark.parametrize("agent", [TRICKY], indirect=True)
async def test_a_handler_that_raises_ends_its_span_with_error_not_a_json_rpc_error(agent: V2Client) -> None:
    turn = agent.prompt("error")
    assert "result" in await agent.answer(turn)
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "error"
    assert isinstance(idle["error"]["code"], int)


async def test_a_permission_makes_the_state_requires_action_and_a_cancel_withdraws_it(
    agent: V2Client,
) -> None:
    async def unanswered(params: Any) -> Any:
        await asyncio.Event().wait()  # until the agent withdraws the question

    agent.conn.on_request("session/request_permission", unanswered)
    agent.prompt("/permission")

    def is_question(m: Message) -> bool:
        return m.get("method") == "session/request_permission"

    asked = await agent.until(is_question, "the question")
    assert asked["params"]["subject"]["type"] == "tool_call"  # v2's shape
    assert agent.index(is_update("state_update", state="requires_action")) < agent.index(is_question)
    agent.cancel()

    def is_withdrawal(m: Message) -> bool:
        return m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked["id"]

    await agent.until(is_withdrawal, "the agent to withdraw its question")
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "cancelled"
    assert agent.index(is_withdrawal) < agent.index(is_update("state_update", state="idle"))


async def test_running_is_reported_again_once_a_permission_is_answered(agent: V2Client) -> None:
    answered: list[Any] = []

    async def allow(params: Any) -> Any:
        answered.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}

    agent.conn.on_request("session/request_permission", allow)
    agent.prompt("/permission")
    (idle,) = await agent.idle(1)
    assert idle["stopReason"] == "end_turn"
    assert len(answered) == 1
    states = [(u["state"], u.get("stopReason")) for u in agent.updates("state_update")]
    assert states == [("running", None), ("requires_action", None), ("running", None), ("idle", "end_turn")]
    # running again before the work that followed the answer (the tool call's completion)
    completed = agent.index(is_update("tool_call_update", status="completed"))
    running_again = [i for i, m in enumerate(agent.seen()) if is_update("state_update", state="running")(m)][
        1
    ]
    assert running_again < completed


async def test_close_sends_the_idle_cancelled_before_its_answer_and_nothing_after(agent: V2Client) -> None:
    agent.prompt("/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    close = agent.conn.request_nowait("session/close", {"sessionId": agent.session_id})
    assert (await agent.answer(close))["result"] == {}
    assert agent.index(is_update("state_update", state="idle")) < agent.index(is_answer(close.rid))
    assert agent.idles()[0]["stopReason"] == "cancelled"
    count = len(agent.seen())
    await agent.conn.request("_acp_driver/echo", {"x": 1})  # a round trip: nothing came meanwhile
    assert [m for m in agent.seen()[count:] if m.get("method") == "session/update"] == []


async def test_resume_replays_then_snapshots_then_answers(agent: V2Client) -> None:
    """``session/resume`` with ``replayFrom: start`` of a session this connection already holds:
    the agent sees that resume's params (its ``replayFrom``), so the history is replayed, then the
    state snapshot, then the answer. A resume with a ``replayFrom`` it does not know is refused
    and sends nothing."""
    for count, text in enumerate(("first", "second"), 1):
        await agent.answer(agent.prompt(text))
        await agent.idle(count)
    before = len(agent.seen())
    params = {"sessionId": agent.session_id, "cwd": "/"}
    bad = agent.conn.request_nowait("session/resume", {**params, "replayFrom": {"type": "_nope"}})
    assert (await agent.answer(bad))["error"]["code"] == -32602
    resume = agent.conn.request_nowait("session/resume", {**params, "replayFrom": {"type": "start"}})
    assert (await agent.answer(resume))["result"] == {}
    answered = agent.index(is_answer(resume.rid))
    replay = [
        m["params"]["update"] for m in agent.seen()[before:answered] if m.get("method") == "session/update"
    ]
    assert [(u["sessionUpdate"], u["content"][0]["text"]) for u in replay[:-1]] == [
        ("user_message", "first"),
        ("user_message", "second"),
    ], replay
    assert replay[-1] == {"sessionUpdate": "state_update", "state": "idle"}, replay


@pytest.mark.parametrize("agent", [[*REFERENCE, "--behavior", "never-idle"]], indirect=True)
async def test_the_never_idle_misbehaviour_sends_no_idle_after_a_cancel(agent: V2Client) -> None:
    agent.prompt("/stream 1000 20")
    await agent.until(is_update("agent_message_chunk"), "the work")
    agent.cancel()
    await agent.conn.request("_acp_driver/sleep", {"ms": 300})  # bounded: a fixed wait is the point
    assert agent.idles() == []
