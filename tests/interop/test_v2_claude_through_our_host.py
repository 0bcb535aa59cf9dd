"""claude-agent-acp 0.101.0 in ACP v2, offline (``fake_anthropic.py``), driven by OUR host
(``launch(protocol=...)``): what our results and our ladder say against a real v2 agent.

One agent process for most of it: the mode set to ``default`` (so a ``touch`` asks permission;
``session/set_config_option`` with v2's ``type``), a streamed turn, a cancel mid-stream and during
a tool's permission request (the tool never runs), a prompt held behind a running turn (its own
turn, in order); then a new process resumes the session with its history replayed
(``replayFrom: start``). Also: ``$/cancel_request`` on a held prompt, which this agent does not
honour -- it inserts the prompt anyway, and our host, waiting for the answer, cancels it then;
and the binary in ``v1`` mode through ``protocol="auto"`` falls back to v1 on the same
connection.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import ClientServices, LadderPolicy, Resolution, launch

from ..waiting import eventually
from ..wire import Wire
from .fake_anthropic import Endless, FakeAnthropic, ToolUse, Words
from .installs import NpmAgent
from .schema_check_v2 import V2Schema, assert_conforms_v2
from .test_v2_claude_agent import DROP, TOUCH, by_marker, claude_env, claude_processes
from .v2_host import Dialog, first_chunk, texts_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic()
    await fake.start()
    yield fake
    await fake.close()


def environment(tmp_path: Path, model: FakeAnthropic, mode: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(DROP)},
        **claude_env(tmp_path / "home", model, mode),
    }


async def test_claude_v2_through_our_host(
    claude_agent: NpmAgent, model: FakeAnthropic, v2_schema: V2Schema, tmp_path: Path
) -> None:
    model.decide = by_marker(
        {
            "FIVE": Words("a", 5),
            "FOREVER": Endless("b"),
            "TOUCH": ToolUse("Bash", TOUCH),
            "SLOW": Words("c", 20, interval=0.03),
            "HELD": Words("d", 2),
            "AGAIN": Words("e", 2),
        }
    )
    env = environment(tmp_path, model, "v2")
    wire, dialog = Wire(), Dialog()
    report = wire.dump
    options: dict[str, Any] = {
        "env": env,
        "cwd": tmp_path,
        "tracer": wire.trace,
        "services": ClientServices(permission=dialog),
        "ladder": LadderPolicy(budget=10.0),
    }
    async with asyncio.timeout(150):
        agent = await launch(list(claude_agent.argv), protocol=2, **options)
        async with agent:
            assert agent.protocol_version == 2, report()
            session = await agent.new_session(tmp_path)
            # A new session runs tools unasked ("auto"); "default" asks. v2 names the value's type.
            await session.set_mode("default")
            [config] = wire.sent("session/set_config_option")
            assert config["params"] == {
                "sessionId": session.id,
                "configId": "mode",
                "value": "default",
                "type": "id",
            }, report()

            # A streamed turn.
            turn = session.prompt("say FIVE words")
            assert (await texts_of(turn))[:5] == ["a0 ", "a1 ", "a2 ", "a3 ", "a4 "], report()
            assert (await turn).stop_reason == "end_turn", report()

            # A cancel mid-stream: the idle "cancelled" resolves the turn at the first rung.
            turn = session.prompt("talk FOREVER")
            await first_chunk(turn, 3)
            outcome = await turn.cancel()
            assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
                Resolution.CANCELLED,
                "session_cancel",
                ("session_cancel",),
            ), report()

            # A cancel during the tool's permission request: answered `cancelled` once (the
            # agent's own $/cancel_request for it, if any, comes after), the turn cancelled at
            # the first rung, the tool never ran.
            mark = wire.mark()
            turn = session.prompt("TOUCH a file")
            asked = await dialog.next()
            assert asked.title == TOUCH["command"], report()
            outcome = await turn.cancel()
            assert (outcome.resolution, outcome.resolved_by) == (Resolution.CANCELLED, "session_cancel"), (
                report()
            )
            [request] = wire.received("session/request_permission", mark)
            assert [a.get("result") for a in wire.answers("out", request["id"])] == [CANCELLED_OUTCOME]
            assert [t.status for t in turn.tool_calls.values()] == ["cancelled"], report()
            assert not (tmp_path / "made-by-agent.txt").exists()

            # A prompt held behind a running turn: its own turn, inserted at the first's end.
            first = session.prompt("SLOW words")
            await first_chunk(first, 2)
            held = session.prompt("HELD words")
            first_texts, held_texts = await asyncio.gather(texts_of(first), texts_of(held))
            assert (await first).stop_reason == "end_turn", report()
            assert (await held).stop_reason == "end_turn", report()
            assert "".join(first_texts).startswith("c2 c3"), report()
            assert held_texts == ["d0 ", "d1 "], report()
            assert first.message_id != held.message_id, report()
            session_id = session.id

        await eventually(lambda: not claude_processes(), "no claude process left")
        # A new process resumes the session with its history replayed: the replay and the
        # state snapshot are the session's (no turn ends); then a turn runs as usual.
        agent = await launch(list(claude_agent.argv), protocol="auto", **options)
        async with agent:
            assert agent.protocol_version == 2, report()
            session = await agent.resume_session(session_id, tmp_path, replay_from="start")
            kinds = [u.kind for u in session.session_updates]
            assert "user_message_chunk" in kinds or "user_message" in kinds, kinds
            assert "state_update" in kinds, kinds
            replayed = " ".join(str(u.raw) for u in session.session_updates)
            assert "say FIVE words" in replayed, replayed[:2000]
            turn = session.prompt("AGAIN two words")
            assert await texts_of(turn) == ["e0 ", "e1 "], report()
            assert (await turn).stop_reason == "end_turn", report()
    await eventually(lambda: not claude_processes(), "no claude process left")
    assert_conforms_v2(
        v2_schema,
        wire.messages,
        "client",
        expect=(
            "request session/set_config_option",
            "request session/resume",
            "notification session/cancel",
            "result session/request_permission",
        ),
    )


async def test_a_held_prompt_claude_will_not_withdraw_is_cancelled_once_inserted(
    claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path
) -> None:
    """``turn.cancel()`` of a held prompt against an agent that does not honour ``$/cancel_request``
    on it: the cancel must land -- the prompt withdrawn, or cancelled once inserted -- and the next
    held prompt's turn must be its own."""
    # HELD first: claude-agent-acp carries a cancelled prompt's text into the next request's
    # user message, so the request for HELD also says NEVER.
    model.decide = by_marker(
        {"SLOW": Words("c", 20, interval=0.03), "HELD": Words("d", 2), "NEVER": Words("never", 2)}
    )
    wire = Wire()
    agent = await launch(
        list(claude_agent.argv),
        env=environment(tmp_path, model, "v2"),
        cwd=tmp_path,
        protocol=2,
        tracer=wire.trace,
        ladder=LadderPolicy(budget=10.0),
    )
    async with asyncio.timeout(120), agent:
        session = await agent.new_session(tmp_path)
        first = session.prompt("SLOW words")
        await first_chunk(first, 2)
        withdrawn = session.prompt("NEVER one")
        held = session.prompt("HELD words")
        outcome = await withdrawn.cancel()
        assert (await first).stop_reason == "end_turn", wire.dump()
        held_texts = await texts_of(held)
        await held
        # The cancel landed: nothing of the withdrawn prompt ran to its end...
        ran = [r for r in model.conversation if "NEVER" in r.last_user_text()]
        assert outcome.resolution is Resolution.CANCELLED, wire.dump()
        assert not ran or withdrawn.stop_reason == "cancelled", wire.dump()
        # ...and the next held prompt's turn is its own.
        assert held_texts == ["d0 ", "d1 "], wire.dump()


