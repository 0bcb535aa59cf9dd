"""The host driver against agents that break in the ways real agents do.

The agents are small scripts in ``tests/driver/agents`` speaking ACP by hand. Each test runs a
real process; each checks at the end that no process of the agent's group survives.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from pathlib import Path

import pytest

from acp_driver.core import ConnectionClosedError, RequestTimeoutError
from acp_driver.driver import (
    AgentExitedError,
    AgentMessageChunk,
    AgentStartError,
    LadderPolicy,
    PromptTurn,
    RemoteAgent,
    RemoteSession,
    Resolution,
    launch,
)

from ..waiting import eventually
from ._helpers import (
    assert_group_gone,
    close_and_check,
    pid_alive,
    read_pids,
    reference,
    running,
    script,
    take,
)

PROMPTLY = 10.0
"""Upper bound, in seconds, for "promptly" (generous: slow shared CI machines)."""


def env_with(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


# ---------------------------------------------------------------------- dying agents


async def test_agent_exits_mid_turn(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(script("exit_mid_turn"), name="exit-mid-turn") as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("work")
        updates = await take(turn, 2)
        assert [u.text for u in updates if isinstance(u, AgentMessageChunk)] == ["working 1", "working 2"]
        # A request of ours is pending when the agent dies (it reads it, then exits).
        pending = asyncio.ensure_future(agent.request("_test/never_answered", {}))
        started = time.monotonic()
        result = await turn
        assert time.monotonic() - started < PROMPTLY

        assert result.resolution is Resolution.AGENT_EXITED
        assert result.stop_reason is None
        assert result.cancel is None
        assert result.error is not None
        assert "exit status 3" in result.error.message
        assert "dying now" in result.error.message
        with pytest.raises((AgentExitedError, ConnectionClosedError)) as info:
            await pending
        assert isinstance(info.value, AgentExitedError)
        assert "exit status 3" in str(info.value)
        assert "dying now" in str(info.value)

        assert agent.returncode == 3
        # Later requests fail at once, naming the exit too.
        with pytest.raises(AgentExitedError, match="exit status 3"):
            await agent.request("_test/after_death", {})
        with pytest.raises(AgentExitedError, match="exit status 3"):
            session.prompt("again")
        # Cancelling the dead turn afterwards is harmless.
        outcome = await turn.cancel()
        assert outcome.resolved_by == "finished"
        assert outcome.resolution is Resolution.AGENT_EXITED
        await close_and_check(agent)


async def test_agent_closes_stdout_but_keeps_running(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    async with (
        asyncio.timeout(60),
        running(script("close_stdout"), env=env_with(ACP_TEST_PIDFILE=str(pidfile))) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("work")
        started = time.monotonic()
        result = await turn
        assert time.monotonic() - started < PROMPTLY  # not the agent's 60 s sleep
        assert result.resolution is Resolution.AGENT_EXITED
        assert result.error is not None
        # The useless process was ended and reaped, without waiting for aclose().
        await eventually(lambda: agent.returncode is not None, "the agent to be reaped", timeout=PROMPTLY)
        assert agent.returncode is not None
        assert agent.returncode < 0
        assert not pid_alive(read_pids(pidfile)["agent"])
        await assert_group_gone(agent.process.pgid)
        await close_and_check(agent)


async def test_stderr_flood_does_not_deadlock(tmp_path: Path) -> None:
    """100 MB on stderr during a turn: stderr is drained as it comes (no deadlock), only a
    bounded tail is kept."""
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    async with asyncio.timeout(60), running(script("stderr_flood"), name="flood") as agent:
        session = await agent.new_session(tmp_path)
        result = await session.prompt("flood")
        assert result.resolution is Resolution.COMPLETED
        assert result.stop_reason == "end_turn"
        assert agent.stderr.total_bytes >= 100_000_000
        assert len(agent.stderr.lines(10)) <= 10
        tail = agent.stderr.lines(10**9)
        assert sum(len(line) + 1 for line in tail) <= 64 * 1024 + 1024  # the tail is bounded
        await eventually(lambda: "flood over" in agent.stderr.lines(3), "the end of the flood")
        await close_and_check(agent)
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert peak_after - peak_before < 50 * 1024, "the host's memory grew with the agent's stderr"


async def test_agent_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    budget = 1.5
    async with (
        asyncio.timeout(60),
        running(script("ignore_sigterm"), ladder=LadderPolicy(budget=budget)) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("work")
        await take(turn, 1)
        outcome = await turn.cancel()
        result = await turn
        assert outcome.resolution is Resolution.KILLED
        assert result.resolution is Resolution.KILLED
        assert outcome.resolved_by == "kill"
        assert outcome.steps == ("session_cancel", "cancel_request", "terminate", "kill")
        assert budget * 0.9 <= outcome.elapsed < budget + PROMPTLY
        assert agent.returncode == -9
        await close_and_check(agent)


async def test_grandchild_holding_stdout_does_not_stall_the_turn(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    async with (
        asyncio.timeout(60),
        running(script("grandchild"), env=env_with(ACP_TEST_PIDFILE=str(pidfile))) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("work")
        started = time.monotonic()
        result = await turn
        assert time.monotonic() - started < PROMPTLY  # not the grandchild's 60 s
        assert result.resolution is Resolution.AGENT_EXITED
        assert result.error is not None
        assert "exit status 0" in result.error.message
        assert agent.returncode == 0

        pids = read_pids(pidfile)
        grandchild = pids["grandchild"]
        # It was in the agent's group: the driver killed it with the group.
        await eventually(lambda: not pid_alive(grandchild), "the grandchild to die", timeout=PROMPTLY)
        await assert_group_gone(agent.process.pgid)
        await close_and_check(agent)


# ---------------------------------------------------------------------- turn fencing


async def test_updates_after_the_response_are_late(tmp_path: Path) -> None:
    async with (
        asyncio.timeout(60),
        running(script("late_updates"), env=env_with(ACP_TEST_LATE_MODE="delayed")) as agent,
    ):
        session = await agent.new_session(tmp_path)
        first = session.prompt("one")
        first_updates = [u async for u in first]
        assert (await first).stop_reason == "end_turn"
        assert [u.kind for u in first_updates] == ["agent_message_chunk", "tool_call"]
        assert first.tool_calls["call_1"].status == "in_progress"

        # The chunk sent 0.3 s after the response: no turn is running -> late.
        await eventually(lambda: session.late_updates >= 1, "the late chunk")
        # An update of a kind this version does not know is the session's: kept, never late.
        await eventually(
            lambda: any(u.session_update == "x_vendor_status" for u in session.session_updates),
            "the unknown kind",
        )
        assert session.late_updates == 1
        assert [u.raw["content"]["text"] for u in first.late_updates] == ["late after turn 1"]

        # During the next turn: a tool_call_update for turn 1's call_1 is reported late, not
        # given to turn 2 (tool call ids are unique in a session). A chunk reusing turn 1's
        # message id m1 is turn 2's: the protocol's ordering decides, not message ids.
        second = session.prompt("two")
        second_updates = [u async for u in second]
        assert (await second).stop_reason == "end_turn"
        assert [u.raw for u in second_updates] == [
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "late during turn 2"},
                "messageId": "m1",
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "turn 2 text"},
                "messageId": "m2",
            },
        ]
        assert "call_1" not in second.tool_calls
        assert session.late_updates == 2
        assert [u.kind for u in first.late_updates] == ["agent_message_chunk", "tool_call_update"]
        assert first.tool_calls["call_1"].status == "in_progress"  # not updated by the late update
        assert second.late_updates == []
        await close_and_check(agent)


async def test_update_in_the_same_read_as_the_response_is_late(tmp_path: Path) -> None:
    """The agent writes the response and a chunk of the turn in one ``write``: the host reads
    both at once. The chunk still came after the response: it is late, not part of the turn."""
    async with (
        asyncio.timeout(60),
        running(script("late_updates"), env=env_with(ACP_TEST_LATE_MODE="same_write")) as agent,
    ):
        session = await agent.new_session(tmp_path)
        first = session.prompt("one")
        first_updates = [u async for u in first]
        assert (await first).stop_reason == "end_turn"
        texts = [u.text for u in first_updates if isinstance(u, AgentMessageChunk)]
        try:
            assert texts == ["turn 1 text"], "the late chunk was attributed to the finished turn"
            await eventually(lambda: session.late_updates >= 1, "the late chunk", timeout=2.0)
        finally:
            await close_and_check(agent)


async def test_update_in_the_same_read_as_an_error_answer_is_late(tmp_path: Path) -> None:
    """The same with an error answer to the prompt: a result resolves the turn as it is read,
    an error only when the turn's task sees it -- the chunk after it is late all the same."""
    async with (
        asyncio.timeout(60),
        running(script("late_updates"), env=env_with(ACP_TEST_LATE_MODE="same_write_error")) as agent,
    ):
        session = await agent.new_session(tmp_path)
        first = session.prompt("one")
        first_updates = [u async for u in first]
        result = await first
        texts = [u.text for u in first_updates if isinstance(u, AgentMessageChunk)]
        try:
            assert result.resolution is Resolution.ERROR
            assert texts == ["turn 1 text"], "the late chunk was attributed to the finished turn"
            await eventually(lambda: session.late_updates >= 1, "the late chunk", timeout=2.0)
            assert [u.raw["content"]["text"] for u in first.late_updates] == ["late after turn 1"]
        finally:
            await close_and_check(agent)


