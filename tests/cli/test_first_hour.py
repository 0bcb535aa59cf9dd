"""What a new user meets in the first hour of ``run`` and ``chat``: every update in ``--json``
(v2's ``state_update`` included), the session id printed and ``--session`` continuing it, chat's
local ``/help``, ``--turn-timeout`` in chat, a plan redrawn in place on a terminal, and the time
spent answering a permission question kept out of the turn's."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_driver.cli._controller import Controller
from acp_driver.cli._render import Output

from ..fakeclock import FakeClock
from .test_cli import CLI, json_lines, run
from .test_tty import base_env, run_on_pty

AGENTS = Path(__file__).resolve().parent / "agents"


def wire(trace: Path, direction: str, method: str | None = None) -> list[dict[str, Any]]:
    """The messages of a ``--trace`` file sent one way (``out``: to the agent), by method."""
    found = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") != "wire" or event.get("dir") != direction or "msg" not in event:
            continue
        if method is None or event["msg"].get("method") == method:
            found.append(event["msg"])
    return found


def session_line(stderr: str) -> str:
    found = re.findall(r"^session: (\S+) \(continue it with --session (\S+)\)$", stderr, re.M)
    assert len(found) == 1, stderr
    assert found[0][0] == found[0][1]
    return found[0][0]


# ---------------------------------------------------------------------- --json: every update


@pytest.mark.parametrize("version", ["1", "2"])
def test_json_emits_every_update_of_the_session_in_wire_order(tmp_path: Path, version: str) -> None:
    trace = tmp_path / "t.ndjson"
    done = run("run", "--json", "--protocol", version, "--trace", str(trace), "/plan\n/stream 2 0")
    assert done.returncode == 0, done.stderr
    events = json_lines(done.stdout)
    updates = [e["update"] for e in events if e["type"] == "update"]
    sent = [m["params"]["update"] for m in wire(trace, "in", "session/update")]
    assert updates == sent  # each one, once, in the order read
    kinds = [u["sessionUpdate"] for u in updates]
    if version == "2":  # no turn yields them: the session's listener does
        assert "state_update" in kinds
        states = [u.get("state") for u in updates if u["sessionUpdate"] == "state_update"]
        assert states[0] == "running"
        assert states[-1] == "idle"
    assert events[-1]["type"] == "result"


# ---------------------------------------------------------------------- --session


@pytest.mark.parametrize("version", ["1", "2"])
def test_the_session_id_is_printed_and_a_later_run_continues_it(tmp_path: Path, version: str) -> None:
    first = run("run", "--protocol", version, "hello")
    assert first.returncode == 0, first.stderr
    sid = session_line(first.stderr)
    trace = tmp_path / "t.ndjson"
    again = run("run", "--protocol", version, "--session", sid, "--trace", str(trace), "--json", "again")
    assert again.returncode == 0, again.stderr
    events = json_lines(again.stdout)
    assert [e["sessionId"] for e in events if e["type"] == "session"] == [sid]
    assert wire(trace, "out", "session/new") == []
    resumed = wire(trace, "out", "session/resume")  # the reference agent advertises resume
    assert [m["params"]["sessionId"] for m in resumed] == [sid]
    prompts = wire(trace, "out", "session/prompt")
    assert [m["params"]["sessionId"] for m in prompts] == [sid]


def test_session_load_when_the_agent_advertises_only_load(tmp_path: Path) -> None:
    trace = tmp_path / "t.ndjson"
    agent = f"{sys.executable} {AGENTS / 'sessions_agent.py'} --load"
    done = run("run", "--agent", agent, "--session", "sess_kept", "--trace", str(trace), "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "sess_kept: hello"  # the replayed history is not the turn's answer
    assert [m["params"]["sessionId"] for m in wire(trace, "out", "session/load")] == ["sess_kept"]
    assert wire(trace, "out", "session/resume") == []
    assert session_line(done.stderr) == "sess_kept"


def test_an_agent_that_cannot_continue_a_session_is_a_start_error() -> None:
    agent = f"{sys.executable} {AGENTS / 'sessions_agent.py'}"
    done = run("run", "--agent", agent, "--session", "sess_kept", "hello")
    assert done.returncode == 1
    assert (
        "error: --session sess_kept: the agent advertises neither session/resume nor session/load"
        in done.stderr
    )
    assert done.stdout == ""


def test_an_empty_session_id_is_a_usage_error() -> None:
    done = run("run", "--session", " ", "hello")
    assert done.returncode == 2
    assert "--session is empty" in done.stderr


# ---------------------------------------------------------------------- chat


def chat(*args: str, lines: str) -> subprocess.CompletedProcess[str]:
    """``acp-driver chat`` with ``lines`` piped in."""
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [*CLI, "chat", *args], input=lines, capture_output=True, text=True, timeout=60, env=env
    )


def test_chat_help_is_answered_here_and_never_sent(tmp_path: Path) -> None:
    trace = tmp_path / "t.ndjson"
    done = chat("--trace", str(trace), lines="/help\n//help\n")
    assert done.returncode == 0, done.stderr
    assert "/help        this help (answered here, not sent to the agent)" in done.stderr
    prompts = [m["params"]["prompt"][0]["text"] for m in wire(trace, "out", "session/prompt")]
    assert prompts == ["/help"]  # only the escaped one, with one slash less


def test_chat_continues_a_session_too(tmp_path: Path) -> None:
    trace = tmp_path / "t.ndjson"
    done = chat("--session", "sess_from_yesterday", "--trace", str(trace), lines="hello\n")
    assert done.returncode == 0, done.stderr
    assert session_line(done.stderr) == "sess_from_yesterday"
    assert [m["params"]["sessionId"] for m in wire(trace, "out", "session/resume")] == ["sess_from_yesterday"]
    assert [m["params"]["sessionId"] for m in wire(trace, "out", "session/prompt")] == ["sess_from_yesterday"]


def test_chat_turn_timeout_cancels_one_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    done = chat("--turn-timeout", "0.5", lines="/sleep 60000\nhello\n")
    assert done.returncode == 0, done.stderr
    results = [line for line in done.stderr.splitlines() if line.startswith("turn ")]
    assert len(results) == 2, done.stderr
    assert results[0].startswith("turn cancelled (stop reason cancelled; cancelled by this host")
    assert results[1].startswith("turn completed (stop reason end_turn")
    assert "cancelling the turn (turn timeout)" in done.stderr
    assert done.stdout.endswith("hello\n")


def test_chat_refuses_a_turn_timeout_that_is_not_positive() -> None:
    done = run("chat", "--turn-timeout", "0")
    assert done.returncode == 2
    assert "--turn-timeout must be positive" in done.stderr


# ---------------------------------------------------------------------- the plan


def test_a_plan_is_redrawn_in_place_on_a_terminal() -> None:
    env = {**base_env(), "NO_COLOR": "1", "ACP_DRIVER_PROTOCOL": "1"}
    code, seen = run_on_pty(["run", "/plan"], {}, env)
    text = seen.decode()
    assert code == 0, text
    # The reference agent's plan: three entries, then three updates of it. Each update moves
    # up the plan's 4 rows, clears them, and draws the plan again there.
    assert text.count("\x1b[4F\x1b[J") == 3
    redraws = text.split("\x1b[4F\x1b[J")
    assert all(part.startswith("plan\r\n") for part in redraws[1:])
    assert redraws[-1].startswith(
        "plan\r\n  [x] Read the code\r\n  [x] Make the change\r\n  [x] Run the tests"
    )


def test_off_a_terminal_a_plan_update_is_the_lines_that_changed() -> None:
    done = run("run", "/plan")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    start = lines.index("plan")
    assert lines[start : start + 7] == [
        "plan",
        "  [ ] Read the code",
        "  [ ] Make the change",
        "  [ ] Run the tests",
        "plan: [x] Read the code",
        "plan: [x] Make the change",
        "plan: [x] Run the tests",
    ]
    assert "\x1b" not in done.stderr


# ---------------------------------------------------------------------- the user's time


class _Turn:
    """What the controller uses of a turn: whether it is over, and its cancel."""

    def __init__(self) -> None:
        self.done = False
        self.cancelled = 0

    async def cancel(self) -> None:
        self.cancelled += 1


async def test_the_turn_timeout_stops_while_the_user_is_asked() -> None:
    clock = FakeClock()
    controller = Controller(Output(), clock=clock)
    turn = _Turn()
    controller.start(turn, 2.0)  # type: ignore[arg-type]
    clock.advance_to(clock.t + 1.5)
    controller.asking(True)  # a permission question: the user thinks for a minute
    assert clock.deadlines == []
    clock.advance_to(clock.t + 60.0)
    assert controller.reason is None
    controller.asking(False)
    assert controller.user_time == 60.0
    assert clock.deadlines == [clock.t + 0.5]  # the 0.5 s the turn had left
    clock.advance_to(clock.t + 0.49)
    assert controller.reason is None
    clock.advance_to(clock.t + 0.01)
    assert controller.reason == "timeout"
    await asyncio.sleep(0)  # the cancel task runs
    assert turn.cancelled == 1


async def test_questions_at_once_count_their_time_once() -> None:
    clock = FakeClock()
    controller = Controller(Output(), clock=clock)
    controller.start(_Turn(), None)  # type: ignore[arg-type]
    controller.asking(True)
    clock.advance_to(clock.t + 3.0)
    controller.asking(True)
    clock.advance_to(clock.t + 2.0)
    controller.asking(False)
    assert controller.user_time == 0.0
    clock.advance_to(clock.t + 1.0)
    controller.asking(False)
    assert controller.user_time == 6.0
    controller.start(_Turn(), None)  # type: ignore[arg-type]
    assert controller.user_time == 0.0  # per turn


def test_the_result_line_says_the_time_spent_answering_apart() -> None:
    env = {**base_env(), "NO_COLOR": "1", "ACP_DRIVER_PROTOCOL": "1"}
    code, seen = run_on_pty(["run", "/permission"], {b"choose 1-": b"1\r"}, env)
    text = seen.decode()
    assert code == 0, text
    found = re.search(
        r"turn completed \(stop reason end_turn; (\d+\.\d\d) s, plus (\d+\.\d\d) s waiting for your answer\)",
        text,
    )
    assert found, text


# ---------------------------------------------------------------------- a command not on PATH


@pytest.mark.parametrize("command", ["run", "check"])
def test_an_agent_command_not_on_path_is_said_so(command: str) -> None:
    args = (
        ["run", "--agent", "acp-no-such-agent", "hi"]
        if command == "run"
        else ["check", "--", "acp-no-such-agent"]
    )
    done = run(*args)
    assert done.returncode == 1, done.stderr
    assert (
        "no 'acp-no-such-agent' on PATH; give the command's full path, or put its directory on PATH"
        in done.stderr
    )
