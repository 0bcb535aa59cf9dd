"""The host driver against the bundled reference agent and each of its misbehaviours.

Every test spawns real agent processes (``python -m acp_driver agent --behavior NAME``), cancels
turns, and checks how the ladder resolved them and that no process of the agent's group is left.
Timings are only bounded from above (generously), except where the ladder must wait its budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver.aio import current_request
from acp_driver.core import AcpError
from acp_driver.driver import (
    AgentMessageChunk,
    ClientServices,
    LadderPolicy,
    PermissionPolicy,
    PermissionRequest,
    PromptTurn,
    RemoteAgent,
    Resolution,
    Rung,
)

from ..fakeclock import FakeClock
from ..waiting import eventually
from ._helpers import asked_or_ended, close_and_check, reference, running, take

BUDGET = 2.0
T0 = 1000.0
LADDER_AT = (("session_cancel", 0.0), ("cancel_request", 1.0), ("terminate", 1.5), ("kill", 2.0))
"""When each step is due after the cancel, for BUDGET."""
STREAM = "/stream 1000 20"  # 20 s of chunks: only a cancel ends it early


@dataclass(frozen=True)
class Expect:
    prompt: str
    resolution: Resolution
    resolved_by: str
    stop_reason: str | None
    steps: tuple[str, ...] | None = None
    """Exact steps (None: checked by the test's own rules)."""


EXPECTED = {
    "polite": Expect(STREAM, Resolution.CANCELLED, "session_cancel", "cancelled", ("session_cancel",)),
    # It ends the turn on its own terms after the cancel: the cancel did not take effect.
    "end-turn-on-cancel": Expect(STREAM, Resolution.COMPLETED, "ignored", "end_turn", ("session_cancel",)),
    "error-on-cancel": Expect(STREAM, Resolution.ERROR, "session_cancel", None, ("session_cancel",)),
    # It only ignores $/cancel_request: session/cancel alone stops it.
    "no-answer-on-cancel-request": Expect(
        STREAM, Resolution.CANCELLED, "session_cancel", "cancelled", ("session_cancel",)
    ),
    # Python's default SIGTERM handler ends it: the ladder stops at terminate.
    "ignore-cancel": Expect(
        "working\n/sleep 30000",
        Resolution.KILLED,
        "terminate",
        None,
        ("session_cancel", "cancel_request", "terminate"),
    ),
    # Ignores SIGTERM too: only SIGKILL ends it.
    "hang": Expect(
        "/sleep 30000",
        Resolution.KILLED,
        "kill",
        None,
        ("session_cancel", "cancel_request", "terminate", "kill"),
    ),
}


async def started(turn: PromptTurn) -> None:
    """Wait until the turn is under way: its first update arrived. The "hang" agent's turns
    (a bare ``/sleep``) send none: that wedged agent blocks on the prompt whenever it reads it,
    so its tests need not wait (the prompt is queued before anything else of the turn)."""
    if turn.prompt[0]["text"].startswith("/sleep"):
        assert turn.request_id is not None
        return
    got = await take(turn, 1)
    assert got, "the turn ended before its first update"


@pytest.mark.parametrize("behavior", list(EXPECTED))
async def test_cancel_each_behavior(behavior: str, tmp_path: Path) -> None:
    # The ladder runs on a fake clock: time moves only to the step the behaviour needs.
    expect = EXPECTED[behavior]
    clock = FakeClock(T0)
    async with asyncio.timeout(60):
        async with running(reference(behavior), ladder=LadderPolicy(budget=BUDGET), clock=clock) as agent:
            session = await agent.new_session(tmp_path)
            turn = session.prompt(expect.prompt)
            await started(turn)
            canceller = asyncio.create_task(turn.cancel())
            await eventually(lambda: turn.ladder is not None, "the ladder to start")
            last_step = expect.steps[-1] if expect.steps else expect.resolved_by
            if last_step != "session_cancel":
                assert not canceller.done()
                clock.advance_to(T0 + dict(LADDER_AT)[last_step])
            outcome = await canceller
            result = await turn

            assert outcome.scope == "current_turn"
            assert outcome.resolution is expect.resolution, (outcome, result)
            assert result.resolution is expect.resolution
            assert result.stop_reason == expect.stop_reason
            assert outcome.stop_reason == expect.stop_reason
            assert outcome.resolved_by == expect.resolved_by, outcome
            assert outcome.steps == expect.steps
            assert outcome.elapsed == dict(LADDER_AT)[last_step]  # fake time: exact
            expected_by = "host" if expect.resolution is Resolution.CANCELLED else None
            assert result.cancelled_by == expected_by
            assert result.cancel == outcome
            assert turn.ladder is not None
            assert turn.ladder.resolution is expect.resolution
            assert turn.cancel_requested
            assert session.current_turn is None
            assert session.last_turn is turn

            if behavior == "error-on-cancel":
                assert result.error is not None
                assert result.error.code == -32603
            elif behavior in ("polite", "end-turn-on-cancel", "no-answer-on-cancel-request"):
                assert result.error is None
            if expect.resolution is Resolution.KILLED:
                assert result.error is not None  # the connection ended under the prompt
                assert agent.returncode is not None  # the kill was seen
                assert agent.returncode == (-9 if behavior == "hang" else -15)
            await close_and_check(agent)


async def test_cancel_is_idempotent(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("polite"), ladder=LadderPolicy(budget=BUDGET)) as agent:
        session = await agent.new_session(tmp_path)

        turn = session.prompt(STREAM)
        await take(turn, 2)
        first, second = await asyncio.gather(turn.cancel(), turn.cancel())
        assert first == second
        assert first.resolution is Resolution.CANCELLED
        assert first.resolved_by == "session_cancel"
        assert first.steps == ("session_cancel",)  # one session/cancel, not two
        # Once more, after the fact: the same outcome again; the session's cancel sees no turn.
        assert await turn.cancel() == first
        idle = await session.cancel()
        assert idle.resolved_by == "idle"
        assert idle.resolution is None

        # A turn that finished on its own: cancelling it afterwards reports "finished".
        done = session.prompt("/stream 3 0")
        result = await done
        assert result.resolution is Resolution.COMPLETED
        late = await done.cancel()
        assert late.resolved_by == "finished"
        assert late.resolution is Resolution.COMPLETED
        assert late.stop_reason == "end_turn"
        assert late.steps == ()
        assert done.ladder is None  # nothing was sent
        done.kill()  # after the end: a no-op
        assert done.ladder is None
        assert await done.cancel() == late
        await close_and_check(agent)


@pytest.mark.parametrize("cancel_first", [True, False], ids=["cancel-then-kill", "kill-alone"])
async def test_kill_skips_to_sigkill(cancel_first: bool, tmp_path: Path) -> None:
    """``turn.kill()`` (a second Ctrl-C) does not wait for the rest of a long ladder."""
    budget = 30.0
    async with asyncio.timeout(60), running(reference("hang"), ladder=LadderPolicy(budget=budget)) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/sleep 30000")
        await started(turn)
        started_at = time.monotonic()
        if cancel_first:
            cancel = asyncio.ensure_future(turn.cancel())
            await eventually(lambda: turn.ladder is not None and bool(turn.ladder.taken), "the first step")
            assert not cancel.done()  # the hung agent ignores session/cancel
            turn.kill()
            outcome = await cancel
            assert outcome.steps == ("session_cancel", "kill")
        else:
            turn.kill()
            outcome = await turn.cancel()
            assert outcome.steps == ("kill",)
        result = await turn
        assert time.monotonic() - started_at < 10.0  # far below the 30 s budget
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "kill"
        assert result.resolution is Resolution.KILLED
        assert agent.returncode == -9
        await close_and_check(agent)


def texts(updates: list[Any]) -> list[str]:
    return [u.text for u in updates if isinstance(u, AgentMessageChunk)]


async def test_next_prompt_after_polite_cancel(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("polite"), ladder=LadderPolicy(budget=BUDGET)) as agent:
        session = await agent.new_session(tmp_path)
        idle = await session.cancel()
        assert idle == idle.__class__("current_turn", None, "idle", 0.0)

        first = session.prompt(STREAM)
        await take(first, 3)
        outcome = await first.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        rest = [u async for u in first]  # whatever came before the response
        assert all(t.startswith("chunk ") and t.endswith("/1000\n") for t in texts(rest))

        second = session.prompt("/stream 3 0")
        updates = [u async for u in second]
        result = await second
        assert result.resolution is Resolution.COMPLETED
        assert result.stop_reason == "end_turn"
        assert result.cancel is None
        assert texts(updates) == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"]
        assert session.late_updates == 0
        assert first.late_updates == []

        again = await session.cancel()  # idle again
        assert again.resolved_by == "idle"
        await close_and_check(agent)


async def test_session_scope_cancel(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("polite"), ladder=LadderPolicy(budget=BUDGET)) as agent:
        assert agent.supports("close")
        doomed = await agent.new_session(tmp_path)
        other = await agent.new_session(tmp_path)
        turn = doomed.prompt(STREAM)
        await take(turn, 1)

        outcome = await doomed.cancel("session")
        assert outcome.scope == "session"
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert outcome.stop_reason == "cancelled"
        assert outcome.steps == ("session_cancel", "close")
        assert (await turn).resolution is Resolution.CANCELLED
        assert doomed.closed
        assert doomed.id not in agent.sessions
        with pytest.raises(AcpError, match="closed"):
            doomed.prompt("hello")

        # The other session of the agent is untouched.
        result = await other.prompt("/stream 2 0")
        assert result.resolution is Resolution.COMPLETED
        idle = await other.cancel("session")
        assert idle.resolved_by == "idle"
        assert idle.steps == ("close",)
        assert other.closed
        with pytest.raises(ValueError, match="scope"):
            await doomed.cancel("agent")  # type: ignore[arg-type]
        await close_and_check(agent)


@pytest.mark.parametrize("behavior", ["polite", "hang"])
async def test_agent_scope_cancel(behavior: str, tmp_path: Path) -> None:
    prompt = STREAM if behavior == "polite" else "/sleep 30000"
    async with asyncio.timeout(60), running(reference(behavior), ladder=LadderPolicy(budget=1.5)) as agent:
        sessions = [await agent.new_session(tmp_path) for _ in range(2)]
        turns = [s.prompt(prompt) for s in sessions]
        for turn in turns:
            await started(turn)
        with pytest.raises(ValueError, match="scope"):
            await agent.cancel("session")  # type: ignore[arg-type]

        outcome = await agent.cancel("agent")
        assert outcome.scope == "agent"
        assert outcome.steps[-1] == "shutdown"
        results = [await t for t in turns]
        if behavior == "polite":
            assert outcome.resolution is Resolution.CANCELLED
            assert outcome.steps == ("session_cancel", "session_cancel", "shutdown")
            assert [r.resolution for r in results] == [Resolution.CANCELLED] * 2
            assert agent.returncode == 0  # it exited on its own once stdin closed
        else:
            # One SIGKILL of the group ends both turns: both count as killed.
            assert outcome.resolution is Resolution.KILLED
            assert "kill" in outcome.steps
            assert [r.resolution for r in results] == [Resolution.KILLED] * 2
            assert agent.returncode == -9
        assert agent.returncode is not None
        assert not agent.connection.is_open
        with pytest.raises(AcpError):
            sessions[0].prompt("more")
        await close_and_check(agent)


async def test_request_scope_cancel_for_unknown_request(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("polite")) as agent:
        outcome = await agent.cancel("request", request_id=424242)
        assert outcome.scope == "request"
        assert outcome.resolved_by == "finished"  # nothing of ours in flight with that id
        await close_and_check(agent)


async def test_many_sessions_on_one_agent(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("polite"), ladder=LadderPolicy(budget=BUDGET)) as agent:
        sessions = [await agent.new_session(tmp_path) for _ in range(6)]
        assert len({s.id for s in sessions}) == 6
        turns = [s.prompt("/stream 40 20") for s in sessions]
        await asyncio.gather(*(take(t, 1) for t in turns))
        victims = turns[::2]
        outcomes = await asyncio.gather(*(t.cancel() for t in victims))
        assert [o.resolution for o in outcomes] == [Resolution.CANCELLED] * 3
        survivors = turns[1::2]
        for turn in survivors:
            result = await turn
            assert result.resolution is Resolution.COMPLETED, result
            assert result.cancel is None
        for session in sessions:
            assert session.late_updates == 0
        await close_and_check(agent)


async def test_several_agents_at_once(tmp_path: Path) -> None:
    """3 agents x 2 sessions, six concurrent turns; cancelling one leaves the five others whole."""
    async with asyncio.timeout(60):
        agents: list[RemoteAgent] = []
        try:
            agents = list(
                await asyncio.gather(
                    *(
                        RemoteAgent.launch(reference("polite"), ladder=LadderPolicy(budget=BUDGET))
                        for _ in range(3)
                    )
                )
            )
            assert len({a.process.pgid for a in agents}) == 3
            sessions = [await a.new_session(tmp_path) for a in agents for _ in range(2)]
            turns = [s.prompt("/stream 40 20") for s in sessions]
            seen: dict[int, list[Any]] = {i: [] for i in range(len(turns))}

            async def consume(i: int) -> None:
                async for update in turns[i]:
                    seen[i].append(update)

            consumers = [asyncio.ensure_future(consume(i)) for i in range(len(turns))]
            await eventually(lambda: all(seen.values()), "every turn's first update")
            victim = turns[2]  # the second agent's first session
            outcome = await victim.cancel()
            assert outcome.resolution is Resolution.CANCELLED
            assert outcome.resolved_by == "session_cancel"
            await asyncio.gather(*consumers)

            for i, turn in enumerate(turns):
                result = await turn
                if turn is victim:
                    assert result.resolution is Resolution.CANCELLED
                    assert len(texts(seen[i])) < 40
                else:
                    assert result.resolution is Resolution.COMPLETED, (i, result)
                    assert texts(seen[i]) == [f"chunk {n}/40\n" for n in range(1, 41)]
            for agent in agents:
                assert agent.returncode is None  # nobody was signalled
                assert all(s.late_updates == 0 for s in agent.sessions.values())
        finally:
            await asyncio.gather(*(a.aclose() for a in agents), return_exceptions=True)
        for agent in agents:
            await close_and_check(agent)


@pytest.mark.parametrize("prompt", ["/title Refactor the parser", "/stream 2 0\n/title Refactor the parser"])
async def test_title_after_response_is_session_wide(prompt: str, tmp_path: Path) -> None:
    """A session_info_update sent right after the response (as real agents do) is accepted as
    the session's title and is not a late turn update."""
    async with asyncio.timeout(60), running(reference("polite")) as agent:
        session = await agent.new_session(tmp_path)
        result = await session.prompt(prompt)
        assert result.resolution is Resolution.COMPLETED
        await eventually(lambda: session.title == "Refactor the parser", "the title")
        assert session.late_updates == 0
        assert [u.kind for u in session.session_updates] == ["session_info_update"]
        # The next turn is not disturbed by it.
        second = session.prompt("/stream 2 0")
        updates = [u async for u in second]
        assert texts(updates) == ["chunk 1/2\n", "chunk 2/2\n"]
        assert session.late_updates == 0
        await close_and_check(agent)


@contextlib.asynccontextmanager
async def asking_the_polite_agent(
    permission: PermissionPolicy,
) -> AsyncIterator[tuple[RemoteAgent, list[tuple[str, dict[str, Any]]]]]:
    """The polite reference agent, our permission policy, and the wire as our driver saw it
    (bounded: 60 s)."""
    wire: list[tuple[str, dict[str, Any]]] = []
    async with (
        asyncio.timeout(60),
        running(
            reference("polite"),
            services=ClientServices(permission=permission),
            ladder=LadderPolicy(budget=BUDGET),
            tracer=lambda direction, message: wire.append((direction, orjson.loads(message))),
        ) as agent,
    ):
        yield agent, wire


async def test_cancel_answers_pending_permission(tmp_path: Path) -> None:
    """session/cancel answers a pending permission request ``cancelled`` at once: the host's
    dialog (the policy coroutine) is cancelled, the turn resolves politely."""
    asked = asyncio.Event()
    dialog_closed = asyncio.Event()

    async def never_decides(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            dialog_closed.set()
        raise AssertionError("unreachable")

    async with asking_the_polite_agent(never_decides) as (agent, wire):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        async with asyncio.timeout(15):
            await asked_or_ended(asked, turn)
        assert asked.is_set(), await turn
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert dialog_closed.is_set()
        # Spec MUST: the pending permission request was answered with the "cancelled" outcome.
        [asked_id] = [
            m["id"] for d, m in wire if d == "in" and m.get("method") == "session/request_permission"
        ]
        [answer] = [m for d, m in wire if d == "out" and m.get("id") == asked_id and "method" not in m]
        assert answer == {"jsonrpc": "2.0", "id": asked_id, "result": {"outcome": {"outcome": "cancelled"}}}
        [tool] = turn.tool_calls.values()
        assert tool.kind == "edit"
        assert tool.cancelled  # not finished when the turn was cancelled
        await close_and_check(agent)


async def test_a_policy_that_swallows_the_cancel_still_answers_cancelled(tmp_path: Path) -> None:
    """A permission dialog that catches the cancellation and says "allow" anyway: after
    session/cancel the agent must still get the ``cancelled`` outcome (spec MUST), never the
    late "allow"."""
    asked = asyncio.Event()

    async def stubborn_dialog(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return {"outcome": "selected", "optionId": request.options[0]["optionId"]}

    async with asking_the_polite_agent(stubborn_dialog) as (agent, wire):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        await asyncio.wait_for(asked.wait(), 15)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        [asked_id] = [
            m["id"] for d, m in wire if d == "in" and m.get("method") == "session/request_permission"
        ]
        [answer] = [m for d, m in wire if d == "out" and m.get("id") == asked_id and "method" not in m]
        assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
        cancel_at = next(
            i for i, (d, m) in enumerate(wire) if d == "out" and m.get("method") == "session/cancel"
        )
        answer_at = next(i for i, (d, m) in enumerate(wire) if d == "out" and m.get("id") == asked_id)
        assert answer_at < cancel_at  # answered before session/cancel went out
        await close_and_check(agent)


async def test_a_withdrawal_read_while_the_cancel_unwinds_still_gets_cancelled(tmp_path: Path) -> None:
    """The agent withdraws its permission request (``$/cancel_request``) in answer to
    ``session/cancel``, and the withdrawal is read before the host's dialog has unwound -- on
    uvloop a fast agent's often is (TypeScript SDK agent: 1 run in a loaded suite). The turn's
    cancel came first: the answer is the ``cancelled`` outcome (spec MUST), never ``-32800``.

    The window is one loop iteration wide; to hit it every time, the withdrawal is handed to the
    connection as if just read, right after ``cancel()`` has cancelled the dialog and before the
    dialog's task has run again."""
    asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def never_decides(request: PermissionRequest) -> dict[str, Any]:
        ctx = current_request()
        assert ctx is not None
        asked.set_result(ctx.id)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with asking_the_polite_agent(never_decides) as (agent, wire):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        asked_id = await asyncio.wait_for(asked, 15)
        cancelling = asyncio.ensure_future(turn.cancel())
        await asyncio.sleep(0)  # cancel() has run up to its wait: session/cancel sent, dialog cancelled
        assert turn.cancel_requested
        withdrawal = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": asked_id}}
        agent.connection.feed_messages([orjson.dumps(withdrawal)])
        outcome = await cancelling
        assert outcome.resolution is Resolution.CANCELLED
        [answer] = [m for d, m in wire if d == "out" and m.get("id") == asked_id and "method" not in m]
        assert answer == {"jsonrpc": "2.0", "id": asked_id, "result": {"outcome": {"outcome": "cancelled"}}}
        await close_and_check(agent)


async def test_ladder_steps_are_reported_as_taken(tmp_path: Path) -> None:
    async with (
        asyncio.timeout(60),
        running(reference("ignore-cancel"), ladder=LadderPolicy(budget=1.5)) as agent,
    ):
        seen: list[tuple[PromptTurn, Rung]] = []
        agent.on_ladder_step = lambda turn, rung: seen.append((turn, rung))
        session = await agent.new_session(tmp_path)
        turn = session.prompt("working\n/sleep 30000")
        await started(turn)
        outcome = await turn.cancel()
        assert [r for _, r in seen][:3] == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST, Rung.TERMINATE]
        assert all(t is turn for t, _ in seen)
        assert outcome.steps == tuple(r.value for _, r in seen)
        await close_and_check(agent)


async def test_sibling_turn_of_a_killed_agent_counts_as_killed(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(reference("hang"), ladder=LadderPolicy(budget=1.0)) as agent:
        cancelled = await agent.new_session(tmp_path)
        sibling = await agent.new_session(tmp_path)
        turn = cancelled.prompt("/sleep 30000")
        other = sibling.prompt("/sleep 30000")
        await started(turn)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.KILLED
        result = await other
        await close_and_check(agent)
        assert result.resolution is Resolution.KILLED, result


async def test_cancel_right_after_prompt_is_honoured(tmp_path: Path) -> None:
    """A user pressing Esc at once: prompt and session/cancel leave in one write."""
    async with asyncio.timeout(60), running(reference("polite"), ladder=LadderPolicy(budget=BUDGET)) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt(STREAM)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        await close_and_check(agent)
        assert outcome.steps == ("session_cancel",), outcome


async def test_failing_ladder_step_callback_does_not_stop_the_ladder(tmp_path: Path) -> None:
    async with (
        asyncio.timeout(60),
        running(reference("ignore-cancel"), ladder=LadderPolicy(budget=1.5)) as agent,
    ):

        def broken_display(turn: PromptTurn, rung: Rung) -> None:
            raise RuntimeError("progress display broke")

        agent.on_ladder_step = broken_display
        session = await agent.new_session(tmp_path)
        turn = session.prompt("working\n/sleep 30000")
        await started(turn)
        try:
            outcome = await turn.cancel()
        finally:
            await close_and_check(agent)
        assert outcome.resolution is Resolution.KILLED


async def test_unread_updates_show_without_being_read_and_read_as_the_views_listeners_saw(
    tmp_path: Path,
) -> None:
    async with asyncio.timeout(60), running(reference("polite")) as agent:
        session = await agent.new_session(str(tmp_path))
        heard: list[Any] = []
        session.listeners.append(heard.append)
        turn = session.prompt("/stream 5 0")
        result = await turn  # ended: its updates wait, unread
        assert result.stop_reason == "end_turn"
        unread = turn.unread
        assert len(unread) == 5
        assert all(type(u) is AgentMessageChunk for u in unread)
        assert turn.unread == unread  # showing them does not read them
        read = [update async for update in turn]
        assert read == unread == heard  # each read as the view its listener was given
        assert turn.unread == []
