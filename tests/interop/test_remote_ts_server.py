"""Interop: our host's ``connect`` against the official TypeScript SDK 2.4.0's remote server.

The server is ``peers/ts_remote_server.mjs``: the SDK's experimental ``AcpServer`` behind its Node
adapters (``createNodeHttpHandler``, ``createNodeWebSocketUpgradeHandler`` with the npm ``ws``
package's ``WebSocketServer``) on a loopback port, serving an agent app written with the SDK. One
server is shared by the module (each test opens its own connections: the server keeps one agent
connection per client connection). Mirrors ``test_remote_sdk_server.py`` (the Python SDK's
server): a prompt and its typed updates, ``session/cancel``, ``$/cancel_request``, the permission
request pending when the turn is cancelled, and an agent that ignores cancels (the host's ladder
closes the connection); every test also checks that the server saw our connection end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from acp_driver.core import LadderPolicy, RequestCancelledError, Rung
from acp_driver.driver import (
    AgentDisconnectedError,
    AgentMessageChunk,
    ClientServices,
    PermissionRequest,
    Resolution,
    ToolCall,
    ToolCallUpdate,
    connect,
)

from ..fakeclock import FakeClock
from ..remote.test_connect_profiles import BUDGET, T0
from ..waiting import eventually
from ..wire import Wire, first_update
from .installs import PeerInstaller, TypeScriptSdk
from .sdk_peers import PEERS_DIR, typescript_sdk_or_skip

pytestmark = pytest.mark.interop

each_profile = pytest.mark.parametrize("profile", ["ws", "http"])

LIMIT = 60  # seconds: a bound on each test, never a timing assertion
SCRIPT = PEERS_DIR / "ts_remote_server.mjs"
READY = "ts_remote_server: listening on "


@dataclass
class TsServer:
    process: subprocess.Popen[bytes]
    http: str
    stderr_path: Path

    @property
    def ws(self) -> str:
        return "ws" + self.http[len("http") :]

    def url(self, profile: str) -> str:
        return self.ws if profile == "ws" else self.http

    def seen(self) -> dict[str, Any]:
        """What reached the server: ``requests`` (method, headers, status, ...) and ``connections``."""
        with urllib.request.urlopen(self.http.removesuffix("/acp") + "/seen", timeout=30) as answer:
            result: dict[str, Any] = json.load(answer)
        return result

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def ts_server(tmp_path_factory: pytest.TempPathFactory, interop_peers: PeerInstaller) -> Iterator[TsServer]:
    typescript: TypeScriptSdk = typescript_sdk_or_skip(interop_peers)
    stderr_path = tmp_path_factory.mktemp("ts-server") / "server.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [str(typescript.node), str(SCRIPT)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "ACP_TS_SDK_DIR": str(typescript.folder)},
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)  # a bound, not a timing check
        assert ready, f"the TS server printed nothing in 60 s\n{stderr_path.read_text()}"
        line = process.stdout.readline().decode()  # the one line it prints (or EOF if it died)
        assert line.startswith(READY), (
            f"no ready line from the TS server: {line!r}\n{stderr_path.read_text()}"
        )
        yield TsServer(process, line[len(READY) :].strip(), stderr_path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def server(ts_server: TsServer) -> Iterator[TsServer]:
    """The shared server; after the test, every connection it opened has been closed by then."""
    yield ts_server

    def closed() -> bool:
        connections = ts_server.seen()["connections"]
        return bool(connections["opened"] == connections["closed"])

    asyncio.run(eventually(closed, "the TS server to close every connection", 30))


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> dict[str, str]:
    """Headers naming the test's requests (``X-Test``), to find them in ``seen()``."""
    return {"X-Test": request.node.name}


def requests_of(server: TsServer, tag: dict[str, str]) -> list[dict[str, Any]]:
    return [r for r in server.seen()["requests"] if r["tag"] == tag["X-Test"]]


