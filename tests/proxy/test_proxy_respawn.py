"""After the agent dies, the proxy starts another, replays the editor's ``initialize`` and
re-opens each session under its id (``session/resume`` where the agent has it, v2 always), so the
editor goes on without a restart; a session the agent cannot re-open is lost with a clear error."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from ..procs import descendants
from ..waiting import eventually
from .editor import AGENT, Editor

AGENTS = Path(__file__).with_name("agents")


def _text(prompt: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": prompt}]


def _agent_pid(editor: Editor) -> int:
    tree = descendants(editor.process.pid)
    assert len(tree) >= 2, tree  # the supervisor, then the agent
    return max(tree)


def _is_idle(message: dict[str, Any]) -> bool:
    update = message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
    return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"


@pytest.mark.parametrize("version", [1, 2])
async def test_a_killed_agent_is_restarted_and_the_session_goes_on(version: int) -> None:
    editor = await Editor.start(AGENT)
    try:
        sid = await editor.open_session(version)
        prompt = editor.request(
            "session/prompt", {"sessionId": sid, "prompt": _text("/stream 1 0\n/sleep 30000")}
        )
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first update")
        first = _agent_pid(editor)
        os.kill(first, signal.SIGKILL)
        if version == 1:
            _, answer = await editor.answer(prompt)
            assert answer["error"]["code"] == -32603, editor.report()  # no cancel asked: an error
        else:  # answered at insertion: the running work gets its idle
            await editor.wait_for(lambda m: _is_idle(m) and m["params"]["sessionId"] == sid, "the idle")
        await eventually(lambda: any("resumed" in line for line in editor.stderr), "the session resumed")
        second = _agent_pid(editor)
        assert second != first
        again = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("hello again")})
        if version == 1:
            _, answer = await editor.answer(again)
            assert answer["result"]["stopReason"] == "end_turn", editor.report()
        else:
            await editor.answer(again)
            await editor.wait_for(
                lambda m: _is_idle(m) and m["params"]["update"].get("stopReason") == "end_turn", "the idle"
            )
        texts = "".join(
            u["content"].get("text", "")
            for u in editor.updates(sid)
            if u.get("sessionUpdate") == "agent_message_chunk"
        )
        assert "hello again" in texts, editor.report()
        editor.tree = descendants(editor.process.pid)
        assert await editor.close() == 0
        editor.every_request_answered_once(range(1, again + 1))
        assert any("restarting the agent (1 of at most 3)" in line for line in editor.stderr), editor.report()
        assert "1 restarts, 1 sessions resumed" in editor.stderr[-1], editor.report()
        await editor.tree_gone()
    finally:
        await editor.aclose()


async def test_a_session_the_restarted_agent_cannot_reopen_is_lost_with_a_clear_error() -> None:
    editor = await Editor.start([sys.executable, str(AGENTS / "late_agent.py")])
    try:
        result = await editor.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert result["protocolVersion"] == 1
        await editor.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        os.kill(_agent_pid(editor), signal.SIGKILL)
        await eventually(lambda: any("lost" in line for line in editor.stderr), "the session lost")
        _, answer = await editor.answer(
            editor.request("session/prompt", {"sessionId": "s1", "prompt": _text("x")})
        )
        assert answer["error"]["code"] == -32603, editor.report()
        assert "session s1 was lost" in answer["error"]["message"], editor.report()
        assert "cannot resume sessions" in answer["error"]["message"], editor.report()
        # A new session on the restarted agent works.
        opened = await editor.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        assert opened["sessionId"] == "s1"  # this agent reuses its ids: the new one is not lost
        assert await editor.close() == 0
    finally:
        await editor.aclose()


async def test_an_agent_that_keeps_dying_is_restarted_at_most_max_respawns_times() -> None:
    editor = await Editor.start(AGENT, "--max-respawns", "1")
    try:
        await editor.open_session()
        os.kill(_agent_pid(editor), signal.SIGKILL)
        await eventually(lambda: any("resumed" in line for line in editor.stderr), "the session resumed")
        os.kill(_agent_pid(editor), signal.SIGKILL)
        assert await editor.exited() == 1, editor.report()
    finally:
        await editor.aclose()
