"""A real agent behind ``acp-driver proxy``: claude-agent-acp 0.101.0 in its ``v1`` mode, offline on
the fake model API (``fake_anthropic.py``), driven the way an editor drives the proxy (raw NDJSON,
``tests/proxy/editor.py``): a streamed turn; a cancel mid-stream; a permission request (a ``Bash``
tool in ``default`` mode) left open by the editor after its cancel, which the proxy answers
``cancelled`` and withdraws; then a SIGKILL of the agent mid-session, after which the proxy starts
it again and the session goes on. No claude process is left."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ..procs import descendants
from ..proxy.editor import Editor
from ..waiting import eventually
from .fake_anthropic import Endless, FakeAnthropic, ToolUse, Words
from .installs import NpmAgent
from .test_v2_claude_agent import DROP, TOUCH, by_marker, claude_env, claude_processes

SLEEPY = {"command": "sleep 30 && touch slept.txt", "description": "Wait, then create a file"}

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

BUDGET = 4.0


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic()
    await fake.start()
    yield fake
    await fake.close()


def _text(prompt: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": prompt}]


def _chunks(editor: Editor, sid: str) -> list[str]:
    return [
        u["content"].get("text", "")
        for u in editor.updates(sid)
        if u.get("sessionUpdate") == "agent_message_chunk"
    ]


def _agent_pid(editor: Editor) -> int:
    """The supervisor's child: the agent's launcher (its tree dies with it)."""
    children = {pid: descendants(pid) for pid in descendants(editor.process.pid)}
    supervisor = min(children)
    return min(pid for pid in descendants(supervisor))


async def test_claude_behind_the_proxy(claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path) -> None:
    model.decide = by_marker(
        {
            "FIVE": Words("a", 5),
            "FOREVER": Endless("b"),
            "TOUCH": ToolUse("Bash", TOUCH),
            "SLEEPY": ToolUse("Bash", SLEEPY),
        }
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(DROP)},
        **claude_env(tmp_path / "home", model, "v1"),
    }
    editor = await Editor.start(
        list(claude_agent.argv),
        "--cancel-budget",
        str(BUDGET),
        "--permission-grace",
        "0.5",
        env=env,
        cwd=tmp_path,
    )
    try:
        sid = await editor.open_session(1, cwd=str(tmp_path))
        # A streamed turn.
        _, answer = await editor.answer(
            editor.request("session/prompt", {"sessionId": sid, "prompt": _text("say FIVE words")})
        )
        assert answer["result"]["stopReason"] == "end_turn", editor.report()
        assert _chunks(editor, sid)[:5] == ["a0 ", "a1 ", "a2 ", "a3 ", "a4 "], editor.report()
        # A cancel mid-stream.
        before = len(_chunks(editor, sid))
        forever = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("talk FOREVER")})
        await eventually(
            lambda: len(_chunks(editor, sid)) >= before + 3, "three chunks", details=editor.report
        )
        cancelled_at = time.monotonic()
        editor.notify("session/cancel", {"sessionId": sid})
        at, answer = await editor.answer(forever)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        assert at - cancelled_at <= BUDGET + 0.5, editor.report()
        # A cancel while a shell tool runs (a new session runs tools unasked): the turn ends
        # cancelled within the budget, and the command never gets to its end.
        sleepy = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("run SLEEPY")})
        await editor.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") in ("tool_call", "tool_call_update")
            ),
            "the shell tool to start",
        )
        cancelled_at = time.monotonic()
        editor.notify("session/cancel", {"sessionId": sid})
        at, answer = await editor.answer(sleepy)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        assert at - cancelled_at <= BUDGET + 0.5, editor.report()
        assert not (tmp_path / "slept.txt").exists()
        # A permission left open after the editor's cancel: the proxy closes it both ways.
        await editor.call("session/set_mode", {"sessionId": sid, "modeId": "default"})
        touch = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("TOUCH a file")})
        _, asked = await editor.wait_for(
            lambda m: m.get("method") == "session/request_permission" and "id" in m, "the permission request"
        )
        editor.notify("session/cancel", {"sessionId": sid})
        await editor.wait_for(
            lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked["id"],
            "the withdrawal of the permission request",
        )
        _, answer = await editor.answer(touch)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        assert not (tmp_path / "made-by-agent.txt").exists()
        # The agent killed mid-session: restarted, the session re-opened.
        os.kill(_agent_pid(editor), signal.SIGKILL)
        await eventually(
            lambda: any("resumed" in line or "lost" in line for line in editor.stderr),
            "the session resumed (or lost)",
            timeout=60,
            details=editor.report,
        )
        assert any("resumed" in line for line in editor.stderr), editor.report()
        before = len(_chunks(editor, sid))
        _, answer = await editor.answer(
            editor.request("session/prompt", {"sessionId": sid, "prompt": _text("say FIVE words")})
        )
        assert answer["result"]["stopReason"] == "end_turn", editor.report()
        assert "a0 " in _chunks(editor, sid)[before:], editor.report()
        assert await editor.close(60) == 0, editor.report()
    finally:
        await editor.aclose()
    await eventually(lambda: not claude_processes(), "no claude process left")
