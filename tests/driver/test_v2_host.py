"""ACP v2 on the host side, against real agent processes: negotiation, turns as spans of work,
held prompts, and every cancel guarantee v1 gives (the ladder included, on fake time).

The agent is the bundled reference agent (it speaks both versions; ``--protocol`` restricts it,
``--behavior`` makes it misbehave) or a small script where a peer must do something odd.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import AcpError
from acp_driver.driver import (
    AgentStartError,
    ClientServices,
    LadderPolicy,
    PermissionRequest,
    Resolution,
    Rung,
    Topic,
    allow_all,
)
from acp_driver.driver._updates import UPDATE_TYPES, UnknownUpdate, make_update
from acp_driver.services import LocalFileSystem, LocalTerminals

from ..fakeclock import FakeClock
from ..waiting import eventually
from ..wire import Wire, first_update
from ._helpers import close_and_check, reference, running, script

T0 = 1000.0


def v2(behavior: str = "polite") -> list[str]:
    return reference(behavior)


async def test_auto_speaks_v2_with_a_v2_agent_and_v1_with_a_v1_agent(tmp_path: Path) -> None:
    async with running(v2(), protocol="auto") as agent:
        assert agent.protocol_version == 2
        assert agent.info["name"] == "acp-driver-reference-agent"
        assert agent.supports("resume")
        assert agent.supports("close")
        session = await agent.new_session(tmp_path)
        result = await session.prompt("hello")
        assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED)
        await close_and_check(agent)
    async with running([*reference("polite"), "--protocol", "1"], protocol="auto") as agent:
        assert agent.protocol_version == 1  # the fallback, on the same connection
        session = await agent.new_session(tmp_path)
        assert (await session.prompt("hello")).stop_reason == "end_turn"
        await close_and_check(agent)


async def test_insisting_on_a_version_the_agent_does_not_speak_fails_the_start() -> None:
    with pytest.raises(AgentStartError, match="speaks ACP protocol version 1; acp-driver asked for 2"):
        async with running([*reference("polite"), "--protocol", "1"], protocol=2):
            pass


async def test_an_agent_refusing_the_version_with_its_list_is_asked_again(tmp_path: Path) -> None:
    # -32022 with data.supported: the v2 schema's refusal; auto asks again with the best of them.
    async with running(script("refuses_v2"), protocol="auto") as agent:
        assert agent.protocol_version == 1
        session = await agent.new_session(tmp_path)
        assert (await session.prompt("hi")).stop_reason == "end_turn"


async def test_held_prompts_are_turns_of_their_own_in_order(tmp_path: Path) -> None:
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        first = session.prompt("/stream 3 30")
        second = session.prompt("two")
        third = session.prompt("three")
        texts = []
        for turn in (first, second, third):
            result = await turn
            assert result.stop_reason == "end_turn"
            texts.append("".join(getattr(u, "text", "") for u in turn.unread if u.topic is Topic.AGENT_TEXT))
        assert texts == ["chunk 1/3\nchunk 2/3\nchunk 3/3\n", "two\n", "three\n"]
        assert len({t.message_id for t in (first, second, third)}) == 3
        assert session.turns == []
        await close_and_check(agent)


@pytest.mark.parametrize(
    ("behavior", "resolution", "resolved_by", "stop_reason"),
    [
        ("polite", Resolution.CANCELLED, "session_cancel", "cancelled"),
        ("end-turn-on-cancel", Resolution.COMPLETED, "ignored", "end_turn"),
        ("idle-without-reason", Resolution.COMPLETED, "unreported", None),
    ],
)
async def test_a_cancel_resolves_on_the_next_idle_and_says_what_it_reported(
    tmp_path: Path, behavior: str, resolution: Resolution, resolved_by: str, stop_reason: str | None
) -> None:
    async with running(v2(behavior), protocol=2, ladder=LadderPolicy(budget=6.0)) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 1000 20")
        await first_update(turn)
        outcome = await turn.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.stop_reason) == (
            resolution,
            resolved_by,
            stop_reason,
        )
        assert outcome.steps == ("session_cancel",)
        await close_and_check(agent)


async def test_a_turn_ended_by_the_hosts_close_was_cancelled_by_the_host(tmp_path: Path) -> None:
    """``session.close()`` cancels the work (v2: idle ``cancelled`` before the close's answer,
    held prompts ``-32800``): the host asked for that, so the results say ``host``, not ``agent``."""
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 100000 20")
        held = session.prompt("held")
        await first_update(turn)
        await session.close()
        for ended in (await turn, await held):
            assert (ended.resolution, ended.stop_reason) == (Resolution.CANCELLED, "cancelled"), ended
            assert ended.cancelled_by == "host", ended
        other = await agent.new_session(tmp_path)
        assert (await other.prompt("hello")).cancelled_by is None  # a turn of another session
        await close_and_check(agent)


async def test_an_agent_that_never_idles_is_ended_by_the_ladder_on_fake_time(tmp_path: Path) -> None:
    clock, wire = FakeClock(T0), Wire()
    budget = 8.0
    async with running(
        v2("never-idle"), protocol=2, clock=clock, tracer=wire.trace, ladder=LadderPolicy(budget=budget)
    ) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 100000 20")
        await first_update(turn)
        held = session.prompt("held behind it")
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the ladder")
        assert turn.ladder is not None
        assert wire.methods()[-1] == "session/cancel"
        # The agent answers the held prompt -32800 (session/cancel cancels it) but sends no idle.
        held_result = await held
        assert held_result.resolution is Resolution.CANCELLED
        clock.advance_to(T0 + budget * 0.5)
        assert turn.ladder.taken[-1] == (T0 + budget * 0.5, Rung.CANCEL_REQUEST)
        clock.advance_to(T0 + budget * 0.75)  # SIGTERM: the reference agent dies of it
        outcome = await canceller
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "terminate"
        assert outcome.elapsed == budget * 0.75
        await close_and_check(agent)


async def test_cancelling_a_held_prompt_withdraws_it_and_touches_nothing_else(tmp_path: Path) -> None:
    wire = Wire()
    async with running(v2(), protocol=2, tracer=wire.trace) as agent:
        session = await agent.new_session(tmp_path)
        running_turn = session.prompt("/stream 20 20")
        await first_update(running_turn)
        held = session.prompt("held")
        outcome = await held.cancel()
        assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
            Resolution.CANCELLED,
            "withdrawn",
            ("withdraw",),
        )
        # The agent's -32800 confirms the host's withdrawal: the host cancelled it, and the
        # cancel's time counts from cancel(), not from the prompt.
        result = await held
        assert (result.cancelled_by, result.cancel) == ("host", outcome)
        assert outcome.elapsed <= result.elapsed
        assert "session/cancel" not in wire.methods()
        assert [m["params"]["requestId"] for m in wire.out if m.get("method") == "$/cancel_request"] == [
            held.request_id
        ]
        assert (await running_turn).stop_reason == "end_turn"  # untouched
        await close_and_check(agent)


async def test_a_held_prompt_the_agent_will_not_withdraw_is_cancelled_once_inserted(tmp_path: Path) -> None:
    """An agent that ignores ``$/cancel_request`` on a held prompt (claude-agent-acp 0.101.0
    does) inserts it when the running work ends: the host's cancel still lands -- the prompt
    cancelled as it starts -- and a prompt held behind it, which that ``session/cancel`` also
    refuses, is sent again and runs as its own turn."""
    wire = Wire()
    async with running(v2("no-answer-on-cancel-request"), protocol=2, tracer=wire.trace) as agent:
        session = await agent.new_session(tmp_path)
        first = session.prompt("/stream 3 100")
        await first_update(first)
        withdrawn = session.prompt("/stream 1000 20")
        behind = session.prompt("behind it")
        outcome = await withdrawn.cancel()
        assert (await first).stop_reason == "end_turn", wire.dump()
        assert (outcome.resolution, withdrawn.stop_reason) == (Resolution.CANCELLED, "cancelled"), wire.dump()
        assert outcome.steps[:2] == ("withdraw", "session_cancel"), wire.dump()
        assert withdrawn.result is not None
        assert withdrawn.result.cancelled_by == "host"
        assert withdrawn.request_id in [
            m["params"]["requestId"] for m in wire.out if m.get("method") == "$/cancel_request"
        ]
        behind_texts = [u.raw["content"]["text"] async for u in behind if u.kind == "agent_message_chunk"]
        result = await behind
        assert (result.stop_reason, result.cancel) == ("end_turn", None), wire.dump()
        assert "".join(behind_texts) == "behind it\n", wire.dump()  # the reference agent echoes it
        await close_and_check(agent)


async def test_a_cancel_never_touches_a_prompt_sent_after_it(tmp_path: Path) -> None:
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 1000 20")
        await first_update(turn)
        cancelling = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "session/cancel to go out")
        after = session.prompt("after the cancel")
        assert (await cancelling).resolution is Resolution.CANCELLED
        result = await after
        assert (result.stop_reason, result.cancel) == ("end_turn", None)
        await close_and_check(agent)


async def test_a_pending_permission_is_answered_cancelled_at_the_cancel(tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def never_decides(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    wire = Wire()
    async with running(
        v2(), protocol=2, tracer=wire.trace, services=ClientServices(permission=never_decides)
    ) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        await asyncio.wait_for(asked.wait(), 30)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        answers = [i for i, m in enumerate(wire.out) if "result" in m and "outcome" in m["result"]]
        assert [wire.out[i]["result"] for i in answers] == [{"outcome": {"outcome": "cancelled"}}]
        # session/cancel first: an agent reading in order knows the answer is the cancel's, not
        # a user's refusal (v2: a `cancelled` outcome alone may be a dismissal).
        [cancel_at] = [i for i, m in enumerate(wire.out) if m.get("method") == "session/cancel"]
        assert cancel_at < answers[0], wire.dump()
        await close_and_check(agent)


async def test_a_question_the_agent_withdraws_is_answered_with_the_cancelled_outcome(tmp_path: Path) -> None:
    async def never_decides(request: PermissionRequest) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    wire = Wire()
    async with running(
        v2(), protocol=2, tracer=wire.trace, services=ClientServices(permission=never_decides)
    ) as agent:
        session = await agent.new_session(tmp_path)
        result = await session.prompt("/permission 100")
        assert result.stop_reason == "end_turn"  # the agent gave up on its question, not the turn
        # v2 (RequestPermissionOutcome): a withdrawn question is answered with the cancelled
        # outcome, a result -- not -32800.
        answers = [m for m in wire.out if "id" in m and "method" not in m and ("result" in m or "error" in m)]
        answers = [a for a in answers if a.get("result", {}).get("outcome") or a.get("error")]
        assert [a.get("result") for a in answers] == [{"outcome": {"outcome": "cancelled"}}]
        await close_and_check(agent)


async def test_a_tool_call_advertising_cancel_is_cancelled_alone(tmp_path: Path) -> None:
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/tool long-job 1000")
        await eventually(
            lambda: any(s.status == "in_progress" for s in turn.tool_calls.values()), "the tool to run"
        )
        (tool_id,) = turn.tool_calls
        assert session.cancellable[tool_id]
        await session.cancel_tool_call(tool_id)
        result = await turn
        assert result.stop_reason == "end_turn"  # only the tool call was cancelled, not the turn
        assert turn.tool_calls[tool_id].status == "cancelled"
        with pytest.raises(AcpError, match="does not advertise cancel"):
            await session.cancel_tool_call("call_nope")
        await close_and_check(agent)


async def test_background_updates_after_the_idle_are_the_sessions(tmp_path: Path) -> None:
    async with running(v2(), protocol=2, services=ClientServices(permission=allow_all)) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/background 3 20")
        result = await turn
        assert result.stop_reason == "end_turn"
        await eventually(
            lambda: any(u.raw.get("status") == "completed" for u in session.background_updates),
            "the background job to finish",
        )
        assert session.late_updates == 0
        assert turn.late_updates == []
        await close_and_check(agent)


async def test_a_resume_snapshot_is_not_a_completion(tmp_path: Path) -> None:
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 50 20")
        await first_update(turn)
        # A resume on the same connection while the work runs: its snapshot says "running".
        await agent.resume_session(session.id, tmp_path)
        assert not turn.done
        assert (await turn).stop_reason == "end_turn"
        await close_and_check(agent)


async def test_an_agent_gone_mid_span_resolves_the_turn(tmp_path: Path) -> None:
    async with running(v2(), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 1000 20")
        await first_update(turn)
        agent.process.kill()  # not the host's doing: the agent exited, as far as it knows
        result = await asyncio.wait_for(turn.wait(), 30)
        assert result.resolution is Resolution.AGENT_EXITED
        await close_and_check(agent)


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("process supervision tests are Linux-only")


async def test_auto_speaks_v1_with_an_agent_that_echoes_2_in_v1s_shape(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Many v1 agents echo the client's ``protocolVersion``: the answer's shape decides (one
    warning says so), and the turn completes the v1 way with every chunk in it."""
    wire = Wire()
    services = ClientServices(permission=allow_all, fs=LocalFileSystem(), terminals=LocalTerminals())
    async with running(
        script("echoes_version"), protocol="auto", tracer=wire.trace, services=services
    ) as agent:
        # Asked under auto, a v1 agent still gets v1's client capabilities (fs, terminal).
        (asked,) = wire.sent("initialize")
        assert asked["params"]["clientCapabilities"] == {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        }
        assert agent.protocol_version == 1
        assert agent.negotiation_note == "agent claims v2 but answers v1: speaking v1"
        assert "agent claims v2 but answers v1: speaking v1" in caplog.text
        session = await agent.new_session(tmp_path)
        turn = session.prompt("hi")
        texts = [getattr(u, "text", "") async for u in turn]
        result = await turn
        assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED)
        assert texts == ["chunk 1\n", "chunk 2\n", "chunk 3\n"]