# ---------------------------------------------------------------------- failing to start


async def test_nonexistent_binary(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError) as info:
            await launch([missing, "--acp"])
    message = str(info.value)
    assert "cannot start agent" in message
    assert "no-such-agent" in message
    assert "No such file or directory" in message


async def test_a_command_not_on_path_is_said_so(tmp_path: Path) -> None:
    """A bare command name that no directory of PATH holds (an environment not activated): the
    error says it is not on PATH, not only "No such file or directory"."""
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "elsewhere")}
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError) as info:
            await launch(["acp-driver-not-installed", "agent"], env=env)
    message = str(info.value)
    assert "no 'acp-driver-not-installed' on PATH" in message
    assert "full path" in message
    # A path (not a bare name) is not looked up on PATH: its own error stays.
    with pytest.raises(AgentStartError) as info:
        await launch([str(tmp_path / "elsewhere" / "agent")], env=env)
    assert "on PATH" not in str(info.value)
    assert "No such file or directory" in str(info.value)


async def test_not_executable(tmp_path: Path) -> None:
    plain = tmp_path / "agent.txt"
    plain.write_text("not a program")
    with pytest.raises(AgentStartError, match=r"cannot start agent .*agent\.txt.*Permission denied"):
        await launch([str(plain)])


async def test_nonexistent_cwd_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(AgentStartError) as info:
        await launch(script("wrong_version"), cwd=missing)
    assert str(missing) in str(info.value)


