"""Every signal, at every moment of a command: SIGINT, SIGTERM and SIGHUP to the real CLI process
while the agent starts, while a turn runs, at the chat prompt and while the CLI shuts down.

Each test checks the exit code (128 + the signal), that no traceback is printed, and that the
agent (and the turn's terminal) is gone afterwards. The agents are real processes: the bundled
reference agent and ``agents/stub.py``, which misbehaves on demand (ignores stdin EOF or SIGTERM,
never answers ``initialize``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ..procs import pid_alive
from .clean import assert_clean

CLI = [sys.executable, "-m", "acp_driver"]
STUB = Path(__file__).parent / "agents" / "stub.py"


def stub(*options: str) -> str:
    return " ".join([sys.executable, str(STUB), *options])


def spawn_cli(
    *args: str, stdin: int | None = subprocess.DEVNULL, ignoring: Sequence[int] = ()
) -> subprocess.Popen[str]:
    """The CLI with ``args``; ``ignoring``: signals it starts with ignored (``nohup``, ``cmd &``)."""
    env = {**os.environ, "NO_COLOR": "1"}

    def ignore() -> None:  # in the child, before exec: an ignored signal stays ignored across it
        for sig in ignoring:
            signal.signal(sig, signal.SIG_IGN)

    return subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=stdin,
        text=True,
        env=env,
        preexec_fn=ignore if ignoring else None,
    )


def read_events(proc: subprocess.Popen[str], until: Any) -> list[dict[str, Any]]:
    """JSON lines from the CLI's stdout until ``until(event)``."""
    assert proc.stdout is not None
    events: list[dict[str, Any]] = []
    while True:
        line = proc.stdout.readline()
        assert line, f"the CLI ended before the expected event; got {events}"
        events.append(json.loads(line))
        if until(events[-1]):
            return events


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the CLI exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)
    return path.read_text()


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err