async def test_insisting_on_2_with_an_agent_that_echoes_it_in_v1s_shape_fails_the_start() -> None:
    with pytest.raises(AgentStartError, match="answered the v1 way"):
        async with running(script("echoes_version"), protocol=2):
            pass


@pytest.mark.parametrize("behavior", ["ignore-cancel", "hang"])
async def test_a_held_prompt_whose_withdrawal_is_never_confirmed_resolves_at_the_budget(
    tmp_path: Path, behavior: str
) -> None:
    """The agent ignores ``$/cancel_request`` and its current span runs on: the held turn is
    resolved by the host at the budget (on the fake clock: exactly then), says so, and touched
    nothing else -- no session/cancel, no signal."""
    clock, wire = FakeClock(T0), Wire()
    budget = 2.0
    async with running(
        v2(behavior), protocol=2, clock=clock, tracer=wire.trace, ladder=LadderPolicy(budget=budget)
    ) as agent:
        session = await agent.new_session(tmp_path)
        work = session.prompt("/stream 100000 20")
        await first_update(work)
        held = session.prompt("held behind it")
        await eventually(lambda: held.request_id is not None, "the held prompt to go out")
        canceller = asyncio.create_task(held.cancel())
        await eventually(lambda: held.ladder is not None, "the withdrawal")
        assert wire.sent("$/cancel_request")[-1]["params"]["requestId"] == held.request_id
        assert clock.next_deadline == T0 + budget  # (request timeouts come later)
        clock.advance_to(T0 + budget - 0.001)
        assert not held.done
        clock.advance_to(T0 + budget)
        outcome = await canceller
        assert (outcome.resolution, outcome.resolved_by, outcome.steps) == (
            Resolution.CANCELLED,
            "unconfirmed",
            ("withdraw",),
        )
        assert outcome.elapsed == budget
        result = await held
        assert (result.cancelled_by, result.cancel) == ("host", outcome)
        assert "session/cancel" not in wire.methods()
        assert not work.done  # the running work was not touched
        assert agent.returncode is None