@each_profile
async def test_prompt_streams_typed_updates(server: TsServer, profile: str, tmp_path: Path) -> None:
    async with asyncio.timeout(LIMIT), await connect(server.url(profile)) as agent:
        assert agent.remote
        assert agent.info["name"] == "ts-remote-agent"
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 5 1")
        updates = [u async for u in turn]
        result = await turn
        assert result.resolution is Resolution.COMPLETED
        assert result.stop_reason == "end_turn"
        assert all(isinstance(u, AgentMessageChunk) for u in updates)
        assert [u.text for u in updates if isinstance(u, AgentMessageChunk)] == [
            f"chunk {i}" for i in range(5)
        ]
        # A second session on the same connection has its own stream (HTTP) and turns.
        other = await agent.new_session(tmp_path)
        assert other.id != session.id
        echoed = [u async for u in other.prompt("hello there")]
        assert [u.text for u in echoed if isinstance(u, AgentMessageChunk)] == ["hello there"]
        assert await agent.request("_ts/echo", {"still": "here"}) == {"still": "here"}


@each_profile
async def test_session_cancel_resolves_cancelled(server: TsServer, profile: str, tmp_path: Path) -> None:
    wire = Wire()
    async with asyncio.timeout(LIMIT), await connect(server.url(profile), tracer=wire.trace) as agent:
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/stream 100000 20")
        await first_update(turn)
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        assert outcome.resolved_by == "session_cancel"
        assert (await turn).stop_reason == "cancelled"
        assert {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session.id}} in wire.out
        assert agent.connection.is_open  # the connection outlives the cancelled turn
        again = session.prompt("after the cancel")
        assert [u.text async for u in again if isinstance(u, AgentMessageChunk)] == ["after the cancel"]


@each_profile
async def test_cancel_request_scope_request(server: TsServer, profile: str, tmp_path: Path) -> None:
    async with asyncio.timeout(LIMIT), await connect(server.url(profile)) as agent:
        sent: list[Any] = []
        answer = agent.connection.request_nowait("_ts/sleep", {"ms": 600000}, on_sent=sent.append)
        await eventually(lambda: sent, "the request to be sent")
        outcome = await agent.cancel("request", request_id=sent[0])
        assert outcome.resolved_by == "cancel_request"
        with pytest.raises(RequestCancelledError):
            await answer  # the SDK aborted the handler's signal and answered -32800
        assert await agent.request("_ts/echo", {"still": "here"}) == {"still": "here"}