def gone(pid: int, timeout: float = 10) -> bool:
    """Whether ``pid`` is gone (or a zombie), polling up to ``timeout``; killed if not."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            return False
        time.sleep(0.02)
    return True


def group_gone(pgid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            os.killpg(pgid, signal.SIGKILL)
            return False
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_cancel_the_turn_like_ctrl_c(sig: signal.Signals, tmp_path: Path) -> None:
    """The turn is cancelled through the ladder, its terminal killed, the agent reaped; 128+N.

    The agent's terminal is a shell line without ``args`` (as Claude Code's adapters send)."""
    pidfile = tmp_path / "terminal.pid"
    agent = stub(
        "--terminal", f"'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; exec tail -f /dev/null'"
    )
    proc = spawn_cli("run", "--json", "--agent", agent, "x")
    events = read_events(proc, lambda e: e["type"] == "update")  # "terminal started"
    terminal = int(wait_for_file(pidfile, proc))
    assert pid_alive(terminal)
    proc.send_signal(sig)
    out, err = finish(proc)
    events += [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 128 + sig, err
    assert {"type": "cancel", "reason": sig.name} in events
    assert events[-1]["type"] == "result"
    assert events[-1]["resolution"] == "cancelled"
    assert "Traceback" not in err
    agent_pid = next(e["pid"] for e in events if e["type"] == "agent")
    assert group_gone(agent_pid)
    assert group_gone(terminal)  # the terminal's whole process group


@pytest.mark.parametrize("command", ["run", "chat"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_agent_initializes_aborts_at_once(
    sig: signal.Signals, command: str, tmp_path: Path
) -> None:
    """The agent never answers ``initialize`` and ignores stdin EOF and SIGTERM: the CLI does not
    wait for the 30 s initialize timeout; it exits 128+N at once, the agent is gone, and stderr
    has no traceback and no asyncio report of the abandoned ``initialize``."""
    pidfile = tmp_path / "agent.pid"
    agent_cmd = stub("--hang-initialize", "--ignore-eof", "--ignore-term", "--pidfile", str(pidfile))
    args = ["run", "--agent", agent_cmd, "x"] if command == "run" else ["chat", "--agent", agent_cmd]
    proc = spawn_cli(*args)
    agent = int(wait_for_file(pidfile, proc))
    proc.send_signal(sig)
    _out, err = finish(proc, timeout=25)  # well under the 30 s initialize timeout
    assert proc.returncode == 128 + sig, err
    assert_clean(err)
    what = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert f"error: {what} while the agent was starting: aborted" in err
    assert gone(agent)


def test_a_second_signal_while_the_agent_initializes_kills_it(tmp_path: Path) -> None:
    """The first Ctrl-C sends SIGTERM (ignored by this agent); the second one SIGKILL at once."""
    pidfile = tmp_path / "agent.pid"
    agent_cmd = stub("--hang-initialize", "--ignore-eof", "--ignore-term", "--pidfile", str(pidfile))
    proc = spawn_cli("run", "--json", "--agent", agent_cmd, "x")
    agent = int(wait_for_file(pidfile, proc))
    proc.send_signal(signal.SIGINT)
    events = read_events(proc, lambda e: e["type"] == "note")
    assert events[-1]["message"] == "stopping the agent (SIGTERM; signal again to kill it)"
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc)
    events += [json.loads(line) for line in out.splitlines()]
    assert {"type": "note", "message": "killing the agent (SIGKILL)"} in events
    assert events[-1] == {"type": "error", "message": "Ctrl-C while the agent was starting: aborted"}
    assert proc.returncode == 130, err
    assert_clean(err)
    assert gone(agent)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_once_the_agent_is_reaped_keeps_the_exit_code(sig: signal.Signals, tmp_path: Path) -> None:
    """From the turn's result to the CLI's exit, signals keep coming: while the agent is shut
    down each one acts on the agent (exit 128+N); once it is reaped none kills the CLI by the
    default action. Either way the exit is the promised code, never a death by the signal."""
    pidfile = tmp_path / "agent.pid"
    proc = spawn_cli("run", "--json", "--agent", stub("--pidfile", str(pidfile)), "hello")
    read_events(proc, lambda e: e["type"] == "result")
    agent = int(pidfile.read_text())
    sent = 0
    while proc.poll() is None:  # a signal every millisecond until the CLI has exited
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        sent += 1
        time.sleep(0.001)
    _out, err = finish(proc)
    assert sent > 0
    assert proc.returncode in (0, 128 + sig), (proc.returncode, err)  # never -sig: killed by it
    assert_clean(err)
    assert gone(agent)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_check_keeps_its_exit_code_when_a_signal_comes_at_its_end(sig: signal.Signals) -> None:
    """Once the audit's document is out (every agent reaped), a storm of signals until exit:
    the exit is the audit's code (or 128+N if one came before the end), never a death by it."""
    proc = spawn_cli("check", "--json", "--timeout", "1.5", "--busy-prompt", "hello")
    assert proc.stdout is not None
    assert proc.stdout.read(1) == "{"  # the document is written at the end, all at once
    sent = 0
    while proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        sent += 1
        time.sleep(0.001)
    _out, err = finish(proc)
    assert sent > 0
    assert proc.returncode in (6, 128 + sig), (proc.returncode, err)
    assert_clean(err)