async def test_a_prompt_nothing_runs_ahead_of_and_the_agent_never_answers_climbs_the_ladder(
    tmp_path: Path,
) -> None:
    """A wedged agent (the prompt never answered, no user_message, nothing running): its cancel
    is the full ladder -- session/cancel, $/cancel_request for the prompt, SIGTERM, SIGKILL --
    within the budget, as in v1."""
    clock, wire = FakeClock(T0), Wire()
    budget = 2.0
    async with running(
        script("swallows_prompts_v2"),
        protocol=2,
        clock=clock,
        tracer=wire.trace,
        ladder=LadderPolicy(budget=budget),
    ) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("anything")
        await eventually(lambda: turn.request_id is not None, "the prompt to go out")
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the ladder")
        assert wire.methods()[-1] == "session/cancel"
        clock.advance_to(T0 + budget * 0.5)
        await eventually(lambda: "$/cancel_request" in wire.methods(), "the middle rung")
        assert wire.sent("$/cancel_request")[-1]["params"]["requestId"] == turn.request_id
        clock.advance_to(T0 + budget * 0.75)  # SIGTERM: this agent ignores it
        clock.advance_to(T0 + budget)  # SIGKILL
        outcome = await canceller
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "kill"
        assert outcome.elapsed == budget


async def test_an_answer_and_the_lines_that_came_with_it_are_handled_in_wire_order(tmp_path: Path) -> None:
    """The answer ``{messageId}``, the span's chunks and its idle in one read, no user_message:
    the answer inserts the prompt before the chunks are routed, so they are the turn's and the
    idle ends it -- twice, so that the second turn is no accident of the first."""
    async with running(script("answer_with_its_lines_v2"), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        for _ in range(2):
            turn = session.prompt("hi")
            async with asyncio.timeout(10):
                texts = [u.raw["content"]["text"] async for u in turn if u.kind == "agent_message_chunk"]
                result = await turn
            assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED)
            assert texts == ["one ", "two"]
        assert list(session.background_updates) == []


