"""A remote agent behind the proxy (``-- ws://…``, ``-- http://…``): ``acp-driver serve`` runs
the reference agent; the editor cancels a turn the agent ignores, and gets ``cancelled`` within the
budget; the proxy's ladder closes, then aborts, the connection (the server reaps the agent) and
connects again with the session resumed."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator

import pytest

from acp_driver.remote import serve_command

from ..waiting import eventually
from .editor import Editor

pytestmark = pytest.mark.timeout(120)

BUDGET = 2.0
AGENT = [sys.executable, "-m", "acp_driver", "agent", "--behavior", "ignore-cancel"]


@pytest.fixture
async def server_url() -> AsyncIterator[str]:
    server = await serve_command(AGENT, port=0)
    try:
        yield server.url
    finally:
        await server.aclose()


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_a_remote_agent_behind_the_proxy_is_cancelled_within_the_budget(
    server_url: str, scheme: str
) -> None:
    url = server_url if scheme == "http" else "ws" + server_url[len("http") :]
    editor = await Editor.start([url], "--cancel-budget", str(BUDGET))
    try:
        sid = await editor.open_session()
        prompt = editor.request(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "/stream 1 0\n/sleep 30000"}]},
        )
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first chunk")
        cancelled_at = time.monotonic()
        editor.notify("session/cancel", {"sessionId": sid})
        at, answer = await editor.answer(prompt)
        assert answer["result"]["stopReason"] == "cancelled", editor.report()
        assert at - cancelled_at <= BUDGET + 0.5, editor.report()
        await eventually(lambda: any("resumed" in line for line in editor.stderr), "the session resumed")
        _, again = await editor.answer(
            editor.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        )
        assert again["result"]["stopReason"] == "end_turn", editor.report()
        assert await editor.close() == 0
        editor.every_request_answered_once(range(1, prompt + 2))
    finally:
        await editor.aclose()


async def test_a_lost_connection_is_the_agents_end() -> None:
    server = await serve_command([sys.executable, "-m", "acp_driver", "agent"], port=0)
    editor = await Editor.start([server.url])
    try:
        sid = await editor.open_session()
        prompt = editor.request(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "/stream 1 0\n/sleep 30000"}]},
        )
        await editor.wait_for(lambda m: m.get("method") == "session/update", "the first chunk")
        await server.aclose()  # the server goes away: the connection is lost
        _, answer = await editor.answer(prompt)
        assert answer["error"]["code"] == -32603, editor.report()
        assert await editor.exited(40) == 1, editor.report()  # reconnecting fails: no server
        assert any("restarting the agent (3 of at most 3)" in line for line in editor.stderr), editor.report()
        assert any("did not accept initialize" in line for line in editor.stderr), editor.report()
    finally:
        await editor.aclose()
        await server.aclose()
