"""``LocalTerminals``: real processes in their own groups; output, exit, kill, release, owners."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from acp_driver import RequestCancelledError, RpcError
from acp_driver.services import LocalTerminals, ServiceError
from acp_driver.services._terminal import utf8_complete_end, utf8_tail_start

from ..fakeclock import FakeClock
from ..waiting import eventually
from ._helpers import FakeSession, FakeTurn, live_members, pid_alive, wait_group_gone

PY = sys.executable


def params(command: str, *args: str, **extra: object) -> dict[str, object]:
    return {"sessionId": "sess_1", "command": command, "args": list(args), **extra}


def py(code: str, **extra: object) -> dict[str, object]:
    return params(PY, "-c", code, **extra)


async def run(terminals, session, p, owner=None):
    """Create, wait for exit, return (output result, exit status); released afterwards."""
    async with asyncio.timeout(30):
        tid = await terminals.create(session, owner if owner is not None else session, p)
        status = await terminals.wait_for_exit(session, tid)
        out = await terminals.output(session, tid)
        await terminals.release(session, tid)
    return out, status


async def error_of(coro: object) -> RpcError:
    with pytest.raises(RpcError) as info:
        async with asyncio.timeout(30):
            await coro  # type: ignore[misc]
    return info.value


# ---------------------------------------------------------------------- output and exit


async def test_output_and_exit_code(terminals, session):
    out, status = await run(terminals, session, params("printf", "hello %s", "world"))
    assert status == {"exitCode": 0, "signal": None}
    assert out == {"output": "hello world", "truncated": False, "exitStatus": status}


async def test_nonzero_exit_and_merged_stderr(terminals, session):
    out, status = await run(terminals, session, params("sh", "-c", "echo out; echo err >&2; exit 3"))
    assert status == {"exitCode": 3, "signal": None}
    assert out["output"] == "out\nerr\n"


async def test_killed_by_signal_reports_the_signal_name(terminals, session):
    out, status = await run(terminals, session, params("sh", "-c", "echo bye; kill -USR1 $$"))
    assert status == {"exitCode": None, "signal": "SIGUSR1"}
    assert out["exitStatus"] == status
    assert out["output"] == "bye\n"


async def test_output_while_running_has_no_exit_status(terminals, session):
    tid = await terminals.create(
        session, session, py("import time; print('started', flush=True); time.sleep(60)")
    )
    await eventually(lambda: terminals.terminals[tid].output_text() == "started\n", what="first line")
    out = await terminals.output(session, tid)
    assert out == {"output": "started\n", "truncated": False}
    await terminals.release(session, tid)


async def test_stdin_is_devnull(terminals, session):
    out, status = await run(terminals, session, py("import sys; print(repr(sys.stdin.read()))"))
    assert (out["output"], status["exitCode"]) == ("''\n", 0)


async def test_truncation_keeps_the_end(terminals, session):
    out, _ = await run(terminals, session, params("printf", "abcdefghijklmnopqrstuvwxyz", outputByteLimit=10))
    assert out["output"] == "qrstuvwxyz"
    assert out["truncated"] is True


@pytest.mark.parametrize(
    ("char", "limit", "expected"),
    [
        ("é", 5, "éé"),  # 2-byte chars: cut lands mid-character, moved forward
        ("€", 7, "€€"),  # 3-byte
        ("😀", 9, "😀😀"),  # 4-byte
        ("😀", 8, "😀😀"),  # exactly on a boundary
        ("😀", 3, ""),  # less than one character fits
    ],
)
async def test_truncation_happens_at_a_character_boundary(terminals, session, char, limit, expected):
    code = (
        f"import sys\nfor _ in range(50):\n    sys.stdout.buffer.write({char!r}.encode()); sys.stdout.flush()"
    )
    out, _ = await run(terminals, session, py(code, outputByteLimit=limit))
    assert out["output"] == expected
    assert out["truncated"] is True
    assert len(out["output"].encode()) <= limit


async def test_large_output_is_bounded(terminals, session):
    code = "import sys\nfor i in range(100000): sys.stdout.write(f'line {i} ünï\\n')\nprint('END')"
    out, status = await run(terminals, session, py(code, outputByteLimit=1000))
    assert status["exitCode"] == 0
    assert out["truncated"] is True
    assert out["output"].endswith("line 99999 ünï\nEND\n")
    assert len(out["output"].encode()) <= 1000
    assert "\ufffd" not in out["output"]


async def test_limit_zero_and_default_limit(session):
    terminals = LocalTerminals(default_output_byte_limit=4, max_output_byte_limit=6)
    try:
        out, _ = await run(terminals, session, params("printf", "123456789"))
        assert (out["output"], out["truncated"]) == ("6789", True)
        out, _ = await run(terminals, session, params("printf", "123456789", outputByteLimit=100))
        assert out["output"] == "456789"  # capped by max_output_byte_limit
        out, _ = await run(terminals, session, params("printf", "123", outputByteLimit=0))
        assert (out["output"], out["truncated"]) == ("", True)
        out, _ = await run(terminals, session, params("true", outputByteLimit=0))
        assert (out["output"], out["truncated"]) == ("", False)
    finally:
        await terminals.aclose()


def test_utf8_boundary_helpers():
    data = "aé€😀".encode()
    assert [utf8_tail_start(data, i) for i in range(len(data))] == [0, 1, 3, 3, 6, 6, 6, 10, 10, 10]
    assert utf8_complete_end(data) == len(data)
    assert [utf8_complete_end(data[:n]) for n in range(len(data) + 1)] == [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10]


async def test_invalid_utf8_output_is_replaced(terminals, session):
    out, _ = await run(terminals, session, py("import sys; sys.stdout.buffer.write(b'a\\xffb')"))
    assert out["output"] == "a\ufffdb"


# ---------------------------------------------------------------------- environment and cwd


async def test_env_is_applied(session, root):
    terminals = LocalTerminals(extra_env={"HOST_VAR": "host", "SHARED": "host"})
    try:
        env = [{"name": "AGENT_VAR", "value": "agent ✓"}, {"name": "SHARED", "value": "agent"}]
        script = 'printf "%s|%s|%s|%s" "$AGENT_VAR" "$HOST_VAR" "$SHARED" "${HOME:+home}"'
        out, _ = await run(terminals, session, params("sh", "-c", script, env=env))
        assert out["output"] == "agent ✓|host|agent|home"
    finally:
        await terminals.aclose()
    isolated = LocalTerminals(inherit_env=False)
    try:
        out, _ = await run(isolated, session, params("/bin/sh", "-c", 'printf "%s" "${HOME:-unset}"'))
        assert out["output"] == "unset"
    finally:
        await isolated.aclose()


async def test_invalid_env_is_refused(terminals, session):
    for env in ([{"name": "A=B", "value": "x"}], [{"name": "A"}], [{"name": "", "value": "x"}], {"A": "x"}):
        error = await error_of(terminals.create(session, session, params("true", env=env)))
        assert error.code == -32602
    assert terminals.terminals == {}


async def test_cwd_defaults_to_the_session_cwd(terminals, session, root):
    out, _ = await run(terminals, session, params("pwd"))
    assert out["output"] == f"{root}\n"


async def test_cwd_inside_the_roots(terminals, session, root):
    (root / "sub").mkdir()
    out, _ = await run(terminals, session, params("pwd", cwd=str(root / "sub")))
    assert out["output"] == f"{root}/sub\n"


async def test_cwd_confinement(terminals, session, root, tmp_path):
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "file.txt").write_text("x")
    cases = {
        str(tmp_path / "outside"): ("outside_roots", -32602),
        f"{root}/../outside": ("outside_roots", -32602),
        str(root / "escape"): ("outside_roots", -32602),
        f"{root}2": ("outside_roots", -32602),
        "/proc/self": ("special_path", -32602),
        "sub": ("relative_path", -32602),
        str(root / "missing"): ("not_found", -32002),
        str(root / "file.txt"): ("not_a_directory", -32602),
    }
    for cwd, (reason, code) in cases.items():
        error = await error_of(terminals.create(session, session, params("pwd", cwd=cwd)))
        assert isinstance(error, ServiceError)
        assert (error.reason, error.code) == (reason, code), cwd
        assert "cwd" in error.message
    assert terminals.terminals == {}
    assert terminals.pgids == []


# ---------------------------------------------------------------------- commands and shells


async def test_args_run_without_a_shell(terminals, session):
    out, _ = await run(terminals, session, params("echo", "$HOME", "a|b", "*"))
    assert out["output"] == "$HOME a|b *\n"


async def test_a_shell_line_without_args_runs_in_the_shell(terminals, session):
    """Claude Code's adapters send ``{"command": "<a whole bash line>"}`` without ``args``."""
    line = {"sessionId": "sess_1", "command": "echo hi | tr a-z A-Z; [[ -n x ]] && echo bash"}
    out, status = await run(terminals, session, line)
    assert status == {"exitCode": 0, "signal": None}
    assert out["output"] == "HI\nbash\n"  # [[ ]]: bash, the shell agents write for
    out, _ = await run(terminals, session, params("echo hi | tr a-z A-Z"))  # "args": [] alike
    assert out["output"] == "HI\n"
    out, _ = await run(terminals, session, params("echo"))  # a plain program: run directly
    assert out["output"] == "\n"