@pytest.mark.parametrize("answer", ["null", "5", '"x"', '{"messageId": 7}', '{"messageId": ["u1"]}', "[]"])
async def test_a_malformed_prompt_answer_is_a_clear_protocol_error(
    tmp_path: Path, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSWER_JSON", answer)
    async with running(script("answer_with_its_lines_v2"), protocol=2) as agent:
        session = await agent.new_session(tmp_path)
        async with asyncio.timeout(10):
            result = await session.prompt("hi")
        assert result.resolution is Resolution.ERROR
        assert result.error is not None
        assert "answered without a messageId" in str(result.error)


async def test_an_agent_that_answers_a_v2_prompt_the_v1_way_is_spoken_to_in_v1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing in its ``initialize`` answer says v1 (it echoes 2, with no capabilities or info):
    the first prompt answered with a stop reason and no messageId does. The turn ends with that
    stop reason and every chunk it streamed; the next turn is v1's."""
    monkeypatch.setenv("ECHO_SHAPELESS", "1")
    async with running(script("echoes_version"), protocol="auto") as agent:
        assert agent.protocol_version == 2
        session = await agent.new_session(tmp_path)
        for _ in range(2):
            turn = session.prompt("hi")
            async with asyncio.timeout(10):
                result = await turn
            texts = [u.raw["content"]["text"] for u in turn.unread if u.kind == "agent_message_chunk"]
            assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED)
            assert texts == ["chunk 1\n", "chunk 2\n", "chunk 3\n"]
            assert agent.protocol_version == 1
        assert agent.negotiation_note == "agent answered a v2 prompt the v1 way: speaking v1"