@each_profile
async def test_permission_pending_when_the_turn_is_cancelled(
    server: TsServer, profile: str, tmp_path: Path, tag: dict[str, str]
) -> None:
    asked = asyncio.Event()

    async def never_answer(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    wire = Wire()
    services = ClientServices(permission=never_answer)
    async with (
        asyncio.timeout(LIMIT),
        await connect(server.url(profile), services=services, tracer=wire.trace, headers=tag) as agent,
    ):
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/permission")
        await asked.wait()
        # The TS agent waits for the answer with no cancellation signal of its own: only the
        # host's `cancelled` answer (the spec's MUST at session/cancel) lets the turn end.
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED
        result = await turn
        assert result.stop_reason == "cancelled"
        answers = [m for m in wire.out if "result" in m and isinstance(m["result"], dict)]
        assert {"outcome": {"outcome": "cancelled"}} in [a["result"] for a in answers]
        updates = turn.late_updates + list(turn.unread)
        texts = [u.text for u in updates if isinstance(u, AgentMessageChunk)]
        assert "permission outcome: cancelled" in texts
        (call,) = [u for u in updates if isinstance(u, ToolCall)]
        assert [u.status for u in updates if isinstance(u, ToolCallUpdate)] == ["failed"]
        assert [u.tool_call_id for u in updates if isinstance(u, ToolCallUpdate)] == [call.tool_call_id]
    if profile == "http":
        # The RFD: a permission answer is a session-scoped POST (Acp-Session-Id); the TS server
        # refuses one without it (400 "Missing Acp-Session-Id") -- ours was accepted.
        posts = [r for r in requests_of(server, tag) if '"outcome"' in r["body"]]
        assert [(r["method"], r["session"], r["status"]) for r in posts] == [("POST", session.id, 202)]


@each_profile
async def test_an_agent_ignoring_cancel_is_disconnected_at_the_close_rung(
    server: TsServer, profile: str, tmp_path: Path, tag: dict[str, str]
) -> None:
    clock = FakeClock(T0)
    async with asyncio.timeout(LIMIT):
        agent = await connect(
            server.url(profile), ladder=LadderPolicy(budget=BUDGET), clock=clock, headers=tag
        )
        session = await agent.new_session(tmp_path)
        turn = session.prompt("/ignore-cancel 600000")
        await first_update(turn)
        canceller = asyncio.create_task(turn.cancel())
        await eventually(lambda: turn.ladder is not None, "the cancel to start the ladder")
        clock.advance_to(T0 + BUDGET * 0.5)
        assert turn.ladder is not None
        assert [r for _, r in turn.ladder.taken] == [Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST]
        assert not turn.done
        assert agent.connection.is_open
        clock.advance_to(T0 + BUDGET * 0.75)  # the close rung: the connection is closed gracefully
        outcome = await canceller
        assert outcome.resolution is Resolution.DISCONNECTED
        assert outcome.resolved_by == "terminate"
        result = await turn
        assert result.resolution is Resolution.DISCONNECTED
        assert isinstance(result.error, AgentDisconnectedError)
        await agent.aclose()

    # Gracefully: the TS server got a WebSocket close 1000 / a DELETE it answered 202.
    def ended() -> bool:
        mine = requests_of(server, tag)
        if profile == "ws":
            return [(r["method"], r.get("close_code")) for r in mine] == [("WS", 1000)]
        return [(r["method"], r["status"]) for r in mine if r["method"] == "DELETE"] == [("DELETE", 202)]

    await eventually(ended, f"the TS server to see the connection closed ({profile})")


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


async def test_where_the_ts_server_agrees_with_the_rfd_and_where_it_does_not(server: TsServer) -> None:
    """Streamable HTTP status codes of the TS server, next to the RFD's (and serve's, which
    follows the RFD: ``tests/remote/test_serve_http.py``). docs/remote.md lists the differences."""
    json_type = {"Content-Type": "application/json"}
    sse = {"Accept": "text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as client:
        init = await client.post(server.http, json=INIT)
        assert init.status_code == 200
        assert "set-cookie" not in init.headers  # AcpServer sets no cookie (no affinity of its own)
        connection = {"Acp-Connection-Id": init.headers["acp-connection-id"]}
        new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        prompt = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "no-such-session", "prompt": []},
        }
        unknown_session = {**connection, "Acp-Session-Id": "no-such-session"}

        async def status(method: str, headers: dict[str, str], body: Any = None) -> int:
            content = body if isinstance(body, bytes) else None if body is None else orjson.dumps(body)
            answer = await client.request(method, server.http, headers=headers, content=content)
            return answer.status_code

        # As the RFD says (and serve does):
        assert await status("POST", json_type, new) == 400  # no Acp-Connection-Id
        assert await status("POST", {**json_type, "Acp-Connection-Id": "nope"}, new) == 404
        assert await status("POST", {"Content-Type": "text/plain", **connection}, new) == 415
        assert await status("POST", {**json_type, **connection}, b"{") == 400
        assert await status("POST", {**json_type, **connection}, prompt) == 400  # no Acp-Session-Id
        assert await status("GET", connection) == 406  # no Accept: text/event-stream
        assert await status("PUT", connection) == 405
        async with client.stream("GET", server.http, headers={**sse, **connection}) as first:
            assert first.status_code == 200
            assert await status("GET", {**sse, **connection}) == 409  # one receiver per stream
        # Not as the RFD says:
        batch = await client.post(server.http, content=b"[]", headers={**json_type, **connection})
        assert batch.status_code == 400  # the RFD (and serve): 501
        assert batch.json()["error"]["code"] == -32600
        async with client.stream("GET", server.http, headers={**sse, **unknown_session}) as stream:
            assert stream.status_code == 200  # the RFD (and serve): 404 for an unknown session
        assert await status("POST", {**json_type, **unknown_session}, prompt) == 202  # RFD: 404
        # DELETE as the RFD says: 202, then the connection is unknown.
        assert await status("DELETE", connection) == 202
        assert await status("DELETE", connection) == 404
