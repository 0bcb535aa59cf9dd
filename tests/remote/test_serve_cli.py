"""``acp-driver serve`` as a process: the ready line, a relay that survives garbage, and
SIGTERM/SIGINT ending every connection through the ladder with every agent reaped (one inherited
ignored stays ignored)."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from ..procs import signals_ignored
from ..waiting import eventually
from .serving import (
    AGENTS,
    INIT_PARAMS,
    HttpClient,
    ServeProcess,
    WsClient,
    descendants,
    pid_gone,
    text_prompt,
)


async def test_ready_line_and_both_profiles_on_one_port() -> None:
    async with ServeProcess.start() as serve:
        assert serve.url.startswith("http://127.0.0.1:")
        assert serve.url.endswith("/acp")
        async with WsClient.connect(serve.url) as client:
            sid = await client.open_session()
            rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("hi")})
            answer, _ = await client.answer_of(rid)
            assert answer["result"] == {"stopReason": "end_turn"}
        async with HttpClient.connect(serve.url) as http:
            response = await http.initialize()
            assert response.json()["result"]["agentInfo"]["name"] == "acp-driver-reference-agent"
            assert (await http.delete()).status_code == 202
        await eventually(lambda: descendants(serve.process.pid) == [], "every agent to be reaped")


async def test_instance_name_in_the_affinity_cookie() -> None:
    async with ServeProcess.start("--instance", "backend-7") as serve, WsClient.connect(serve.url) as client:
        assert client.ws.response.headers["set-cookie"].startswith("acp_affinity=backend-7;")


async def test_a_relay_survives_garbage_from_the_agent() -> None:
    garbage = [sys.executable, str(AGENTS / "garbage_agent.py")]
    async with ServeProcess.start("--", *garbage) as serve, WsClient.connect(serve.url) as client:
        # Each answer follows a line that is not JSON: the line is dropped (and logged), the
        # relay goes on, and nothing but messages reaches the client.
        answers = []
        for method in ("initialize", "session/new", "_x/anything"):
            await client.request(method, INIT_PARAMS)
            answers.append(await client.next())
        assert [a["result"]["method"] for a in answers] == ["initialize", "session/new", "_x/anything"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_a_signal_ends_every_connection_and_reaps_every_agent(signum: int) -> None:
    async with ServeProcess.start(
        "--cancel-budget", "1", "--", sys.executable, "-m", "acp_driver", "agent", "--behavior", "hang"
    ) as serve:
        async with WsClient.connect(serve.url) as a, HttpClient.connect(serve.url) as http:
            sid = await a.open_session()
            await a.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("hello")})
            await http.initialize()
            await eventually(
                lambda: len(descendants(serve.process.pid)) >= 4, "two agents (and their supervisors)"
            )
            agents = descendants(serve.process.pid)
            serve.process.send_signal(signum)
            code = await asyncio.wait_for(serve.process.wait(), 60)
        assert code == 0, serve.lines
        # Reaped before the exit: nothing of them is left, not even for a moment after.
        assert [pid for pid in agents if not pid_gone(pid)] == []


async def test_serve_keeps_an_inherited_ctrl_c_ignore() -> None:
    """``acp-driver serve &`` in a script starts with SIGINT ignored: a Ctrl-C to the script's
    process group is not for it. The server goes on serving; SIGTERM still ends it."""
    async with ServeProcess.start(ignoring=(signal.SIGINT,)) as serve:
        assert signal.SIGINT in signals_ignored(serve.process.pid)  # ready: its handlers are set
        serve.process.send_signal(signal.SIGINT)
        async with WsClient.connect(serve.url) as client:
            sid = await client.open_session()
            rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("hi")})
            answer, _ = await client.answer_of(rid)
            assert answer["result"] == {"stopReason": "end_turn"}
            agents = descendants(serve.process.pid)
            assert agents
            serve.process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(serve.process.wait(), 60)
    assert code == 0, serve.lines
    assert [pid for pid in agents if not pid_gone(pid)] == []


async def test_sigterm_with_a_client_that_never_answers_the_close_frame_is_quiet() -> None:
    """The server's close frame is never answered (a raw client that stops reading): hypercorn
    cancels that connection at its graceful timeout; the agent is reaped, the exit is 0 and
    stderr holds no traceback."""
    async with ServeProcess.start() as serve:
        port = int(serve.url.rsplit(":", 1)[1].split("/", 1)[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET /acp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 101")
        await eventually(lambda: len(descendants(serve.process.pid)) >= 2, "the agent (and its supervisor)")
        agents = descendants(serve.process.pid)
        serve.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(serve.process.wait(), 60)
        writer.close()
    assert code == 0, serve.lines
    assert [pid for pid in agents if not pid_gone(pid)] == []
    text = "\n".join(serve.lines)
    assert "Traceback" not in text
    assert "Exception in callback" not in text