async def test_a_program_path_with_a_space_is_not_a_shell_line(terminals, session, root):
    program = root / "my tools" / "hello"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho hello from $0\n")
    program.chmod(0o755)
    out, _ = await run(terminals, session, params(str(program)))
    assert out["output"] == f"hello from {program}\n"


async def test_shell_lines_off_refuses_a_line_with_a_hint(session):
    terminals = LocalTerminals(shell_lines=False)
    try:
        error = await error_of(terminals.create(session, session, params("echo hi | tr a-z A-Z")))
        assert isinstance(error, ServiceError)
        assert (error.code, error.reason) == (-32002, "command_not_found")
        assert "cannot start 'echo hi | tr a-z A-Z': command not found" in error.message
        assert "shell syntax is not interpreted" in error.message
    finally:
        await terminals.aclose()


async def test_a_shell_line_is_killed_with_its_whole_group(terminals, session, root):
    """The shell and what it started share the terminal's process group: kill ends them all."""
    line = f"sleep 60 & echo $! > {root}/bg.pid; tail -f /dev/null"
    async with asyncio.timeout(30):
        tid = await terminals.create(session, session, {"sessionId": "sess_1", "command": line})
        await eventually(lambda: (root / "bg.pid").exists() and (root / "bg.pid").read_text().strip())
        background = int((root / "bg.pid").read_text())
        pgid = terminals.terminals[tid].pgid
        assert pid_alive(background)
        await terminals.kill(session, tid)
        status = await terminals.wait_for_exit(session, tid)
    assert status["signal"] in ("SIGTERM", "SIGKILL")
    assert not pid_alive(background)
    await wait_group_gone(pgid)