async def test_empty_command() -> None:
    with pytest.raises(AgentStartError, match="empty"):
        await launch([])


async def test_agent_exits_before_initialize(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    async with asyncio.timeout(60):
        started = time.monotonic()
        with pytest.raises(AgentStartError) as info:
            await launch(script("exit_before_init"), env=env_with(ACP_TEST_PIDFILE=str(pidfile)))
        assert time.monotonic() - started < PROMPTLY
    message = str(info.value)
    assert "exit status 5" in message
    assert "fatal: no API key configured" in message
    await assert_group_gone(read_pids(pidfile)["agent"])


@pytest.mark.parametrize(("version", "shown"), [("99", "99"), ("0", "0"), ('"1"', "'1'"), ("null", "None")])
async def test_wrong_protocol_version(version: str, shown: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError) as info:
            await launch(
                script("wrong_version"),
                env=env_with(ACP_TEST_PIDFILE=str(pidfile), ACP_TEST_VERSION=version),
            )
    message = str(info.value)
    assert "protocol version" in message
    assert shown in message
    await assert_group_gone(read_pids(pidfile)["agent"])


async def test_initialize_never_answered(tmp_path: Path) -> None:
    """An agent that never answers ``initialize`` (and ignores SIGTERM): the launch times out,
    the agent is killed."""
    pidfile = tmp_path / "pids"
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError, match="initialize"):
            await launch(script("silent_init"), env=env_with(ACP_TEST_PIDFILE=str(pidfile)), init_timeout=1.0)
    await assert_group_gone(read_pids(pidfile)["agent"])


# ---------------------------------------------------------------------- kill and shutdown


