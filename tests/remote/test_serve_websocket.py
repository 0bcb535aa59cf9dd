"""The WebSocket profile against real agents: turns, both cancels, and the ladder when the client goes."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
import websockets

from acp_driver.agent import Agent, Turn
from acp_driver.core import Rung

from ..waiting import eventually
from . import serving
from .serving import AGENTS, REFERENCE, WsClient, pid_gone, text_prompt

make_server = serving.make_server  # the fixture


async def test_prompt_streams_updates_then_the_answer(make_server: Any) -> None:
    server = await make_server()
    async with WsClient.connect(server.url) as client:
        headers = client.ws.response.headers
        assert headers["acp-connection-id"] in server.connections
        assert (
            headers["set-cookie"]
            == f"acp_affinity={server.settings.instance}; Path=/; HttpOnly; SameSite=Lax"
        )
        sid = await client.open_session()
        rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 3 0")})
        answer, before = await client.answer_of(rid)
        assert answer["result"] == {"stopReason": "end_turn"}
        chunks = [
            m["params"]["update"]["content"]["text"] for m in before if m.get("method") == "session/update"
        ]
        assert chunks == ["chunk 1/3\n", "chunk 2/3\n", "chunk 3/3\n"]


async def test_session_cancel_ends_the_turn_cancelled(make_server: Any) -> None:
    server = await make_server()
    async with WsClient.connect(server.url) as client:
        sid = await client.open_session()
        rid = await client.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 1000 20")}
        )
        await client.until(lambda m: m.get("method") == "session/update")
        await client.notify("session/cancel", {"sessionId": sid})
        answer, _ = await client.answer_of(rid)
        assert answer["result"] == {"stopReason": "cancelled"}


async def test_cancel_request_ends_the_prompt(make_server: Any) -> None:
    server = await make_server()
    async with WsClient.connect(server.url) as client:
        sid = await client.open_session()
        rid = await client.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 1000 20")}
        )
        await client.until(lambda m: m.get("method") == "session/update")
        await client.notify("$/cancel_request", {"requestId": rid})
        answer, _ = await client.answer_of(rid)
        assert answer["result"] == {"stopReason": "cancelled"}


async def test_text_that_is_not_a_message_gets_an_error_and_the_connection_lives(make_server: Any) -> None:
    server = await make_server()
    async with WsClient.connect(server.url) as client:
        await client.ws.send("{not json")
        error = await client.next()
        assert error["error"]["code"] == -32700
        await client.ws.send("[1, 2]")
        error = await client.next()
        assert error["error"]["code"] == -32600
        await client.ws.send(b"\x00binary is ignored")
        # A pretty-printed message (newlines between tokens) still reaches the NDJSON agent whole.
        await client.ws.send(
            '{"jsonrpc": "2.0",\n "id": 7,\n "method": "initialize",\n "params": {"protocolVersion": 1}}'
        )
        answer = await client.next()
        assert answer["id"] == 7
        assert answer["result"]["protocolVersion"] == 1


async def _live_turn(server: Any, client: WsClient, prompt: str) -> tuple[Any, int]:
    """Start a turn that is still running; returns the server's connection and the agent's pid."""
    sid = await client.open_session()
    await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt(prompt)})
    if prompt.startswith("/stream"):
        await client.until(lambda m: m.get("method") == "session/update")
    else:
        await eventually(
            lambda: next(iter(server.connections.values())).inflight.prompts(), "the prompt in flight"
        )
    (conn,) = server.connections.values()
    return conn, conn.backend.pid


async def test_closing_the_websocket_mid_turn_cancels_it_and_reaps_the_agent(make_server: Any) -> None:
    server = await make_server()
    async with WsClient.connect(server.url) as client:
        conn, pid = await _live_turn(server, client, "/stream 100000 10")
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(pid)
    # session/cancel was enough: the polite agent answered cancelled, read EOF and exited.
    assert [rung for _, rung in conn.ladder.taken] == [Rung.SESSION_CANCEL]
    assert conn.inflight.prompts() == []


async def test_a_killed_client_socket_mid_turn_reaps_the_agent(make_server: Any) -> None:
    # An agent silent after its first update: nothing but the socket's loss can end the connection.
    server = await make_server([sys.executable, str(AGENTS / "stubborn.py"), "cancel-request"])
    async with WsClient.connect(server.url) as client:
        conn, pid = await _live_turn(server, client, "/stream 1 0")
        client.ws.transport.abort()  # no close frame: the TCP connection just drops
        await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(pid)
    assert conn.inflight.prompts() == []


@pytest.mark.parametrize(("behavior", "last_rung"), [("ignore-cancel", Rung.TERMINATE), ("hang", Rung.KILL)])
async def test_an_agent_that_ignores_the_cancel_is_killed_within_the_budget(
    make_server: Any, behavior: str, last_rung: Rung
) -> None:
    budget = 1.0
    server = await make_server([*REFERENCE, "--behavior", behavior], cancel_budget=budget)
    async with WsClient.connect(server.url) as client:
        conn, pid = await _live_turn(server, client, "/stream 100000 10" if behavior != "hang" else "hello")
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(pid)
    rungs = [rung for _, rung in conn.ladder.taken]
    assert rungs[-1] is last_rung, rungs
    assert Rung.CANCEL_REQUEST in rungs
    # Reaped by the budget (plus a generous margin for a loaded machine: no timing test may flake).
    assert conn.ladder.elapsed is not None
    assert conn.ladder.elapsed <= budget + 3.0


@pytest.mark.parametrize(
    ("mode", "rungs"),
    [
        # Ignores session/cancel, honours $/cancel_request: resolved at the second rung, then EOF.
        ("cancel-request", [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST]),
        # Ignores both cancels and its end of input: SIGTERM ends it.
        ("deaf", [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST, Rung.TERMINATE]),
    ],
)
async def test_each_rung_is_taken_only_when_the_one_before_did_not_work(
    make_server: Any, mode: str, rungs: list[Rung]
) -> None:
    server = await make_server([sys.executable, str(AGENTS / "stubborn.py"), mode], cancel_budget=1.0)
    async with WsClient.connect(server.url) as client:
        conn, pid = await _live_turn(server, client, "/stream 1 0")
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(pid)
    assert [rung for _, rung in conn.ladder.taken] == rungs
    # What the agent got from the server, in order, after the client went:
    assert conn.backend.process.returncode == (0 if mode == "cancel-request" else -15)


class _Asker(Agent):
    """Asks for permission and records what the client (or the server for it) answered."""

    def __init__(self, outcomes: list[Any], asked: asyncio.Event) -> None:
        self.outcomes = outcomes
        self.asked = asked

    async def prompt(self, turn: Turn) -> str:
        call = await turn.tool_call("edit a file", kind="edit")
        request = asyncio.ensure_future(turn.request_permission(call))
        request.add_done_callback(
            lambda f: self.outcomes.append(f.result() if not f.cancelled() and f.exception() is None else f)
        )
        self.asked.set()
        await asyncio.shield(request)
        return "end_turn"


async def test_a_pending_permission_is_answered_cancelled_when_the_client_goes(make_server: Any) -> None:
    outcomes: list[Any] = []
    asked = asyncio.Event()
    server = await make_server(agent=lambda: _Asker(outcomes, asked))
    async with WsClient.connect(server.url) as client:
        sid = await client.open_session()
        await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("go")})
        await client.until(lambda m: m.get("method") == "session/request_permission")
        (conn,) = server.connections.values()
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert outcomes == [{"outcome": "cancelled"}]


class _Reader(Agent):
    """Asks the client to read a file; records the error it gets."""

    def __init__(self, errors: list[Any]) -> None:
        self.errors = errors

    async def prompt(self, turn: Turn) -> str:
        request = asyncio.ensure_future(
            turn.request("fs/read_text_file", {"sessionId": turn.session.id, "path": "/x"})
        )
        request.add_done_callback(lambda f: self.errors.append(None if f.cancelled() else f.exception()))
        await asyncio.shield(request)
        return "end_turn"


async def test_the_agents_other_pending_requests_get_an_error_when_the_client_goes(make_server: Any) -> None:
    errors: list[Any] = []
    server = await make_server(agent=lambda: _Reader(errors))
    async with WsClient.connect(server.url) as client:
        sid = await client.open_session()
        await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("go")})
        await client.until(lambda m: m.get("method") == "fs/read_text_file")
        (conn,) = server.connections.values()
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert len(errors) == 1
    assert errors[0] is not None
    assert "cancelled" in str(errors[0])


async def test_in_process_agent_serves_a_turn(make_server: Any) -> None:
    from acp_driver.reference_agent import ReferenceAgent

    server = await make_server(agent=ReferenceAgent)
    async with WsClient.connect(server.url) as client:
        sid = await client.open_session()
        rid = await client.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 2 0")})
        answer, before = await client.answer_of(rid)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert len([m for m in before if m.get("method") == "session/update"]) == 2
    assert sys.modules["acp_driver.remote._inprocess"]


async def test_an_agent_that_cannot_start_refuses_the_connection_with_500(make_server: Any) -> None:
    server = await make_server(["/nonexistent/agent"])
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with WsClient.connect(server.url):
            pass
    assert refused.value.response.status_code == 500
    assert b"cannot start" in refused.value.response.body
    assert server.connections == {}


async def test_an_agent_that_exits_on_its_own_closes_the_websocket_1011(make_server: Any) -> None:
    exits = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"]
    server = await make_server(exits)
    async with WsClient.connect(server.url) as client:
        (conn,) = server.connections.values()
        await client.request("initialize", {"protocolVersion": 1})
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1011
        assert "exit status 3" in client.ws.close_reason
    await asyncio.wait_for(conn.wait_ended(), 30)


async def test_an_agent_that_does_not_read_its_input_is_bounded(make_server: Any) -> None:
    deaf = [sys.executable, "-c", "import time; time.sleep(600)"]
    server = await make_server(deaf, max_buffered_bytes=300_000, cancel_budget=1.0)
    async with WsClient.connect(server.url) as client:
        (conn,) = server.connections.values()
        note = {"jsonrpc": "2.0", "method": "_x/note", "params": {"data": "x" * 50_000}}
        with pytest.raises(websockets.ConnectionClosed):
            await _flood(client, note, 1000)  # 50 MB if nothing stopped it
        assert client.ws.close_code == 1008
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert "does not read its input" in (conn.end_reason or "")
    assert pid_gone(conn.backend.pid)


async def _flood(client: WsClient, message: dict[str, Any], count: int) -> None:
    for _ in range(count):
        await client.send(message)
    await client.next()


SURROGATE_AGENT = [sys.executable, str(AGENTS / "surrogate_agent.py")]


async def test_lone_surrogates_are_relayed_both_ways(make_server: Any) -> None:
    """Valid JSON that orjson refuses (lone-surrogate escapes, as JavaScript writes them) crosses
    the relay both ways, unchanged; the prompt's answer reaches the client."""
    server = await make_server(argv=SURROGATE_AGENT)
    async with WsClient.connect(server.url) as client:
        session = await client.open_session()
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "X"}]}
        raw = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": prompt})
        text = raw.replace('"X"', '"a\\udc01"')
        await client.ws.send(text)
        answer, before = await client.answer_of(99)
        assert answer["result"] == {"stopReason": "end_turn", "_meta": {"note": "\udfff"}}
        (update,) = before
        assert update["params"]["update"]["content"]["text"] == "a\udc01\ud800"
        # A frame with raw newlines between tokens is re-encoded for the NDJSON agent: its text
        # stays as it came.
        await client.ws.send(text.replace('"id": 99', '"id": 100').replace(", ", ",\n "))
        answer, before = await client.answer_of(100)
        assert before[0]["params"]["update"]["content"]["text"] == "a\udc01\ud800"
