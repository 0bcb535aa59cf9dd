"""OUR host in ACP v2 (``acp_driver.driver.launch(protocol="auto" | 2)``) driving the agents written
with the official SDKs' v2 APIs (``peers/sdk_v2_agent.py`` on the Python SDK 1.0.0rc3,
``peers/ts_v2_agent.mjs`` on the TypeScript SDK 2.4.0), over real pipes.

One agent process per test, many scenarios on it: a streamed turn; prompts held behind running
work (each its own turn, in order); a cancel mid-stream with prompts held (our ``session/cancel``;
their idle ``cancelled`` resolves the turn ``CANCELLED`` at the ladder's first rung, the held ones
get ``-32800``); a held prompt withdrawn by its own cancel (``$/cancel_request``, ``-32800``, the
running turn untouched); a cancel while a permission request is pending (our host answers it
``cancelled`` at the cancel, once, even when the agent withdraws it afterwards); a permission the
agent withdraws on its own (answered with the ``cancelled`` outcome, a result); ``session/close``.
Then an agent that ignores the cancel: the SDKs have no deadline, our ladder ends the turn and no
process is left. Every message our host sent is checked against the newest v2 schema.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import ClientServices, LadderPolicy, Resolution, launch

from ..remote.serving import processes_running
from ..waiting import eventually
from ..wire import Wire
from .installs import PeerInstaller
from .schema_check_v2 import V2Schema, assert_conforms_v2
from .sdk_peers import V2Sdk, v2_sdk_or_skip
from .v2_host import Dialog, first_chunk, texts_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CANCELLED = -32800
CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}


def agent_marker(agent: V2Sdk) -> bytes:
    return Path(agent.script("agent")[-1]).name.encode()


@pytest.mark.parametrize(("kind", "protocol"), [("python", "auto"), ("typescript", 2)])
async def test_our_v2_host_drives_the_sdk_agent(
    interop_peers: PeerInstaller, v2_schema: V2Schema, kind: str, protocol: Any, tmp_path: Path
) -> None:
    sdk = v2_sdk_or_skip(interop_peers, kind)
    wire, dialog = Wire(), Dialog()
    agent = await launch(
        sdk.script("agent"),
        env={**os.environ, **sdk.env},
        protocol=protocol,
        tracer=wire.trace,
        services=ClientServices(permission=dialog),
        ladder=LadderPolicy(budget=10.0),
    )
    async with asyncio.timeout(120), agent:
        report = wire.dump
        # The version spoken: 2, asked for with v1's field names too under "auto".
        assert agent.protocol_version == 2, report()
        [init] = wire.sent("initialize")
        assert init["params"]["protocolVersion"] == 2, report()
        assert ("clientInfo" in init["params"]) is (protocol == "auto"), report()
        session = await agent.new_session(tmp_path)

        # A streamed turn: inserted (the answer's messageId), its chunks, end_turn at its idle.
        turn = session.prompt("/stream 3 10")
        texts = await texts_of(turn)
        result = await turn
        assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED), report()
        assert texts == ["w0 ", "w1 ", "w2 "], report()
        [answer] = wire.answers("in", turn.request_id)
        assert turn.message_id == answer["result"]["messageId"], report()

        # Prompts sent while the agent works are held, inserted in order, each its own turn.
        first = session.prompt("/stream 4 40")
        await first_chunk(first)
        second, third = session.prompt("second"), session.prompt("third")
        ended: list[str] = []

        async def end_of(name: str, held: Any) -> list[str]:
            texts = await texts_of(held)
            await held
            ended.append(name)
            return texts

        streams = await asyncio.gather(
            end_of("first", first), end_of("second", second), end_of("third", third)
        )
        assert ended == ["first", "second", "third"], report()
        assert list(streams) == [["w1 ", "w2 ", "w3 "], ["second"], ["third"]], report()
        assert all(
            t.result is not None and t.result.stop_reason == "end_turn" for t in (first, second, third)
        )
        assert len({first.message_id, second.message_id, third.message_id}) == 3, report()

        # A cancel mid-stream with two prompts held: session/cancel, their idle "cancelled"
        # resolves the turn at the first rung; the held prompts are answered -32800; a prompt
        # sent after the cancel is its own turn.
        mark = wire.mark()
        turn = session.prompt("/stream 1000 20")
        await first_chunk(turn, 2)
        held_one, held_two = session.prompt("held one"), session.prompt("held two")
        outcome = await turn.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
            Resolution.CANCELLED,
            "session_cancel",
            ("session_cancel",),
        ), report()
        assert (await turn).stop_reason == "cancelled", report()
        for held in (held_one, held_two):
            result = await held
            assert result.resolution is Resolution.CANCELLED, report()
            assert result.error is not None, report()
            assert result.error.code == CANCELLED, report()
            assert [a["error"]["code"] for a in wire.answers("in", held.request_id)] == [CANCELLED], report()
        assert len(wire.sent("session/cancel", mark)) == 1, report()
        after = session.prompt("after the cancel")
        assert await texts_of(after) == ["after the cancel"], report()
        assert (await after).stop_reason == "end_turn", report()

        # A held prompt's own cancel withdraws it ($/cancel_request, -32800): the running turn
        # is not touched (no session/cancel), and is cancelled afterwards on its own.
        mark = wire.mark()
        turn = session.prompt("/sleep 30000")
        await first_chunk(turn)
        held = session.prompt("withdrawn")
        outcome = await held.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
            Resolution.CANCELLED,
            "withdrawn",
            ("withdraw",),
        ), report()
        assert [m["params"] for m in wire.sent("$/cancel_request", mark)] == [{"requestId": held.request_id}]
        # Our turn settled at the withdrawal; the agent confirms it with -32800 (both SDK agents
        # honour it: claude-agent-acp does not, see test_v2_claude_through_our_host.py).
        await eventually(lambda: wire.answers("in", held.request_id), "the agent's answer to the withdrawal")
        assert [a["error"]["code"] for a in wire.answers("in", held.request_id)] == [CANCELLED], report()
        assert not wire.sent("session/cancel", mark), report()
        assert not turn.done, report()
        assert (await turn.cancel()).resolved_by == "session_cancel", report()

        # A cancel while a permission request is pending: our host sends session/cancel, then
        # answers the request `cancelled` (the spec's order: an agent reading in order knows the
        # answer is the cancel's, not a user's refusal), exactly once; the tool call is marked
        # cancelled. The agent's idle "cancelled" resolves the turn at the first rung. (The
        # TypeScript SDK runs a notification's handler some steps after it settles a response
        # read after it: its agent yields once before reading a `cancelled` answer, see
        # docs/interop.md.)
        mark = wire.mark()
        turn = session.prompt("/permission")
        asked = await dialog.next()
        outcome = await turn.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
            Resolution.CANCELLED,
            "session_cancel",
            ("session_cancel",),
        ), report()
        assert wire.states(mark)[-1] == ("idle", "cancelled"), report()
        assert dialog.cancelled[-1] == "turn cancelled", report()
        [request] = wire.received("session/request_permission", mark)
        assert request["params"]["subject"]["toolCall"]["toolCallId"] == asked.tool_call["toolCallId"]
        answer_at = wire.index(
            lambda d, m: d == "out" and m.get("id") == request["id"] and "method" not in m, mark
        )
        cancel_at = wire.index(lambda d, m: d == "out" and m.get("method") == "session/cancel", mark)
        assert cancel_at < answer_at, report()
        await turn
        # The agents may withdraw it ($/cancel_request) as their work unwinds, if they had not
        # read our answer yet: that comes after our answer, which stays the only one.
        withdrawn = [
            i
            for i, (d, m) in enumerate(wire.messages)
            if d == "in"
            and m.get("method") == "$/cancel_request"
            and m["params"]["requestId"] == request["id"]
        ]
        assert all(answer_at < i for i in withdrawn), report()
        answered_at_cancel = request["id"]
        assert [t.cancelled for t in turn.tool_calls.values()] == [True], report()
        assert [t.status for t in turn.tool_calls.values()] in (["cancelled"], ["failed"]), report()

        # A permission the agent withdraws on its own ($/cancel_request): our dialog is closed
        # and the request answered with the `cancelled` outcome (a result, not -32800); the
        # turn goes on to its end.
        mark = wire.mark()
        turn = session.prompt("/permission-withdraw 300")
        await dialog.next()
        assert await texts_of(turn) == ["permission withdrawn"], report()
        assert (await turn).stop_reason == "end_turn", report()
        assert dialog.cancelled[-1] == "$/cancel_request", report()
        [request] = wire.received("session/request_permission", mark)
        assert [m["params"]["requestId"] for m in wire.received("$/cancel_request", mark)] == [request["id"]]
        assert [a.get("result") for a in wire.answers("out", request["id"])] == [CANCELLED_OUTCOME], report()

        # session/close with a turn running: the agent's idle "cancelled" (sent before its
        # answer) ends the turn; the session is gone.
        mark = wire.mark()
        turn = session.prompt("/sleep 30000")
        await first_chunk(turn)
        await session.close()
        result = await turn
        assert (result.stop_reason, result.resolution) == ("cancelled", Resolution.CANCELLED), report()
        [close] = wire.sent("session/close", mark)
        idle_at = wire.index(
            lambda d, m: d == "in" and "idle" in str(m.get("params", {}).get("update")), mark
        )
        [closed_at] = [
            i
            for i, (d, m) in enumerate(wire.messages)
            if d == "in" and m.get("id") == close["id"] and "method" not in m
        ]
        assert idle_at < closed_at, report()
        assert wire.messages[closed_at][1]["result"] == {}, report()
        assert session.id not in agent.sessions

        # The permission answered at the cancel was answered once, whatever came after.
        assert [a.get("result") for a in wire.answers("out", answered_at_cancel)] == [CANCELLED_OUTCOME], (
            report()
        )

    assert_conforms_v2(
        v2_schema,
        wire.messages,
        "client",
        expect=(
            "request initialize",
            "request session/new",
            "request session/prompt",
            "request session/close",
            "notification session/cancel",
            "notification $/cancel_request",
            "result session/request_permission",
        ),
    )


@pytest.mark.both_loops
@pytest.mark.parametrize(("kind", "protocol"), [("python", 2), ("typescript", "auto")])
async def test_our_ladder_ends_an_sdk_agent_that_ignores_the_cancel(
    interop_peers: PeerInstaller, kind: str, protocol: Any, tmp_path: Path
) -> None:
    """The agent scripts' ``/permission-oblivious`` and ``/oblivious``: an application that does
    nothing about ``session/cancel`` (test_v2_sdk_peers shows neither SDK steps in: no idle
    ``cancelled``, the permission left open, no deadline). Our host answers the pending permission
    ``cancelled`` at the cancel, so that turn ends (``end_turn``: the cancel reported ignored); a
    turn that never ends is ended by our ladder (SIGTERM of the agent's group at 3/4 of the budget),
    and no agent process is left -- with our host on asyncio's loop and on uvloop."""
    sdk = v2_sdk_or_skip(interop_peers, kind)
    wire, dialog = Wire(), Dialog()
    budget = 2.0
    agent = await launch(
        sdk.script("agent"),
        env={**os.environ, **sdk.env},
        protocol=protocol,
        tracer=wire.trace,
        services=ClientServices(permission=dialog),
        ladder=LadderPolicy(budget=budget),
    )
    report = wire.dump
    async with asyncio.timeout(60), agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission-oblivious")
        await dialog.next()
        outcome = await turn.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.stop_reason, outcome.steps) == (
            Resolution.COMPLETED,
            "ignored",
            "end_turn",
            ("session_cancel",),
        ), report()
        assert await texts_of(turn) == ["permission outcome: cancelled"], report()

        turn = session.prompt("/oblivious 60000")
        await first_chunk(turn)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.KILLED, report()
        assert outcome.steps == ("session_cancel", "cancel_request", "terminate"), report()
        result = await turn
        assert result.resolution is Resolution.KILLED, report()
        assert result.error is not None, report()
        assert agent.returncode is not None, report()
    assert not processes_running(agent_marker(sdk)), "an agent process outlived the ladder"