async def test_agent_kill_and_shutdown_are_idempotent(tmp_path: Path) -> None:
    async with asyncio.timeout(60):
        agent = await RemoteAgent.launch(script("ignore_sigterm"))
        try:
            session = await agent.new_session(tmp_path)
            turn = session.prompt("work")
            await take(turn, 1)
            assert await agent.kill() == -9
            result = await turn
            # Killed by the host, not by the turn's ladder (see the sibling-turn test).
            assert result.resolution in (Resolution.AGENT_EXITED, Resolution.KILLED)
            assert "SIGKILL" in (result.error.message if result.error else "")
            assert await agent.kill() == -9
            assert await agent.shutdown() == -9
        finally:
            await close_and_check(agent)
        await close_and_check(agent)  # aclose() again: a no-op


async def test_shutdown_escalates_for_an_agent_ignoring_eof_and_sigterm(tmp_path: Path) -> None:
    async with asyncio.timeout(60):
        agent = await RemoteAgent.launch(script("ignore_sigterm"))
        started = time.monotonic()
        code = await agent.shutdown(grace=0.2)
        assert code == -9
        assert time.monotonic() - started < PROMPTLY
        await close_and_check(agent)


# ---------------------------------------------------------------------- backpressure


# Regression tests: the ladder used to block on write backpressure (session/cancel awaited a
# writable pipe), so an agent that stopped reading stdin was never escalated or killed.


async def _stuck_turn(agent: RemoteAgent, tmp_path: Path) -> tuple[RemoteSession, PromptTurn]:
    """A turn whose 1 MB prompt the agent never reads: the host's writes are paused."""
    session = await agent.new_session(tmp_path)
    turn = session.prompt("x" * 1_000_000)
    await eventually(lambda: agent.connection.write_paused, "the pipe to fill up (the agent reads nothing)")
    return session, turn


async def test_cancel_lands_when_the_agent_stops_reading(tmp_path: Path) -> None:
    budget = 1.5
    async with (
        asyncio.timeout(60),
        running(script("stops_reading"), ladder=LadderPolicy(budget=budget)) as agent,
    ):
        _session, turn = await _stuck_turn(agent, tmp_path)
        try:
            async with asyncio.timeout(budget + 4.0):
                outcome = await turn.cancel()
        except TimeoutError:
            pytest.fail(f"the cancel did not land within {budget + 4.0}s: {turn.ladder}")
        finally:
            await close_and_check(agent)
        assert outcome.resolution is Resolution.KILLED
        assert "terminate" in outcome.steps


async def test_kill_lands_when_the_agent_stops_reading(tmp_path: Path) -> None:
    async with (
        asyncio.timeout(60),
        running(script("stops_reading"), ladder=LadderPolicy(budget=30.0)) as agent,
    ):
        _session, turn = await _stuck_turn(agent, tmp_path)
        cancel = asyncio.ensure_future(turn.cancel())
        await eventually(lambda: turn.ladder is not None and bool(turn.ladder.taken), "the first step")
        turn.kill()  # the second Ctrl-C
        try:
            async with asyncio.timeout(4.0):
                outcome = await cancel
        except TimeoutError:
            pytest.fail(f"turn.kill() did not land within 4s: {turn.ladder}")
        finally:
            await close_and_check(agent)
        assert outcome.resolved_by == "kill"
        assert outcome.resolution is Resolution.KILLED


async def test_request_timeout_holds_when_the_agent_stops_reading(tmp_path: Path) -> None:
    async with asyncio.timeout(60), running(script("stops_reading")) as agent:
        await _stuck_turn(agent, tmp_path)
        started = time.monotonic()
        try:
            async with asyncio.timeout(5.0):
                with pytest.raises(RequestTimeoutError):
                    await agent.request("_test/anything", {}, timeout=1.0)
        except TimeoutError:
            pytest.fail("agent.request(timeout=1.0) was still waiting after 5s")
        finally:
            await close_and_check(agent)
        assert time.monotonic() - started < 5.0


async def test_a_tracer_that_raises_never_breaks_the_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A host's tracer is called for every message in and out; when it raises, the exception is
    logged and the message goes on: the read loop, the request being sent and the turn carry on."""
    calls = 0

    def broken(direction: str, message: bytes) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("tracer bug")

    async with running(reference("polite"), tracer=broken) as agent:
        session = await agent.new_session(tmp_path)
        result = await session.prompt("/stream 3 0")
        assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED)
        await close_and_check(agent)
    assert calls >= 9  # initialize, session/new, the prompt: each request and answer; 3 chunks
    assert "the tracer failed (1 times so far)" in caplog.text
