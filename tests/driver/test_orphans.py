"""No descendant of an agent or of a terminal outlives it: ``setsid``, double forks, SIGTERM ignored.

The agent (``agents/escaping_tools.py``) starts tools the way the Claude Code adapters run Bash
tools -- in a session of their own, out of the agent's process group -- and ignores cancel,
SIGTERM and stdin EOF, like codex-acp. Every test checks, with real processes, that nothing of
it is left: after the ladder, ``kill()``, ``shutdown()``, a terminal's release, and after the host
process itself was SIGKILLed mid-turn. These guarantees come from the supervisor (Linux only).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_driver.aio import ProcessGroup, supervision_available
from acp_driver.driver import LadderPolicy, PromptTurn, RemoteAgent, Resolution, launch
from acp_driver.services import LocalTerminals

from ..procs import pid_alive
from ..services._helpers import FakeSession
from ..waiting import eventually
from ._helpers import read_pids, script

pytestmark = pytest.mark.skipif(not supervision_available(), reason="the supervisor needs Linux")

TOOLS = ("setsid", "daemon")
PR_GET_CHILD_SUBREAPER = 37


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where every process of the test agent writes its pid; whatever is left is killed at the end."""
    path = tmp_path / "pids"
    yield path
    for pid in read_pids(path).values():
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def alive(pids: dict[str, int]) -> dict[str, int]:
    return {role: pid for role, pid in pids.items() if pid_alive(pid)}


async def assert_all_gone(pids: dict[str, int], timeout: float = 5.0) -> None:
    """For the cases where nobody waits for the end: the host died, a supervisor was killed."""
    deadline = time.monotonic() + timeout
    while alive(pids):
        assert time.monotonic() < deadline, f"still running: {alive(pids)}"
        await asyncio.sleep(0.02)


async def agent_with_tools(
    tmp_path: Path, pidfile: Path, **options: object
) -> tuple[RemoteAgent, PromptTurn]:
    """The agent, a turn running, and its two tools started (out of the agent's group)."""
    env = {**os.environ, "ACP_TEST_PIDFILE": str(pidfile)}
    agent = await launch(script("escaping_tools"), env=env, **options)
    session = await agent.new_session(tmp_path)
    turn = session.prompt("start your tools")
    await eventually(lambda: {"agent", *TOOLS} <= read_pids(pidfile).keys(), what="the tools")
    pids = read_pids(pidfile)
    assert agent.process.supervised
    assert pids["agent"] == agent.process.pid
    for tool in TOOLS:  # beyond the reach of the agent's process group
        assert os.getpgid(pids[tool]) != agent.process.pgid
        assert os.getsid(pids[tool]) != os.getsid(agent.process.pid)
    return agent, turn


async def test_the_ladder_leaves_no_descendant(tmp_path, pidfile):
    agent, turn = await agent_with_tools(tmp_path, pidfile, ladder=LadderPolicy(budget=1.0))
    try:
        async with asyncio.timeout(30):
            outcome = await turn.cancel()
        assert outcome.resolution is Resolution.KILLED
        assert outcome.resolved_by == "kill"  # the agent ignored SIGTERM too
        assert alive(read_pids(pidfile)) == {}  # gone by the time the exit is known
    finally:
        await agent.aclose()


async def test_kill_leaves_no_descendant(tmp_path, pidfile):
    agent, _turn = await agent_with_tools(tmp_path, pidfile)
    async with asyncio.timeout(30):
        assert await agent.kill() == -signal.SIGKILL
    assert alive(read_pids(pidfile)) == {}  # gone by the time the exit is known


async def test_shutdown_leaves_no_descendant(tmp_path, pidfile):
    agent, _turn = await agent_with_tools(tmp_path, pidfile)
    async with asyncio.timeout(30):
        code = await agent.shutdown(grace=0.2)  # stdin EOF and SIGTERM ignored: SIGKILL
    assert code == -signal.SIGKILL
    assert alive(read_pids(pidfile)) == {}  # gone by the time the exit is known


async def test_a_terminal_release_leaves_no_descendant(tmp_path, pidfile, monkeypatch):
    monkeypatch.setenv("ACP_TEST_PIDFILE", str(pidfile))
    session = FakeSession("sess_1", str(tmp_path))
    terminals = LocalTerminals(kill_grace=0.2)
    try:
        command = [*script("escaping_tools"), "--tools", "term"]
        tid = await terminals.create(session, session, {"command": command[0], "args": command[1:]})
        roles = {"term", "term-setsid", "term-daemon"}
        await eventually(lambda: roles <= read_pids(pidfile).keys(), what="the terminal's tools")
        assert read_pids(pidfile)["term"] == terminals.terminals[tid].pid
        async with asyncio.timeout(30):
            await terminals.release(session, tid)
        assert alive(read_pids(pidfile)) == {}  # gone by the time the exit is known
    finally:
        await terminals.aclose()


