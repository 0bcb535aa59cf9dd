"""What ``run`` and ``chat`` report is what happened: who cancelled a turn the ladder had to end by
force, who closed a permission question, the session mode asked for, answers kept apart. Real
processes: the CLI, the reference agent, ``agents/stub.py`` and ``quirky_agent.py`` (and, for a
race a subprocess cannot hit on purpose, the CLI's permission policy in process)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_driver.aio import current_request
from acp_driver.cli._permissions import Permissions
from acp_driver.cli._render import Output
from acp_driver.driver import ClientServices, PermissionRequest, launch

from .clean import assert_clean, one_error_line
from .test_check import QUIRKY
from .test_check_v2 import QUIRKY_V2
from .test_cli import AGENT, CLI, group_gone, json_lines, run
from .test_tty import base_env

STUB = Path(__file__).parent / "agents" / "stub.py"


@pytest.mark.parametrize(
    ("behavior", "grace", "step"),
    [("ignore-cancel", "1", "terminate"), ("hang", "0.4", "kill")],
    ids=["terminated", "killed"],
)
def test_a_turn_the_ladder_ended_by_force_was_cancelled_by_the_host(
    behavior: str, grace: str, step: str
) -> None:
    result = run(
        "run",
        "--json",
        "--turn-timeout",
        "0.3",
        "--cancel-grace",
        grace,
        "--agent",
        f"{AGENT} --behavior {behavior}",
        "/sleep 30000",
    )
    assert result.returncode == 124, result.stderr
    assert_clean(result.stderr)
    events = json_lines(result.stdout)
    last = events[-1]
    assert last["cancel"]["resolvedBy"] == step
    assert last["resolution"] in ("killed", "agent_exited")
    assert last["cancelledBy"] == "host"  # not null: this host's cancel ended it
    assert group_gone(next(e["pid"] for e in events if e["type"] == "agent"))


def test_an_unasked_stop_is_not_called_the_hosts() -> None:
    result = run("run", "--json", "/stop end_turn")
    assert json_lines(result.stdout)[-1]["cancelledBy"] is None


def permission_on_pty(agent: str, withdraw: Path | None) -> tuple[int, str]:
    """Run on a terminal; when the question is on screen, withdraw it (the agent) or press Ctrl-C."""
    import pty
    import signal

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "run", "--agent", agent, "x"], stdin=follower, stdout=follower, stderr=follower, env=base_env()
    )
    os.close(follower)
    seen = b""
    acted = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                if not acted and b"choose 1-2" in seen:
                    acted = True
                    if withdraw is not None:
                        withdraw.write_text("now")
                    else:
                        proc.send_signal(signal.SIGINT)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return code, seen.decode("utf-8", "replace")


def test_a_question_the_agent_withdraws_is_said_withdrawn_by_the_agent(tmp_path: Path) -> None:
    tool = tmp_path / "tool.json"
    tool.write_text(json.dumps({"toolCallId": "p1", "title": "Write x.txt", "kind": "edit"}))
    flag = tmp_path / "withdraw"
    code, text = permission_on_pty(
        f"{sys.executable} {STUB} --permission-from {tool} --withdraw-when {flag}", flag
    )
    assert code == 0, text
    assert "permission request withdrawn by the agent" in text
    assert "(the turn was cancelled)" not in text
    assert "Traceback" not in text


class _Said(Output):
    """The CLI's output, as what it says of permission questions."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def permission(self, request: PermissionRequest, outcome: dict[str, Any], how: str) -> None:
        self.said.append(f"{outcome.get('outcome')} ({how})")

    def note(self, message: str) -> None:
        self.said.append(message)


class _NoAnswer:
    async def readline(self) -> str | None:
        await asyncio.Event().wait()
        return None


