"""The services behind the real driver, driven by the real reference agent over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from acp_driver.driver import (
    AgentMessageChunk,
    ClientServices,
    PermissionRequest,
    RemoteAgent,
    RemoteSession,
    allow_all,
    launch,
)
from acp_driver.services import LocalFileSystem

from ..waiting import eventually
from ._helpers import RecordingTerminals, live_members, pid_alive, wait_group_gone

AGENT = [sys.executable, "-m", "acp_driver", "agent"]


@contextlib.asynccontextmanager
async def running(services: ClientServices) -> AsyncIterator[RemoteAgent]:
    """A launched reference agent; whatever happens, nothing of it (or its terminals) survives."""
    async with asyncio.timeout(30):
        agent = await launch(AGENT, services=services, protocol=1)
    pgid = agent.process.pgid
    try:
        yield agent
    finally:
        async with asyncio.timeout(30):
            await agent.aclose()
        terminals = services.terminals
        groups = [pgid, *(terminals.pgids if isinstance(terminals, RecordingTerminals) else [])]
        leaks = {g: live_members(g) for g in groups if live_members(g)}
        for g in leaks:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(g, signal.SIGKILL)
        assert leaks == {}, f"left alive after aclose: {leaks}"


def services(**overrides: Any) -> ClientServices:
    options: dict[str, Any] = {
        "permission": allow_all,
        "fs": LocalFileSystem(),
        "terminals": RecordingTerminals(kill_grace=0.5),
    }
    options.update(overrides)
    return ClientServices(**options)


async def say(session: RemoteSession, prompt: str) -> tuple[str, Any]:
    """Run a turn; return the agent's message text and the ``TurnResult``."""
    async with asyncio.timeout(30):
        turn = session.prompt(prompt)
        text = "".join([u.text async for u in turn if isinstance(u, AgentMessageChunk)])
        return text, await turn


# ---------------------------------------------------------------------- files


async def test_read_and_write_inside_the_cwd(root):
    (root / "hello.txt").write_text("hello from the host ✓\nsecond line\n")
    async with running(services()) as agent:
        session = await agent.new_session(root)
        text, result = await say(session, f"/read {root}/hello.txt")
        assert result.stop_reason == "end_turn"
        assert text == "hello from the host ✓\nsecond line\n"

        text, result = await say(session, f"/write {root}/sub/new.txt written by the agent")
        assert text == f"wrote {root}/sub/new.txt\n"
        assert (root / "sub" / "new.txt").read_text() == "written by the agent"


async def test_reads_and_writes_outside_the_roots_are_refused(root, tmp_path):
    (tmp_path / "secret.txt").write_text("secret\n")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    async with running(services()) as agent:
        session = await agent.new_session(root)
        text, result = await say(session, f"/read {tmp_path}/secret.txt")
        assert result.stop_reason == "end_turn"
        assert text == (
            f"error: /read: path {tmp_path}/secret.txt is outside the session's roots ({root}) (code -32602)\n"
        )
        text, _ = await say(session, f"/read {root}/link")
        assert "resolves to" in text
        assert "outside the session's roots" in text
        assert "secret\n" not in text
        text, _ = await say(session, "/read /proc/self/environ")
        assert text.startswith("error: /read: path /proc/self/environ (resolves to /proc/")
        assert text.endswith("is under /proc, which is never served (code -32602)\n")
        text, _ = await say(session, "/read relative.txt")
        assert "is relative; ACP paths must be absolute (code -32602)" in text
        text, _ = await say(session, f"/read {root}/missing.txt")
        assert text == f"error: /read: file not found: {root}/missing.txt (code -32002)\n"
        text, _ = await say(session, f"/write {root}/../pwned.txt x")
        assert "outside the session's roots" in text
        assert not (tmp_path / "pwned.txt").exists()


async def test_additional_directories_are_roots(root, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "f.txt").write_text("extra root\n")
    async with running(services()) as agent:
        try:
            session = await agent.new_session(root, additional_directories=[str(extra)])
        except Exception as exc:  # the agent may not accept additionalDirectories
            pytest.skip(f"agent refused additionalDirectories: {exc}")
        text, _ = await say(session, f"/read {extra}/f.txt")
        assert text == "extra root\n"