HOST = """
import asyncio, sys
from acp_driver.driver import ClientServices, launch
from acp_driver.services import LocalTerminals

async def main():
    work, tool, agent_argv = sys.argv[1], sys.argv[2:6], sys.argv[6:]
    terminals = LocalTerminals()
    agent = await launch(agent_argv, services=ClientServices(terminals=terminals))
    session = await agent.new_session(work)
    tid = await terminals.create(session, session, {"command": tool[0], "args": tool[1:]})
    turn = session.prompt("start your tools")
    supervisors = (agent.process.supervisor_pid, terminals.terminals[tid].process.supervisor_pid)
    print(*supervisors, flush=True)
    async for _update in turn:
        pass

asyncio.run(main())
"""


def test_the_host_sigkilled_mid_turn_leaves_nothing_within_2_s(tmp_path, pidfile):
    env = {**os.environ, "ACP_TEST_PIDFILE": str(pidfile)}
    tool = [*script("escaping_tools"), "--tools", "term"]
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path), *tool, *script("escaping_tools")],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    supervisors: list[int] = []
    try:
        assert host.stdout is not None
        assert select.select([host.stdout], [], [], 60)[0], "the host did not start"
        supervisors = [int(pid) for pid in host.stdout.readline().split()]
        assert len(supervisors) == 2, "the host failed (see its stderr)"
        roles = {"agent", *TOOLS, "term", "term-setsid", "term-daemon"}
        deadline = time.monotonic() + 30
        while not roles <= read_pids(pidfile).keys():
            assert time.monotonic() < deadline, f"tools not started: {read_pids(pidfile)}"
            time.sleep(0.02)
        pids = {
            **read_pids(pidfile),
            "agent supervisor": supervisors[0],
            "terminal supervisor": supervisors[1],
        }
        assert len(alive(pids)) == 8
        host.kill()
        host.wait()
        deadline = time.monotonic() + 2.0
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert alive(pids) == {}
    finally:
        host.kill()
        host.wait()
        for pid in supervisors:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_the_host_process_is_left_as_it_was():
    """No subreaper flag and no signal handler are set in the host's own process."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGUSR1)}
    process = ProcessGroup.spawn([sys.executable, "-c", "pass"])
    assert process.supervised
    assert await process.wait() == 0
    assert await process.reap() == 0
    flag = ctypes.c_int(-1)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    assert flag.value == 0
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    direct = ProcessGroup.spawn([sys.executable, "-c", "pass"], supervise=False)
    assert not direct.supervised
    assert await direct.wait() == 0
    assert await direct.reap() == 0


async def test_aspawn_starts_and_fails_like_spawn(tmp_path):
    process = await ProcessGroup.aspawn([sys.executable, "-c", "import os; print(os.getpid())"])
    assert process.supervised
    assert process.popen.stdout is not None
    assert int(process.popen.stdout.read()) == process.pid
    assert await process.reap() == 0
    with pytest.raises(FileNotFoundError) as caught:
        await ProcessGroup.aspawn(["no-such-program-xyz"])
    assert caught.value.filename == "no-such-program-xyz"
    script_path = tmp_path / "not-executable"
    script_path.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        await ProcessGroup.aspawn([str(script_path)])


async def test_a_supervisor_killed_by_someone_else_takes_its_agent_along(tmp_path, pidfile):
    """SIGKILL to the supervisor: the agent gets SIGKILL too (its parent-death signal), and the
    host sees the exit. (The tools that left the agent's group are beyond reach then: documented.)"""
    agent, _turn = await agent_with_tools(tmp_path, pidfile)
    try:
        assert agent.process.supervisor_pid is not None
        os.kill(agent.process.supervisor_pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            assert await agent.process.wait() == -signal.SIGKILL
        await assert_all_gone({"agent": read_pids(pidfile)["agent"]})
    finally:
        await agent.aclose()


async def test_linger_keeps_what_the_command_left_until_reap(pidfile, monkeypatch):
    """A terminal's command exits; its background tools run on until reap, which ends them all."""
    monkeypatch.setenv("ACP_TEST_PIDFILE", str(pidfile))
    command = [*script("escaping_tools"), "--tools", "cmd", "--exit"]
    process = ProcessGroup.spawn(command, stdout=subprocess.DEVNULL, stderr=None, linger=True)
    try:
        async with asyncio.timeout(30):
            assert await process.wait() == 0
        pids = read_pids(pidfile)
        assert set(alive(pids)) == {"cmd-setsid", "cmd-daemon"}
        assert process.group_alive()
        async with asyncio.timeout(30):
            assert await process.reap() == 0
        assert alive(pids) == {}  # reap returns once the supervisor saw them die
        assert not process.group_alive()
    finally:
        await process.reap()