async def test_allow_shell(session):
    terminals = LocalTerminals(allow_shell=True)
    try:
        out, _ = await run(terminals, session, params("echo hi | tr a-z A-Z"))
        assert out["output"] == "HI\n"
        out, _ = await run(terminals, session, params("printf '%s\\n'", "a b", "$HOME"))
        assert out["output"] == "a b\n$HOME\n"  # args are quoted, the command line is not
    finally:
        await terminals.aclose()


async def test_command_that_cannot_start(terminals, session, root):
    error = await error_of(terminals.create(session, session, params("definitely-not-a-command-xyz")))
    assert (error.code, error.data["reason"]) == (-32002, "command_not_found")
    (root / "not-executable").write_text("#!/bin/sh\necho hi\n")
    error = await error_of(terminals.create(session, session, params(str(root / "not-executable"))))
    assert (error.code, error.data["reason"]) == (-32602, "permission_denied")
    assert terminals.terminals == {}


@pytest.mark.parametrize(
    "bad",
    [
        {"command": ""},
        {"command": 3},
        {"command": "a\0b"},
        {"command": "true", "args": "x"},
        {"command": "true", "args": [1]},
        {"command": "true", "outputByteLimit": -1},
        {"command": "true", "outputByteLimit": True},
        {"command": "true", "outputByteLimit": 1.5},
    ],
)
async def test_invalid_params(terminals, session, bad):
    error = await error_of(terminals.create(session, session, {"sessionId": "sess_1", **bad}))
    assert error.code == -32602


# ---------------------------------------------------------------------- kill, release, ids


async def test_kill_keeps_the_terminal_until_release(terminals, session):
    tid = await terminals.create(session, session, params("sh", "-c", "echo started; exec sleep 60"))
    terminal = terminals.terminals[tid]
    await eventually(lambda: "started" in terminal.output_text(), what="output")
    await terminals.kill(session, tid)
    assert not pid_alive(terminal.pid)
    status = await terminals.wait_for_exit(session, tid)
    assert status == {"exitCode": None, "signal": "SIGTERM"}
    out = await terminals.output(session, tid)
    assert out == {"output": "started\n", "truncated": False, "exitStatus": status}
    await terminals.kill(session, tid)  # idempotent
    await terminals.release(session, tid)
    error = await error_of(terminals.output(session, tid))
    assert (error.code, error.data["reason"]) == (-32002, "released_terminal")
    assert f"terminal {tid} has been released" in error.message
    for method in ("wait_for_exit", "kill", "release"):
        error = await error_of(getattr(terminals, method)(session, tid))
        assert error.data["reason"] == "released_terminal"