async def test_a_question_the_agent_withdraws_in_answer_to_our_cancel_is_said_cancelled(
    tmp_path: Path,
) -> None:
    """The CLI's question is open; its turn is cancelled and the agent's withdrawal is read before
    the question has unwound (the race of ``tests/driver/test_reference_behaviors.py::
    test_a_withdrawal_read_while_the_cancel_unwinds_still_gets_cancelled``, hit the same way): the
    agent is answered ``cancelled``, and the CLI says the turn was cancelled -- not that the agent
    withdrew the question (in process: the CLI's policy object, the driver, the reference agent)."""
    said = _Said()
    opts = argparse.Namespace(yes=False, deny=False)
    policy = Permissions(opts, said, lambda: _NoAnswer())  # type: ignore[arg-type, return-value]
    asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def asking(request: PermissionRequest) -> dict[str, Any]:
        ctx = current_request()
        assert ctx is not None
        asked.set_result(ctx.id)
        return await policy(request)

    async with asyncio.timeout(60):
        agent = await launch(
            [sys.executable, "-m", "acp_driver", "agent"], services=ClientServices(permission=asking)
        )
        async with agent:
            session = await agent.new_session(tmp_path)
            turn = session.prompt("/permission")
            asked_id = await asked
            cancelling = asyncio.ensure_future(turn.cancel())
            await asyncio.sleep(0)  # session/cancel sent, the question cancelled, not yet unwound
            withdrawal = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": asked_id}}
            agent.connection.feed_messages([json.dumps(withdrawal).encode()])
            await cancelling
    assert said.said == ["cancelled (the turn was cancelled)"]


def quirky_log(log: Path) -> list[str]:
    return [json.loads(line).get("method") for line in log.read_text().splitlines()]


@pytest.mark.parametrize("command", ["run", "chat"])
def test_mode_sets_the_session_mode_before_the_first_prompt(command: str, tmp_path: Path) -> None:
    """An agent that asks permission only in mode ``ask`` (as claude-agent-acp runs tools unasked
    in its default mode): ``--mode ask`` makes it ask."""
    log = tmp_path / "log.jsonl"
    agent = f"{' '.join(QUIRKY)} --ask-mode ask --log {log}"
    args = ["run", "--json", "--deny", "--mode", "ask", "--agent", agent, "permission"]
    if command == "chat":
        args = ["chat", "--deny", "--mode", "ask", "--agent", agent]
    result = subprocess.run(
        [*CLI, *args],
        input="permission\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert_clean(result.stderr)
    methods = [m for m in quirky_log(log) if m is not None]
    assert methods.index("session/set_mode") < methods.index("session/prompt")
    if command == "run":
        perm = next(e for e in json_lines(result.stdout) if e["type"] == "permission")
        assert perm["decidedBy"] == "--deny"
    else:
        assert "permission Write x.txt: Reject (--deny)" in result.stderr
        assert "mode: ask" in result.stderr


def test_a_mode_the_agent_refuses_is_one_line_exit_1() -> None:
    result = run("run", "--mode", "yolo", "--agent", f"{sys.executable} {STUB}", "hi")
    assert result.returncode == 1, result.stderr
    line = one_error_line(result.stderr.split("\n", 1)[1])  # after the "agent: ..." line
    assert line.startswith("error: --mode yolo: session/set_mode failed: no session/set_mode")
    assert line.endswith("the agent offered no modes")


def test_run_mode_in_v2_sets_the_mode_config_option_as_the_schema_types_it() -> None:
    """v2 has no modes: ``--mode`` sets the ``mode`` config option, a value of ``"type": "id"`` (the
    schema's SetSessionConfigOptionRequest requires it; claude-agent-acp answers -32602 without)."""
    agent = " ".join([*QUIRKY_V2, "--ask-mode", "ask"])
    result = run(
        "run", "--json", "--protocol", "2", "--mode", "ask", "--deny", "--agent", agent, "/permission"
    )
    assert result.returncode == 0, result.stderr
    perm = next(e for e in json_lines(result.stdout) if e["type"] == "permission")
    assert perm["decidedBy"] == "--deny"  # it asked: the mode was set


def test_a_mode_a_v2_agent_refuses_says_what_was_sent_and_what_it_offers() -> None:
    agent = " ".join([*QUIRKY_V2, "--ask-mode", "ask"])
    result = run("run", "--protocol", "2", "--mode", "yolo", "--agent", agent, "hi")
    assert result.returncode == 1, result.stderr
    line = one_error_line(result.stderr.split("\n", 1)[1])  # after the "agent: ..." line
    assert line.startswith(
        'error: --mode yolo: session/set_config_option (configId "mode", type "id", value \'yolo\') failed: '
    ), line
    assert "set_mode" not in line
    assert line.endswith("the agent offers: default, ask"), line


def test_chat_off_a_terminal_keeps_answers_apart() -> None:
    """The quirky agent answers "hello" without a line feed: two turns are two lines."""
    result = subprocess.run(
        [*CLI, "chat", "--agent", " ".join(QUIRKY)],
        input="hello\nhello\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello\nhello\n"


def test_run_off_a_terminal_keeps_the_answer_exact() -> None:
    result = run("run", "--agent", " ".join(QUIRKY), "hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello"  # what the agent sent, nothing added