@pytest.mark.parametrize(("version", "said"), [(2, '"outcome": "cancelled"'), (1, '"code": -32800')])
async def test_a_question_withdrawn_before_the_policy_ran_is_answered_by_the_versions_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, said: str
) -> None:
    """v2: a permission request the agent withdraws is answered with the ``cancelled`` outcome,
    also when the withdrawal is read before the host's policy ever ran; v1: ``-32800``."""
    monkeypatch.setenv("QUESTION_PROTOCOL", str(version))
    asked: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> str:
        asked.append(request)
        return "allow"

    services = ClientServices(permission=policy)
    async with running(script("withdraws_question"), protocol=version, services=services) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("ask")
        async with asyncio.timeout(10):
            texts = [u.raw["content"]["text"] async for u in turn if u.kind == "agent_message_chunk"]
            result = await turn
        assert result.stop_reason == "end_turn"
        (text,) = texts
        assert said in text
        assert asked == []  # the policy never ran


async def test_a_host_matching_topics_sees_the_same_turn_in_both_versions(tmp_path: Path) -> None:
    """Host code written against ``update.topic`` (not the wire kinds, which v2 renamed: ``plan``
    -> ``plan_update``, ``tool_call`` -> ``tool_call_update``...) reads the same turn from a v1
    and a v2 agent: the same text, the same thought, the same plan entries, the same tool call."""
    seen: dict[int, list[tuple[Topic, Any]]] = {}
    for version in (1, 2):
        async with running(reference("polite"), protocol=version) as agent:
            session = await agent.new_session(tmp_path)
            turn = session.prompt("/think hmm\n/plan\n/tool grep 1\nhello")
            got: list[tuple[Topic, Any]] = []
            async for update in turn:
                if update.topic in (Topic.AGENT_TEXT, Topic.THOUGHT):
                    got.append((update.topic, getattr(update, "text", None)))
                elif update.topic is Topic.PLAN:
                    got.append((Topic.PLAN, [e.get("status") for e in getattr(update, "entries", [])]))
                elif update.topic is Topic.TOOL_CALL:
                    got.append((Topic.TOOL_CALL, getattr(update, "status", None)))
            assert (await turn).stop_reason == "end_turn"
            seen[version] = got
    assert seen[1] == seen[2]
    assert (Topic.AGENT_TEXT, "hello\n") in seen[1]
    assert any(topic is Topic.PLAN for topic, _ in seen[1])
    assert any(topic is Topic.TOOL_CALL for topic, _ in seen[1])