def test_ctrl_c_during_shutdown_never_orphans_the_agent(tmp_path: Path) -> None:
    """After the turn the CLI closes the agent's stdin and waits; this agent ignores EOF and
    SIGTERM. A Ctrl-C then must not interrupt the shutdown: no traceback, the agent is killed."""
    pidfile = tmp_path / "agent.pid"
    agent_cmd = stub("--ignore-eof", "--ignore-term", "--pidfile", str(pidfile))
    proc = spawn_cli("run", "--json", "--agent", agent_cmd, "hello")
    # Once the result is written the CLI goes straight (no await between) into the shutdown, so
    # the signal is handled during it: stdin closed, up to 1 s, SIGTERM (ignored), 1 s, SIGKILL.
    read_events(proc, lambda e: e["type"] == "result")
    agent = int(pidfile.read_text())
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert gone(agent)
    notes = [json.loads(line)["message"] for line in out.splitlines()]
    assert notes == ["stopping the agent (SIGTERM; signal again to kill it)"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_chat_ends_on_a_signal_at_the_prompt(sig: signal.Signals, tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    proc = spawn_cli(
        "chat", "--agent", stub("--ignore-eof", "--pidfile", str(pidfile)), stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    proc.stdin.write("first\n")
    proc.stdin.flush()
    assert proc.stdout is not None
    assert proc.stdout.readline() == "first\n"
    assert proc.stderr is not None
    while "turn completed" not in proc.stderr.readline():  # then the chat waits for a line
        pass
    agent = int(pidfile.read_text())
    proc.send_signal(sig)
    _out, err = finish(proc)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert gone(agent)


def test_sigterm_during_a_chat_turn_cancels_it_and_ends_the_chat(tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    proc = spawn_cli("chat", "--agent", stub("--pidfile", str(pidfile)), stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write("/sleep\n")
    proc.stdin.flush()
    assert proc.stdout is not None
    assert proc.stdout.readline() == "sleeping\n"  # the turn runs
    agent = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    _out, err = finish(proc)
    assert proc.returncode == 143, err
    assert "cancelling the turn (SIGTERM)" in err
    assert "turn cancelled" in err
    assert "Traceback" not in err
    assert gone(agent)


def test_check_obeys_sigterm(tmp_path: Path) -> None:
    """``check`` mid-audit: the audit is cancelled, its agent reaped, exit 143, no traceback."""
    pidfile = tmp_path / "agent.pid"
    proc = spawn_cli("check", "--json", "--", *stub("--ignore-eof", "--pidfile", str(pidfile)).split())
    agent = int(wait_for_file(pidfile, proc))
    proc.send_signal(signal.SIGTERM)
    _out, err = finish(proc)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert gone(agent)


def test_closing_the_terminal_window_mid_turn(tmp_path: Path) -> None:
    """The real SIGHUP: the CLI runs on a pseudo-terminal that it controls, and the terminal goes
    away mid-turn. The kernel sends SIGHUP; every write to the terminal fails from then on. The
    turn is still cancelled, the agent reaped, and the exit code is 129."""
    import fcntl
    import pty
    import termios

    pidfile = tmp_path / "agent.pid"
    leader, follower = pty.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm"}
    proc = subprocess.Popen(
        [*CLI, "run", "--agent", stub("--pidfile", str(pidfile)), "/sleep"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
        preexec_fn=controlling_terminal,
    )
    os.close(follower)
    seen = b""
    try:
        while b"sleeping" not in seen:
            seen += os.read(leader, 65536)
    finally:
        os.close(leader)  # the window closes: SIGHUP to the CLI, its terminal is gone
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 129
    assert gone(int(pidfile.read_text()))


def test_no_traceback_on_ctrl_c_while_run_reads_its_prompt() -> None:
    """``run`` without PROMPT reads stdin first (no agent yet): Ctrl-C there exits 130 quietly."""
    proc = spawn_cli("run", stdin=subprocess.PIPE)
    wchan = Path(f"/proc/{proc.pid}/wchan")
    deadline = time.monotonic() + 60
    try:
        while "pipe_read" not in wchan.read_text():  # blocked reading the prompt from stdin
            if time.monotonic() > deadline:
                pytest.skip(f"cannot tell when the CLI reads stdin (wchan: {wchan.read_text()!r})")
            time.sleep(0.01)
    except OSError:
        pytest.skip("no /proc/PID/wchan")
    proc.send_signal(signal.SIGINT)
    _out, err = finish(proc)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err == ""


def test_no_traceback_on_ctrl_c_to_the_reference_agent() -> None:
    proc = spawn_cli("agent", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1  # serving
    proc.send_signal(signal.SIGINT)
    _out, err = finish(proc)
    assert proc.returncode == -signal.SIGINT  # killed by SIGINT: a shell reports 130
    assert err == ""
