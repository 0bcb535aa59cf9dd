"""A cancel through ``acp-driver proxy`` lands, whatever the agent behind it does.

The editor's ``session/cancel`` starts the ladder; the editor's turn ends ``cancelled`` (v1: the
prompt's answer; v2: an idle ``state_update``, or a held prompt withdrawn) within the budget, by
the clock of this test, against every misbehaving reference agent; every request is answered
exactly once; nothing of the agent is left once the proxy exited.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .editor import AGENT, Editor

BUDGET = 2.0
SLACK = 0.5
SLEEPY = "/stream 1 0\n/sleep 30000"

CASES = [
    (1, "polite"),
    (1, "ignore-cancel"),
    (1, "hang"),
    (1, "end-turn-on-cancel"),
    (1, "error-on-cancel"),
    (2, "polite"),
    (2, "ignore-cancel"),
    (2, "hang"),
    (2, "end-turn-on-cancel"),
    (2, "never-idle"),
]


def _text(prompt: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": prompt}]


def _ended_cancelled(version: int, sid: str, prompt_id: int) -> Any:
    def ended(message: dict[str, Any]) -> bool:
        if "method" not in message and message.get("id") == prompt_id:
            if version == 1:
                return True
            return "error" in message  # v2: a held prompt withdrawn ends it too
        update = (
            message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
        )
        return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"

    return ended


@pytest.mark.parametrize(("version", "behavior"), CASES, ids=[f"v{v}-{b}" for v, b in CASES])
async def test_the_editors_cancel_lands_within_the_budget(version: int, behavior: str) -> None:
    editor = await Editor.start([*AGENT, "--behavior", behavior], "--cancel-budget", str(BUDGET))
    try:
        sid = await editor.open_session(version)
        prompt = editor.request("session/prompt", {"sessionId": sid, "prompt": _text(SLEEPY)})
        if behavior != "hang":  # a hung agent says nothing: the cancel goes out at once
            await editor.wait_for(
                lambda m: m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk",
                "the turn's first chunk",
            )
        cancelled_at = time.monotonic()
        editor.notify("session/cancel", {"sessionId": sid})
        at, end = await editor.wait_for(_ended_cancelled(version, sid, prompt), "the turn's end")
        assert at - cancelled_at <= BUDGET + SLACK, editor.report()
        if "result" in end:
            assert end["result"]["stopReason"] == "cancelled", editor.report()
        elif "error" in end:
            assert end["error"]["code"] == -32800, editor.report()
        else:
            assert end["params"]["update"]["stopReason"] == "cancelled", editor.report()
        code = await editor.close()
        assert code in (0, 1), editor.report()  # 1: the ladder ended the agent (no respawn yet)
        editor.every_request_answered_once(range(1, prompt + 1))
        assert editor.stderr[-1].startswith("acp-driver proxy: exit:"), editor.report()
        await editor.tree_gone()
    finally:
        await editor.aclose()


async def test_an_agent_that_ends_a_cancelled_turn_with_end_turn_is_rewritten_and_the_trace_keeps_it(
    tmp_path: Any,
) -> None:
    trace = tmp_path / "proxy.trace"
    editor = await Editor.start([*AGENT, "--behavior", "end-turn-on-cancel"], "--trace", str(trace))
    try:
        sid = await editor.open_session(1)
        prompt = editor.request("session/prompt", {"sessionId": sid, "prompt": _text(SLEEPY)})
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first chunk")
        editor.notify("session/cancel", {"sessionId": sid})
        _, answer = await editor.answer(prompt)
        assert answer["result"]["stopReason"] == "cancelled"
        assert await editor.close() == 0
    finally:
        await editor.aclose()
    entries = [json.loads(line) for line in trace.read_text().splitlines()]
    said = [e for e in entries if "rewritten" in e.values()]
    assert said, entries
    assert said[0]["agent_said"] == "end_turn", entries
    wire = json.dumps(entries)
    assert "end_turn" in wire  # what the agent really answered
    assert any("rewritten" in line for line in editor.stderr), editor.report()