def test_every_update_kind_has_a_topic() -> None:
    for kind, cls in UPDATE_TYPES.items():
        assert cls.topic is not Topic.UNKNOWN, kind


def test_every_view_is_made_whole_by_make_update() -> None:
    """``make_update`` sets a view's two slots itself (no class call): a view class adds no state
    and no ``__init__``, and the view it makes equals the one its constructor makes."""
    for kind, cls in [*UPDATE_TYPES.items(), ("_custom", UnknownUpdate)]:
        assert "__init__" not in vars(cls), kind
        assert vars(cls).get("__slots__", ()) == (), kind
        raw = {"sessionUpdate": kind}
        made = make_update("s", raw)
        assert type(made) is cls, kind
        assert made == cls("s", raw), kind


QUIRKY_V2 = [sys.executable, str(Path(__file__).parent.parent / "cli" / "quirky_v2_agent.py")]


async def test_a_question_about_a_tool_call_never_reported_is_the_working_turns(tmp_path: Path) -> None:
    """The agent asks about a tool call it never reported in an update: the question is the work
    of the turn working now, so that turn's cancel answers it ``cancelled`` (the agent here
    waits for that answer before it ends its work)."""
    wire = Wire()
    asked = asyncio.Event()

    async def never(request: PermissionRequest) -> str:
        asked.set()
        await asyncio.Event().wait()
        return "allow"

    argv = [*QUIRKY_V2, "--unreported-tool-call", "--permission-waits"]
    services = ClientServices(permission=never)
    async with running(argv, protocol=2, tracer=wire.trace, services=services) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("permission please")
        async with asyncio.timeout(15):
            await asked.wait()
            await turn.cancel()  # the agent may end it cancelled or end_turn: it got its answer
        (question,) = wire.received("session/request_permission")
        (answer,) = wire.answers("out", question["id"])
        assert answer["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_the_middle_rung_withdraws_only_the_prompts_held_at_the_cancel(tmp_path: Path) -> None:
    """An agent that ignores the cancel keeps working and keeps the prompts held: at half the
    budget the middle rung withdraws the one held when the cancel went out, never the one sent
    after it."""
    clock, wire = FakeClock(T0), Wire()
    budget = 8.0
    async with running(
        v2("ignore-cancel"), protocol=2, clock=clock, tracer=wire.trace, ladder=LadderPolicy(budget=budget)
    ) as agent:
        session = await agent.new_session(tmp_path)
        work = session.prompt("/stream 100000 20")
        await first_update(work)
        before = session.prompt("held before the cancel")
        await eventually(lambda: before.request_id is not None, "the held prompt to go out")
        canceller = asyncio.create_task(work.cancel())
        await eventually(lambda: work.ladder is not None, "the cancel")
        after = session.prompt("sent after the cancel")
        await eventually(lambda: after.request_id is not None, "the later prompt to go out")
        clock.advance_to(T0 + budget * 0.5)
        await eventually(lambda: bool(wire.sent("$/cancel_request")), "the middle rung")
        withdrawn = [m["params"]["requestId"] for m in wire.sent("$/cancel_request")]
        assert before.request_id in withdrawn
        assert after.request_id not in withdrawn
        clock.advance_to(T0 + budget)
        outcome = await canceller
        assert outcome.resolved_by in ("terminate", "kill")


async def test_the_turns_that_follow_a_v2_cancel_do_not_act_on_the_agent_twice(tmp_path: Path) -> None:
    """A running turn's cancel is the session's: the held prompts sent before it follow its
    ladder without sending their own session/cancel (one per rung, not one per turn)."""
    clock, wire = FakeClock(T0), Wire()
    budget = 8.0
    async with running(
        v2("ignore-cancel"), protocol=2, clock=clock, tracer=wire.trace, ladder=LadderPolicy(budget=budget)
    ) as agent:
        session = await agent.new_session(tmp_path)
        work = session.prompt("/stream 100000 20")
        await first_update(work)
        held = [session.prompt(f"held {i}") for i in range(3)]
        await eventually(lambda: all(t.request_id is not None for t in held), "the held prompts")
        canceller = asyncio.create_task(work.cancel())
        await eventually(lambda: work.ladder is not None, "the cancel")
        assert all(t.cancel_requested for t in held)  # they follow it
        assert len(wire.sent("session/cancel")) == 1
        clock.advance_to(T0 + budget * 0.5)
        await eventually(lambda: bool(wire.sent("$/cancel_request")), "the middle rung")
        ids = [m["params"]["requestId"] for m in wire.sent("$/cancel_request")]
        assert sorted(ids, key=str) == sorted((t.request_id for t in held), key=str)  # once each
        clock.advance_to(T0 + budget)
        await canceller
        assert len(wire.sent("session/cancel")) == 1