async def test_a_v1_only_agent_through_auto(tmp_path: Path) -> None:
    """Our reference agent restricted to v1 (``--protocol 1``): ``protocol="auto"`` asks for 2
    with v1's field names too, the agent answers 1 (its v1 fields), and our host speaks v1 on the
    same connection: a turn, a cancel at the first rung (the prompt's answer, ``cancelled``)."""
    wire = Wire()
    agent = await launch(
        [sys.executable, "-m", "acp_driver", "agent", "--protocol", "1"], protocol="auto", tracer=wire.trace
    )
    async with asyncio.timeout(60), agent:
        assert agent.protocol_version == 1, wire.dump()
        [init] = wire.sent("initialize")
        assert init["params"]["protocolVersion"] == 2, wire.dump()
        assert agent.info["name"] == "acp-driver-reference-agent", wire.dump()
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 3 0")
        assert await texts_of(turn) == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"], wire.dump()
        assert (await turn).stop_reason == "end_turn", wire.dump()
        turn = session.prompt("/sleep 30000")
        outcome = await turn.cancel()
        assert (outcome.resolution, outcome.steps) == (Resolution.CANCELLED, ("session_cancel",)), wire.dump()
        [answer] = wire.answers("in", turn.request_id)
        assert answer["result"] == {"stopReason": "cancelled"}, wire.dump()