async def test_capabilities_follow_the_services(root):
    (root / "f.txt").write_text("x\n")
    assert services(fs=LocalFileSystem(read=False), terminals=None).capabilities() == {
        "fs": {"readTextFile": False, "writeTextFile": True},
        "terminal": False,
    }
    async with running(services(fs=LocalFileSystem(read=False), terminals=None)) as agent:
        session = await agent.new_session(root)
        text, _ = await say(session, f"/read {root}/f.txt")
        assert text == "error: /read: the client does not support fs/read_text_file\n"
        text, _ = await say(session, "/terminal echo hi")
        assert text == "error: /terminal: the client does not support terminal/create\n"
        text, _ = await say(session, f"/write {root}/f.txt still writable")
        assert text == f"wrote {root}/f.txt\n"
        assert (root / "f.txt").read_text() == "still writable"
    async with running(ClientServices()) as agent:
        session = await agent.new_session(root)
        text, _ = await say(session, f"/write {root}/f.txt nope")
        assert text == "error: /write: the client does not support fs/write_text_file\n"


# ---------------------------------------------------------------------- terminals


async def test_terminal_output_and_exit_status(root):
    async with running(services()) as agent:
        session = await agent.new_session(root)
        text, result = await say(session, '/terminal sh -c "echo out; echo err >&2; pwd; exit 4"')
        assert result.stop_reason == "end_turn"
        assert text == f"out\nerr\n{root}\nexit status: 4\n"
        text, _ = await say(session, '/terminal sh -c "kill -USR1 $$"')
        assert text == "exit status: signal SIGUSR1\n"
        text, _ = await say(session, "/terminal no-such-program-xyz")
        assert (
            text == "error: /terminal: cannot start 'no-such-program-xyz': command not found (code -32002)\n"
        )
        assert agent.services.terminals.terminals == {}  # type: ignore[union-attr]


async def test_cancelled_turn_kills_its_terminal(root):
    terminals = RecordingTerminals(kill_grace=0.5)
    async with running(services(terminals=terminals)) as agent:
        session = await agent.new_session(root)
        async with asyncio.timeout(30):
            turn = session.prompt('/terminal sh -c "sleep 60 & echo $$ > pidfile; wait"')
            pidfile = root / "pidfile"
            await eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), what="pidfile")
            pid = int(pidfile.read_text())
            assert pid_alive(pid)
            assert [t.pgid for t in terminals.terminals.values()] == [pid]
            outcome = await turn.cancel()
            result = await turn
        assert result.stop_reason == "cancelled"
        assert outcome.resolved_by == "session_cancel"
        await eventually(lambda: not live_members(pid), what="the terminal's group to die")
        await eventually(lambda: not terminals.terminals, what="the terminal to be released")
        await wait_group_gone(pid)
        # The session goes on.
        text, result = await say(session, "/terminal echo still here")
        assert text == "still here\nexit status: 0\n"


async def test_aclose_leaves_no_process(root):
    terminals = RecordingTerminals(kill_grace=0.5)
    svc = services(terminals=terminals)
    async with asyncio.timeout(30):
        agent = await launch(AGENT, services=svc, protocol=1)
    agent_pgid = agent.process.pgid
    try:
        session = await agent.new_session(root)
        turn = session.prompt('/terminal sh -c "sleep 60 & echo $$ > pidfile; exec sleep 60"')
        pidfile = root / "pidfile"
        async with asyncio.timeout(30):
            await eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), what="pidfile")
        pid = int(pidfile.read_text())
        assert live_members(pid)
    finally:
        async with asyncio.timeout(30):
            await agent.aclose()
    async with asyncio.timeout(30):
        result = await turn
    assert result.stop_reason != "end_turn"
    assert live_members(agent_pgid) == []
    assert live_members(pid) == []
    # The agent's end releases its sessions' terminals (not the whole service, which other
    # agents may share).
    assert terminals.terminals == {}
    await asyncio.gather(wait_group_gone(pid), wait_group_gone(agent_pgid))


# ---------------------------------------------------------------------- permission


async def test_cancel_while_the_permission_policy_waits(root):
    entered = asyncio.Event()
    seen: list[str] = []

    async def forever(request: PermissionRequest) -> Any:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return None  # pragma: no cover

    async with running(services(permission=forever)) as agent:
        session = await agent.new_session(root)
        async with asyncio.timeout(30):
            turn = session.prompt("/permission")
            await entered.wait()
            await turn.cancel()
            result = await turn
        assert result.stop_reason == "cancelled"
        assert seen == ["cancelled"]
        text, result = await say(session, "after cancel")
        assert (text, result.stop_reason) == ("after cancel\n", "end_turn")