async def test_kill_escalates_to_sigkill(session):
    terminals = LocalTerminals(kill_grace=0.2)
    try:
        tid = await terminals.create(
            session, session, params("sh", "-c", "trap '' TERM; echo ready; sleep 60 & wait")
        )
        terminal = terminals.terminals[tid]
        await eventually(lambda: "ready" in terminal.output_text(), what="trap set")
        await terminals.kill(session, tid)
        assert await terminals.wait_for_exit(session, tid) == {"exitCode": None, "signal": "SIGKILL"}
        assert live_members(terminal.pgid) == []
    finally:
        await terminals.aclose()


async def test_a_command_ignoring_sigterm_is_sigkilled_at_kill_grace_on_the_clock(session):
    """``kill_grace`` is measured on the service's clock: SIGKILL comes exactly then, not later
    (and the kill returns only once the group is gone)."""
    t0, grace = 1000.0, 3.0
    clock = FakeClock(t0)
    terminals = LocalTerminals(kill_grace=grace, clock=clock)
    try:
        tid = await terminals.create(
            session, session, params("sh", "-c", "trap '' TERM; echo ready; sleep 60 & wait")
        )
        terminal = terminals.terminals[tid]
        await eventually(lambda: "ready" in terminal.output_text(), what="trap set")
        killing = asyncio.ensure_future(terminals.kill(session, tid))
        await eventually(lambda: clock.deadlines == [t0 + grace], what="SIGTERM sent, SIGKILL due")
        clock.advance_to(t0 + grace - 0.001)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not killing.done()
        assert terminal.process.returncode is None  # it ignores SIGTERM: still running
        clock.advance_to(t0 + grace)
        async with asyncio.timeout(30):
            await killing
        assert await terminals.wait_for_exit(session, tid) == {"exitCode": None, "signal": "SIGKILL"}
        assert clock.t == t0 + grace  # no other wait of the clock's was needed
        assert live_members(terminal.pgid) == []
    finally:
        # Whatever failed, end everything: a kill waiting on the fake clock needs it moved on.
        closing = asyncio.ensure_future(terminals.aclose())
        while not closing.done():
            clock.advance(grace)
            await asyncio.sleep(0.01)


async def test_wait_for_exit_returns_when_killed_elsewhere(terminals, session):
    tid = await terminals.create(session, session, params("sleep", "60"))
    waiter = asyncio.create_task(terminals.wait_for_exit(session, tid))
    for _ in range(5):  # let the waiter get to its wait
        await asyncio.sleep(0)
    assert not waiter.done()
    await terminals.kill(session, tid)
    async with asyncio.timeout(30):
        assert (await waiter)["signal"] == "SIGTERM"


async def test_cancelling_wait_for_exit_leaves_the_terminal_alone(terminals, session):
    tid = await terminals.create(session, session, params("sleep", "60"))
    waiter = asyncio.create_task(terminals.wait_for_exit(session, tid))
    for _ in range(5):  # let the waiter get to its wait
        await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pid_alive(terminals.terminals[tid].pid)
    assert "exitStatus" not in await terminals.output(session, tid)
    await terminals.release(session, tid)


async def test_release_while_running_kills_the_whole_group(terminals, session):
    tid = await terminals.create(session, session, params("sh", "-c", "sleep 60 & sleep 60"))
    terminal = terminals.terminals[tid]
    await eventually(lambda: len(live_members(terminal.pgid)) == 3, what="grandchild")
    await terminals.release(session, tid)
    assert live_members(terminal.pgid) == []
    assert tid not in terminals.terminals
    await wait_group_gone(terminal.pgid)


async def test_exit_while_a_background_process_holds_the_output(terminals, session):
    tid = await terminals.create(session, session, params("sh", "-c", "sleep 60 & echo done"))
    terminal = terminals.terminals[tid]
    async with asyncio.timeout(30):
        status = await terminals.wait_for_exit(session, tid)
    assert status == {"exitCode": 0, "signal": None}
    assert (await terminals.output(session, tid))["output"] == "done\n"
    assert len(live_members(terminal.pgid)) == 1  # the background sleep, until release
    await terminals.release(session, tid)
    await wait_group_gone(terminal.pgid)


async def test_unknown_terminal_ids(terminals, session):
    error = await error_of(terminals.output(session, "term_nope"))
    assert isinstance(error, ServiceError)
    assert (error.code, error.reason) == (-32002, "unknown_terminal")
    assert error.message == "unknown terminal 'term_nope'"
    tid = await terminals.create(session, session, params("true"))
    other = FakeSession("sess_other", session.cwd)
    for method in ("output", "wait_for_exit", "kill", "release"):
        error = await error_of(getattr(terminals, method)(other, tid))
        assert error.data["reason"] == "unknown_terminal"
    await terminals.release(session, tid)