async def test_claude_in_v1_mode_through_auto_falls_back_to_v1(
    claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path
) -> None:
    """Our host asks for 2 with v1's field names too; the binary in ``v1`` mode answers 1 on the
    same connection, and our host speaks v1: a streamed turn, a cancel at the first rung."""
    model.decide = by_marker({"FIVE": Words("a", 5), "FOREVER": Endless("b")})
    wire = Wire()
    async with asyncio.timeout(90):
        agent = await launch(
            list(claude_agent.argv),
            env=environment(tmp_path, model, "v1"),
            cwd=tmp_path,
            protocol="auto",
            tracer=wire.trace,
        )
        async with agent:
            assert agent.protocol_version == 1, wire.dump()
            assert len(wire.sent("initialize")) == 1, wire.dump()  # the same connection, one ask
            assert agent.info.get("version") == "0.101.0", agent.info
            session = await agent.new_session(tmp_path)
            turn = session.prompt("say FIVE words")
            assert (await texts_of(turn))[:5] == ["a0 ", "a1 ", "a2 ", "a3 ", "a4 "], wire.dump()
            assert (await turn).stop_reason == "end_turn", wire.dump()
            turn = session.prompt("talk FOREVER")
            await first_chunk(turn, 3)
            outcome = await turn.cancel()
            assert (outcome.resolution, outcome.steps) == (Resolution.CANCELLED, ("session_cancel",)), (
                wire.dump()
            )
    await eventually(lambda: not claude_processes(), "no claude process left")


async def test_claude_v2_turns_with_one_reused_message_id_each_show_their_text(
    claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path
) -> None:
    """claude-agent-acp copies the model's message id into its chunks' ``messageId``; behind a
    model server that gives every reply the same id, each v2 turn still shows its own text
    (an id seen in an ended turn does not make the working turn's chunks someone else's)."""
    model.decide = by_marker({"FIVE": Words("a", 5), "AGAIN": Words("e", 2)})
    model.fixed_message_id = "msg_fixed"
    env = environment(tmp_path, model, "v2")
    wire = Wire()
    async with asyncio.timeout(150):
        agent = await launch(list(claude_agent.argv), protocol=2, env=env, cwd=tmp_path, tracer=wire.trace)
        async with agent:
            session = await agent.new_session(tmp_path)
            first = session.prompt("say FIVE words")
            assert (await texts_of(first))[:5] == ["a0 ", "a1 ", "a2 ", "a3 ", "a4 "], wire.dump()
            assert (await first).stop_reason == "end_turn", wire.dump()
            second = session.prompt("say AGAIN")
            assert (await texts_of(second))[:2] == ["e0 ", "e1 "], wire.dump()
            assert (await second).stop_reason == "end_turn", wire.dump()
