"""The proxy's other guarantees, each against a real agent process: one answer per request both
ways, permissions never left open, late output fenced, stalls bounded, forwarding unchanged."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .editor import AGENT, Editor

AGENTS = Path(__file__).with_name("agents")
SLACK = 0.5


def _text(prompt: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": prompt}]


def _is_request(method: str) -> Any:
    return lambda m: m.get("method") == method and "id" in m


async def test_a_request_the_editor_withdrew_is_answered_once_when_the_agent_does_not() -> None:
    editor = await Editor.start(
        [*AGENT, "--behavior", "no-answer-on-cancel-request"], "--answer-grace", "0.5"
    )
    try:
        await editor.open_session()
        sleeper = editor.request("_acp_driver/sleep", {"ms": 2000})
        withdrawn_at = time.monotonic()
        editor.notify("$/cancel_request", {"requestId": sleeper})
        at, answer = await editor.answer(sleeper)
        assert answer["error"]["code"] == -32800, editor.report()
        assert at - withdrawn_at <= 0.5 + SLACK, editor.report()
        # The agent's own answer comes at 2 s: dropped (a later sleep's answer comes after it).
        echo = editor.request("_acp_driver/sleep", {"ms": 2100})
        await editor.answer(echo)
        editor.every_request_answered_once([sleeper, echo])
        assert await editor.close() == 0
        await editor.tree_gone()
    finally:
        await editor.aclose()


async def test_a_permission_left_open_after_the_editors_cancel_is_closed_both_ways(tmp_path: Path) -> None:
    trace = tmp_path / "proxy.trace"
    # An agent that ignores session/cancel does not withdraw its question itself either.
    editor = await Editor.start(
        [*AGENT, "--behavior", "ignore-cancel"], "--permission-grace", "0.3", "--trace", str(trace)
    )
    try:
        sid = await editor.open_session()
        prompt = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("/permission")})
        _, asked = await editor.wait_for(_is_request("session/request_permission"), "the permission request")
        cancelled_at = time.monotonic()
        editor.notify("session/cancel", {"sessionId": sid})  # ... and the editor never answers it
        at, withdrawal = await editor.wait_for(
            lambda m: m.get("method") == "$/cancel_request", "the withdrawal"
        )
        assert withdrawal["params"]["requestId"] == asked["id"]
        assert 0.3 - 0.05 <= at - cancelled_at <= 0.3 + SLACK, editor.report()
        _, answer = await editor.answer(prompt)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        # A late answer of the editor's is dropped: the agent had its one answer.
        editor.send({"id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
        assert await editor.close() == 0
        assert any("left permission request" in line for line in editor.stderr), editor.report()
    finally:
        await editor.aclose()
    entries = [json.loads(line) for line in trace.read_text().splitlines()]
    to_agent = [(e["t"], e["msg"]) for e in entries if e.get("dir") == "out" and "msg" in e]
    (cancel_at,) = [t for t, m in to_agent if m.get("method") == "session/cancel"]
    answers = [(t, m) for t, m in to_agent if m.get("id") == asked["id"] and "method" not in m]
    assert len(answers) == 1, to_agent
    answered_at, answer = answers[0]
    assert answer["result"]["outcome"]["outcome"] == "cancelled", to_agent
    # Answered at the grace, by the guard (not later, when the connection ended).
    assert answered_at - cancel_at <= 0.3 + SLACK, to_agent


async def test_a_cancelled_turns_late_output_is_fenced_and_session_updates_pass() -> None:
    editor = await Editor.start([sys.executable, str(AGENTS / "late_agent.py")])
    try:
        result = await editor.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert result["protocolVersion"] == 1
        first = editor.request("session/prompt", {"sessionId": "s1", "prompt": _text("one")})
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first chunk")
        editor.notify("session/cancel", {"sessionId": "s1"})
        _, answer = await editor.answer(first)
        assert answer["result"]["stopReason"] == "cancelled"
        await editor.wait_for(_is_request("_late/done"), "the agent's marker")
        second = editor.request("session/prompt", {"sessionId": "s1", "prompt": _text("two")})
        await editor.answer(second)
        texts = [u.get("content", {}).get("text") for u in editor.updates("s1")]
        assert texts == ["first turn", None, "second turn"], editor.report()
        assert editor.updates("s1")[1] == {"sessionUpdate": "session_info_update", "title": "still here"}
        await editor.close()
    finally:
        await editor.aclose()


async def test_a_silent_turn_is_cancelled_after_the_silence_timeout() -> None:
    editor = await Editor.start(AGENT, "--silence-timeout", "0.5")
    try:
        sid = await editor.open_session()
        sent_at = time.monotonic()
        prompt = editor.request("session/prompt", {"sessionId": sid, "prompt": _text("/sleep 30000")})
        at, answer = await editor.answer(prompt)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        assert 0.5 - 0.05 <= at - sent_at <= 0.5 + SLACK, editor.report()
        assert await editor.close() == 0
        assert any("nothing from the agent for 0.5 s" in line for line in editor.stderr), editor.report()
    finally:
        await editor.aclose()


async def test_everything_else_is_forwarded_unchanged() -> None:
    editor = await Editor.start(AGENT)
    try:
        await editor.open_session()
        params = {"a": [1, "ü", None], "_meta": {"x": {"y": 1}}}
        assert await editor.call("_acp_driver/echo", params) == params
        _, unknown = await editor.answer(editor.request("no/such_method", {}))
        assert unknown["error"]["code"] == -32601, editor.report()
        assert await editor.close() == 0
        editor.every_request_answered_once(range(1, 5))
    finally:
        await editor.aclose()


async def test_when_the_agent_dies_every_open_request_is_answered_and_the_proxy_exits_1() -> None:
    editor = await Editor.start(AGENT, "--max-respawns", "0")
    try:
        sid = await editor.open_session()
        prompt = editor.request(
            "session/prompt", {"sessionId": sid, "prompt": _text("/stream 1 0\n/sleep 30000")}
        )
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first chunk")
        agent = max(editor.tree)  # the supervisor's child: started after it
        os.kill(agent, signal.SIGKILL)
        _, answer = await editor.answer(prompt)
        assert answer["error"]["code"] == -32603, editor.report()
        assert "the agent ended" in answer["error"]["message"], editor.report()
        assert await editor.exited() == 1
        editor.every_request_answered_once(range(1, prompt + 1))
        await editor.tree_gone()
    finally:
        await editor.aclose()