# ---------------------------------------------------------------------- owners


async def test_release_owner_kills_that_owner_only(terminals, session, root):
    other_session = FakeSession("sess_2", str(root))
    turn_a, turn_b = FakeTurn(session), FakeTurn(session)
    other_turn = FakeTurn(other_session)
    sleep = params("sh", "-c", "sleep 60 & sleep 60")
    ids = {
        "a1": await terminals.create(session, turn_a, sleep),
        "a2": await terminals.create(session, turn_a, sleep),
        "b": await terminals.create(session, turn_b, sleep),
        "session": await terminals.create(session, session, sleep),
        "other_turn": await terminals.create(other_session, other_turn, sleep),
        "other_session": await terminals.create(other_session, other_session, sleep),
    }
    groups = {name: terminals.terminals[tid].pgid for name, tid in ids.items()}
    await eventually(lambda: all(len(live_members(g)) == 3 for g in groups.values()), what="all started")

    def alive() -> set[str]:
        return {name for name, g in groups.items() if live_members(g)}

    await terminals.release_owner(turn_a)
    assert alive() == {"b", "session", "other_turn", "other_session"}
    assert ids["a1"] not in terminals.terminals
    error = await error_of(terminals.output(session, ids["a1"]))
    assert error.data["reason"] == "released_terminal"

    await terminals.release_owner(session)  # its own and its turns'
    assert alive() == {"other_turn", "other_session"}

    await terminals.release_owner(other_turn)
    assert alive() == {"other_session"}
    await terminals.release_owner(other_turn)  # idempotent
    await asyncio.gather(
        *(wait_group_gone(groups[name]) for name in ("a1", "a2", "b", "session", "other_turn"))
    )
    assert alive() == {"other_session"}


async def test_no_terminal_for_a_released_or_cancelled_owner(terminals, session):
    turn = FakeTurn(session)
    await terminals.release_owner(turn)
    error = await error_of(terminals.create(session, turn, params("sleep", "60")))
    assert isinstance(error, RequestCancelledError)
    cancelled = FakeTurn(session, cancel_requested=True)
    error = await error_of(terminals.create(session, cancelled, params("sleep", "60")))
    assert error.code == -32800
    assert terminals.pgids == []
    assert terminals.terminals == {}


@pytest.mark.both_loops
async def test_create_cancelled_midway_leaves_nothing(terminals, session):
    """Also on uvloop, whose cancelled ``connect_read_pipe`` closes the pipe's descriptor
    behind its file object (``aio.connect_read_pipe`` closes what the loop made instead)."""
    task = asyncio.create_task(terminals.create(session, session, params("sleep", "60")))
    await asyncio.sleep(0)  # spawned and registered; now awaiting the pipe
    (terminal,) = terminals.terminals.values()
    assert pid_alive(terminal.pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert terminals.terminals == {}
    assert live_members(terminal.pgid) == []
    stdout = terminal.process.popen.stdout
    await eventually(lambda: stdout.closed, what="the terminal's pipe closed, by its file object")


async def test_aclose_kills_everything_and_refuses_new_terminals(session):
    terminals = LocalTerminals(kill_grace=0.2)
    turn = FakeTurn(session)
    tids = [
        await terminals.create(session, turn, params("sh", "-c", "sleep 60 & sleep 60")),
        await terminals.create(session, session, params("sh", "-c", "trap '' TERM; sleep 60")),
    ]
    groups = [terminals.terminals[t].pgid for t in tids]
    async with asyncio.timeout(30):
        await terminals.aclose()
    assert terminals.terminals == {}
    for pgid in groups:
        assert live_members(pgid) == []
    error = await error_of(terminals.create(session, session, params("true")))
    assert error.data["reason"] == "closed"
    await terminals.aclose()  # idempotent
    await asyncio.gather(*(wait_group_gone(g) for g in groups))


async def test_many_terminals_at_once(terminals, session):
    results = await asyncio.gather(*(run(terminals, session, params("echo", str(i))) for i in range(20)))
    assert [out["output"] for out, _ in results] == [f"{i}\n" for i in range(20)]
    assert terminals.terminals == {}


async def test_terminal_cwd_is_the_resolved_root(tmp_path: Path, terminals):
    real = tmp_path / "real"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    session = FakeSession("s", str(alias))
    out, _ = await run(terminals, session, params("pwd", "-P"))
    assert out["output"] == f"{os.path.realpath(real)}\n"
