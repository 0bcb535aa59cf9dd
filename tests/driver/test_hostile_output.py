"""The host driver against an agent whose output is hostile: garbage at start, floods mid-turn."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from acp_driver.driver import AgentMessageChunk, AgentStartError, Resolution, UnknownUpdate, launch

from ._helpers import assert_group_gone, running, script
from .test_faults import env_with

BANNER = b"".join(b"Starting agent v1.2.3, log line %d\n" % i for i in range(40))


async def test_a_peer_that_prints_only_garbage_fails_the_start_promptly_quoting_it() -> None:
    env = env_with(ACP_TEST_FUZZ_START=BANNER.hex(), ACP_TEST_FUZZ_THEN="hang")
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError) as info:
            # init_timeout is long: failing before it is the point
            await launch(script("fuzz_agent"), env=env, init_timeout=600)
    message = str(info.value)
    assert "does not speak ACP" in message
    assert "Starting agent v1.2.3, log line 0" in message
    assert "log line 1" in message


async def test_a_peer_that_prints_a_little_garbage_and_exits_is_reported_with_its_lines() -> None:
    env = env_with(
        ACP_TEST_FUZZ_START=b"usage: agent [--acp]\nunknown option\n".hex(), ACP_TEST_FUZZ_THEN="exit"
    )
    async with asyncio.timeout(60):
        with pytest.raises(AgentStartError) as info:
            await launch(script("fuzz_agent"), env=env)
    message = str(info.value)
    assert "'usage: agent [--acp]'; 'unknown option'" in message


async def test_a_banner_line_before_initialize_is_tolerated(tmp_path: Path) -> None:
    env = env_with(ACP_TEST_FUZZ_START=b"hello from the agent\n".hex())
    async with asyncio.timeout(60), running(script("fuzz_agent"), env=env) as agent:
        session = await agent.new_session(tmp_path)
        assert (await session.prompt(b"".hex())).stop_reason == "end_turn"


async def test_a_garbage_flood_mid_turn_neither_hangs_nor_floods(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flood = b"".join(b"garbage %d\n" % i for i in range(20000))
    flood += b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"}}\n' * 500
    flood += b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5}}\n' * 1000
    out: list[bytes] = []
    async with asyncio.timeout(60):
        async with running(
            script("fuzz_agent"), tracer=lambda d, m: out.append(m) if d == "out" else None
        ) as agent:
            session = await agent.new_session(tmp_path)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="acp_driver"):
                result = await session.prompt(flood.hex())
            assert result.stop_reason == "end_turn"
            await agent.new_session(tmp_path)  # the connection still answers
            pgid = agent.process.pgid
        await assert_group_gone(pgid)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 12, [r.getMessage() for r in warnings]
    null_id_replies = [m for m in out if m.startswith(b'{"jsonrpc":"2.0","id":null')]
    assert len(null_id_replies) <= 64  # bounded error replies; none to the id-less errors


async def test_an_update_with_a_lone_surrogate_reaches_its_turn(tmp_path: Path) -> None:
    # Valid JSON (RFC 8259; JavaScript's JSON.stringify emits it): it used to be a -32700 and the
    # update was lost.
    async with asyncio.timeout(60), running(script("fuzz_agent")) as agent:
        session = await agent.new_session(tmp_path)
        update = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":'
            b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"smile \\ud83d"}}}}\n'
            % session.id.encode()
        )
        turn = session.prompt(update.hex())
        updates = [u async for u in turn]
        assert (await turn).stop_reason == "end_turn"
        assert [u.raw["content"]["text"] for u in updates] == ["smile \ud83d"]
        assert agent.connection.violations == 0


async def test_an_update_whose_kind_is_no_string_is_kept_and_the_run_goes_on(tmp_path: Path) -> None:
    # A list as the discriminator cannot be hashed: it used to raise in the run's handler, and
    # the updates read with it were lost.
    async with asyncio.timeout(60), running(script("fuzz_agent")) as agent:
        session = await agent.new_session(tmp_path)
        lines = b"".join(
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":%s}}\n'
            % (session.id.encode(), update)
            for update in (
                b'{"sessionUpdate":["x"]}',
                b'{"sessionUpdate":{"a":1}}',
                b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"after"}}',
            )
        )
        turn = session.prompt(lines.hex())
        updates = [u async for u in turn]
        assert (await turn).stop_reason == "end_turn"
        # An update of no known kind is the session's, and the running turn sees it too (v1).
        assert [type(u) for u in updates] == [UnknownUpdate, UnknownUpdate, AgentMessageChunk]
        assert updates[-1].raw["content"]["text"] == "after"
        odd = [u for u in session.session_updates if type(u) is UnknownUpdate]
        assert [u.raw["sessionUpdate"] for u in odd] == [["x"], {"a": 1}]


async def test_a_prompt_that_cannot_be_encoded_fails_its_turn_at_once(tmp_path: Path) -> None:
    # It used to hang: the encoding error was raised where nobody waited for it.
    async with asyncio.timeout(60), running(script("fuzz_agent")) as agent:
        session = await agent.new_session(tmp_path)
        result = await session.prompt([{"type": "text", "text": object()}])
        assert result.resolution is Resolution.ERROR
        assert result.error is not None
        assert "cannot be sent" in result.error.message
        assert agent.connection.in_flight == (0, 0)
        assert (await session.prompt(b"".hex())).stop_reason == "end_turn"  # nothing was broken
