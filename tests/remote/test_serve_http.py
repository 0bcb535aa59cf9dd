"""The Streamable HTTP profile: the RFD's routing table, streams, buffering, and the ladder on DELETE."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from pathlib import Path
from typing import Any

import orjson

from acp_driver.agent import Agent, Session, Turn
from acp_driver.core import Rung

from ..waiting import eventually
from . import serving
from .serving import AGENTS, REFERENCE, HttpClient, pid_gone, text_prompt

make_server = serving.make_server  # the fixture


async def _session(http: HttpClient) -> str:
    await http.initialize()
    await http.open_stream()
    rid = await http.request("session/new", {"cwd": "/", "mcpServers": []})
    answer, _ = await http.answer_of(rid)  # on the connection stream
    sid: str = answer["result"]["sessionId"]
    await http.open_stream(sid)
    assert http.stream_status == {None: 200, sid: 200}
    return sid


async def test_initialize_answers_200_with_the_connection_id_and_the_cookie(make_server: Any) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        response = await http.initialize()
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["protocolVersion"] == 1
        assert response.headers["acp-connection-id"] in server.connections
        assert (
            response.headers["set-cookie"]
            == f"acp_affinity={server.settings.instance}; Path=/; HttpOnly; SameSite=Lax"
        )


async def test_prompt_streams_on_the_session_stream_and_cancel_ends_it(make_server: Any) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        rid = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 3 0")}, sid
        )
        answer, before = await http.answer_of(rid, sid)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [m["params"]["update"]["content"]["text"] for m in before] == [
            "chunk 1/3\n",
            "chunk 2/3\n",
            "chunk 3/3\n",
        ]
        rid = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 1000 20")}, sid
        )
        await http.next(sid)
        await http.notify("session/cancel", {"sessionId": sid}, sid)
        answer, _ = await http.answer_of(rid, sid)
        assert answer["result"] == {"stopReason": "cancelled"}
        rid = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 1000 20")}, sid
        )
        await http.next(sid)
        await http.notify("$/cancel_request", {"requestId": rid})
        answer, _ = await http.answer_of(rid, sid)
        assert answer["result"] == {"stopReason": "cancelled"}


async def test_a_permission_request_comes_on_the_session_stream_and_its_answer_is_posted(
    make_server: Any,
) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        rid = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/permission")}, sid
        )
        ask = None
        while ask is None:
            message = await http.next(sid)
            if message.get("method") == "session/request_permission":
                ask = message
        option = ask["params"]["options"][0]["optionId"]
        reply = {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option}},
        }
        assert (await http.post(reply)).status_code == 202
        answer, before = await http.answer_of(rid, sid)
        assert answer["result"] == {"stopReason": "end_turn"}
        texts = [
            m["params"]["update"].get("content", {}) for m in before if m.get("method") == "session/update"
        ]
        assert any(
            isinstance(t, dict) and "permission outcome: selected" in t.get("text", "") for t in texts
        ), before


async def test_messages_wait_for_their_stream(make_server: Any) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        rid = await http.request("session/new", {"cwd": "/", "mcpServers": []})
        (conn,) = server.connections.values()
        await eventually(lambda: conn.inflight.sessions, "the session to be created")
        await http.open_stream()  # after the answer was sent: it waited
        answer, _ = await http.answer_of(rid)
        assert "sessionId" in answer["result"]


async def test_a_stream_nobody_reads_is_bounded(make_server: Any) -> None:
    """The agent is paused once the stream's room is full (never more than the limit waits),
    and a client that reads none of it is ended after the idle timeout."""
    server = await make_server(max_buffered_bytes=4000, idle_timeout=0.5)
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        (conn,) = server.connections.values()
        http.streams[sid]  # opened, but: close it and let the agent stream into the buffer
        for task in http._tasks:
            task.cancel()
        await eventually(lambda: conn.streams_open == 0, "the streams to close")
        await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 100000 0")}, sid
        )
        await eventually(lambda: conn.paused_since is not None, "the agent's output paused")
        await asyncio.wait_for(conn.wait_ended(), 30)
        # Not "... is not read (over 4000 bytes waiting)": the paused agent kept the room's
        # limit. Which idle rule ends it first depends on how long the agent took to fill the
        # room (on a loaded machine, over 0.5 s after the prompt: the plain idle rule).
        assert conn.end_reason in (
            "the client read none of the agent's output for 0.5 s",
            "idle for 0.5 s",
        ), conn.end_reason
        assert pid_gone(conn.backend.pid)


async def test_a_line_bigger_than_the_room_of_a_stream_nobody_reads_ends_the_connection(
    make_server: Any,
) -> None:
    """Pausing the agent cannot help when one line alone is bigger than what may wait for the
    stream: the connection ends, naming the stream and the bound, rather than buffer past it."""
    server = await make_server(max_buffered_bytes=4000, idle_timeout=60)
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        (conn,) = server.connections.values()
        for task in http._tasks:  # the session's stream closed: nobody reads what the turn sends
            task.cancel()
        await eventually(lambda: conn.streams_open == 0, "the streams to close")
        await http.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("x" * 6000)}, sid)
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert conn.end_reason == f"the stream of session {sid} is not read (over 4000 bytes waiting)"
        assert pid_gone(conn.backend.pid)


async def test_idle_streams_carry_keepalive_comments(make_server: Any) -> None:
    server = await make_server(keepalive=0.05)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        await http.open_stream()
        await eventually(lambda: http.keepalives >= 2, "keepalive comments")


async def test_delete_mid_turn_cancels_it_and_reaps_the_agent(make_server: Any) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 100000 10")}, sid
        )
        await http.next(sid)
        (conn,) = server.connections.values()
        assert (await http.delete()).status_code == 202
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert pid_gone(conn.backend.pid)
        assert [rung for _, rung in conn.ladder.taken] == [Rung.SESSION_CANCEL]
        assert (await http.post({"jsonrpc": "2.0", "method": "x"})).status_code == 404
        assert (await http.delete()).status_code == 404


async def test_dropped_streams_then_idle_end_the_connection_through_the_ladder(make_server: Any) -> None:
    server = await make_server([*REFERENCE, "--behavior", "hang"], idle_timeout=0.5, cancel_budget=1.0)
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        await http.request("session/prompt", {"sessionId": sid, "prompt": text_prompt("hello")}, sid)
        (conn,) = server.connections.values()
        await eventually(lambda: conn.inflight.prompts(), "the prompt in flight")
    # The client vanished without a DELETE (its streams dropped): the idle timeout ends it.
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert "idle" in (conn.end_reason or "")
    assert [rung for _, rung in conn.ladder.taken][-1] is Rung.KILL
    assert pid_gone(conn.backend.pid)


async def test_an_agent_streaming_to_nobody_does_not_keep_a_vanished_client_alive(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.5, cancel_budget=1.0)
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 100000 5")}, sid
        )
        await http.next(sid)  # streaming
        (conn,) = server.connections.values()
    # The client vanished without a DELETE while its agent streams on: no stream is open, so
    # the agent's output reaches nobody and must not count as activity; the idle timeout ends it.
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert "idle" in (conn.end_reason or "")
    assert pid_gone(conn.backend.pid)


def _post(http: HttpClient, body: bytes, headers: dict[str, str]) -> Any:
    return http.client.post(http.url, content=body, headers=headers)


async def test_the_routing_table_statuses(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    init = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    json_h = {"Content-Type": "application/json"}
    async with HttpClient.connect(server.url) as http:
        assert (await _post(http, init, {"Content-Type": "text/plain"})).status_code == 415
        assert (await _post(http, b"x" * 1001, json_h)).status_code == 413
        assert (await _post(http, b"{oops", json_h)).status_code == 400
        assert (await _post(http, b"[" + init + b"]", json_h)).status_code == 501
        assert (await _post(http, b'"text"', json_h)).status_code == 400
        notification = orjson.dumps(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
        )
        assert (await _post(http, notification, json_h)).status_code == 400  # no connection id
        assert (await _post(http, notification, {**json_h, "Acp-Connection-Id": "nope"})).status_code == 404
        sid = await _session(http)
        cid = http.connection_id
        assert cid is not None
        with_conn = {**json_h, "Acp-Connection-Id": cid}
        # A session-scoped method without Acp-Session-Id, and with one the connection does not know.
        assert (await _post(http, notification, with_conn)).status_code == 400
        assert (
            await _post(http, notification, {**with_conn, "Acp-Session-Id": "unknown"})
        ).status_code == 404
        assert (await _post(http, notification, {**with_conn, "Acp-Session-Id": sid})).status_code == 202
        sse = {"Accept": "text/event-stream"}
        get = http.client.get
        assert (
            await get(http.url, headers={"Accept": "application/json", "Acp-Connection-Id": cid})
        ).status_code == 406
        assert (await get(http.url, headers=sse)).status_code == 400
        assert (await get(http.url, headers={**sse, "Acp-Connection-Id": "nope"})).status_code == 404
        assert (
            await get(http.url, headers={**sse, "Acp-Connection-Id": cid, "Acp-Session-Id": "nope"})
        ).status_code == 404
        assert (
            await get(http.url, headers={**sse, "Acp-Connection-Id": cid})
        ).status_code == 409  # already open
        assert (await http.client.request("DELETE", http.url)).status_code == 400
        assert (await http.client.put(http.url, content=init, headers=json_h)).status_code == 405
        assert (
            await http.client.post(http.url.replace("/acp", "/other"), content=init, headers=json_h)
        ).status_code == 404


async def test_http2_cleartext_prior_knowledge(make_server: Any) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url, http1=False, http2=True) as http:
        response = await http.initialize()
        assert response.http_version == "HTTP/2"
        sid = await _session_after_init(http)
        rid = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 2 0")}, sid
        )
        answer, before = await http.answer_of(rid, sid)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert len(before) == 2


async def _session_after_init(http: HttpClient) -> str:
    await http.open_stream()
    rid = await http.request("session/new", {"cwd": "/", "mcpServers": []})
    answer, _ = await http.answer_of(rid)
    sid: str = answer["result"]["sessionId"]
    await http.open_stream(sid)
    return sid


async def test_http2_over_tls_via_alpn(make_server: Any, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server = await make_server(certfile=str(cert), keyfile=str(key))
    assert server.url.startswith("https://")
    async with HttpClient.connect(
        server.url, http2=True, verify=ssl.create_default_context(cafile=str(cert))
    ) as http:
        response = await http.initialize()
        assert response.http_version == "HTTP/2"
        sid = await _session_after_init(http)
        assert sid


class _Loader(Agent):
    """Loads any session by replaying two messages of its 'history'."""

    async def load_session(self, session: Session) -> dict[str, Any] | None:
        for text in ("earlier question\n", "earlier answer\n"):
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            await session.update(chunk)
        return None

    async def prompt(self, turn: Turn) -> str:
        await turn.message("after the load\n")
        return "end_turn"


async def test_session_load_replays_on_the_connection_stream_then_the_session_stream_opens(
    make_server: Any,
) -> None:
    server = await make_server(agent=_Loader)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        await http.open_stream()
        # An unknown session has no stream yet.
        headers = {"Accept": "text/event-stream", "Acp-Connection-Id": http.connection_id or ""}
        early = await http.client.get(http.url, headers={**headers, "Acp-Session-Id": "sess_old"})
        assert early.status_code == 404
        rid = await http.request("session/load", {"sessionId": "sess_old", "cwd": "/", "mcpServers": []})
        answer, replay = await http.answer_of(rid)  # replay and answer in order, on the connection stream
        assert "result" in answer
        assert [m["params"]["update"]["content"]["text"] for m in replay] == [
            "earlier question\n",
            "earlier answer\n",
        ]
        await http.open_stream("sess_old")
        assert http.stream_status["sess_old"] == 200
        rid = await http.request(
            "session/prompt", {"sessionId": "sess_old", "prompt": text_prompt("go")}, "sess_old"
        )
        answer, before = await http.answer_of(rid, "sess_old")
        assert answer["result"] == {"stopReason": "end_turn"}
        assert before[0]["params"]["update"]["content"]["text"] == "after the load\n"


async def test_lone_surrogates_are_relayed_both_ways(make_server: Any) -> None:
    """As over WebSocket: a POST whose JSON holds a lone-surrogate escape reaches the agent, and
    the agent's own reach the client's streams, the prompt's answer included."""
    server = await make_server(argv=[sys.executable, str(AGENTS / "surrogate_agent.py")])
    async with HttpClient.connect(server.url) as http:
        sid = await _session(http)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "X"}]}
        raw = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "session/prompt", "params": prompt})
        response = await http.client.post(
            server.url, content=raw.replace('"X"', '"a\\udc01"').encode(), headers=http.headers(sid)
        )
        assert response.status_code == 202, response.text
        answer, before = await http.answer_of(77, sid)
        assert answer["result"] == {"stopReason": "end_turn", "_meta": {"note": "\udfff"}}
        (update,) = before
        assert update["params"]["update"]["content"]["text"] == "a\udc01\ud800"
