"""Helpers for the server's tests: a WebSocket client that speaks JSON-RPC, a Streamable HTTP
client (httpx + the shared SSE decoder), and the ``acp-driver serve`` subprocess.

Everything is real: servers listen on loopback ports, agents are real processes (or agents
served in-process), clients are the ``websockets`` and ``httpx`` libraries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import websockets

from acp_driver.net import SseDecoder
from acp_driver.remote import RemoteServer, serve_agent, serve_command

from ..procs import descendants

TIMEOUT = 30.0
AGENTS = Path(__file__).with_name("agents")
REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]


def ws_url(http_url: str) -> str:
    return "ws" + http_url[len("http") :]


INIT_PARAMS = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
}


def text_prompt(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


class WsClient:
    """JSON-RPC over a WebSocket, for tests: ``request`` sends, ``next`` reads the next message."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._ids = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str, **kwargs: Any) -> AsyncIterator[WsClient]:
        async with websockets.connect(ws_url(url), max_size=None, **kwargs) as ws:
            yield cls(ws)

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(orjson.dumps(message).decode())

    async def request(self, method: str, params: Any) -> int:
        self._ids += 1
        await self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT):
            data = await self.ws.recv()
        message: dict[str, Any] = json.loads(data)  # the standard library: lone surrogates too
        return message

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read until a message matches; returns it and those before it."""
        seen = []
        while True:
            message = await self.next()
            if predicate(message):
                return message, seen
            seen.append(message)

    async def answer_of(self, request_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return await self.until(lambda m: m.get("id") == request_id and "method" not in m)

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        answer, _ = await self.answer_of(await self.request(method, params))
        return answer

    async def open_session(self) -> str:
        init = await self.call("initialize", INIT_PARAMS)
        assert "result" in init, init
        new = await self.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        sid: str = new["result"]["sessionId"]
        return sid


class HttpClient:
    """The Streamable HTTP profile by hand: POSTs, SSE streams read into queues."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self.client = client
        self.connection_id: str | None = None
        self.streams: dict[str | None, asyncio.Queue[dict[str, Any]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._ids = 0
        self.stream_status: dict[str | None, int] = {}
        self.keepalives = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str, **kwargs: Any) -> AsyncIterator[HttpClient]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT, read=None), **kwargs) as client:
            http = cls(url, client)
            try:
                yield http
            finally:
                for task in http._tasks:
                    task.cancel()
                await asyncio.gather(*http._tasks, return_exceptions=True)

    def headers(self, session_id: str | None = None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.connection_id is not None:
            headers["Acp-Connection-Id"] = self.connection_id
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        return headers

    async def post(self, message: dict[str, Any], session_id: str | None = None) -> httpx.Response:
        return await self.client.post(
            self.url, content=orjson.dumps(message), headers=self.headers(session_id)
        )

    async def initialize(self) -> httpx.Response:
        self._ids += 1
        response = await self.post(
            {"jsonrpc": "2.0", "id": self._ids, "method": "initialize", "params": INIT_PARAMS}
        )
        assert response.status_code == 200, response.text
        self.connection_id = response.headers["acp-connection-id"]
        return response

    async def request(self, method: str, params: Any, session_id: str | None = None) -> int:
        self._ids += 1
        response = await self.post(
            {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}, session_id
        )
        assert response.status_code == 202, response.text
        return self._ids

    async def notify(self, method: str, params: Any, session_id: str | None = None) -> None:
        response = await self.post({"jsonrpc": "2.0", "method": method, "params": params}, session_id)
        assert response.status_code == 202, response.text

    async def open_stream(self, session_id: str | None = None) -> None:
        """Open a GET stream; returns once its response headers came (status in ``stream_status``)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.streams[session_id] = queue
        started = asyncio.get_running_loop().create_future()

        async def read() -> None:
            headers = {"Accept": "text/event-stream", **self.headers(session_id)}
            del headers["Content-Type"]
            decoder = SseDecoder()
            try:
                async with self.client.stream("GET", self.url, headers=headers) as response:
                    self.stream_status[session_id] = response.status_code
                    started.set_result(None)
                    async for chunk in response.aiter_raw():
                        if b": keepalive" in chunk:
                            self.keepalives += 1
                        for event in decoder.feed(chunk):
                            assert event is not None
                            queue.put_nowait(json.loads(event))
            except httpx.HTTPError:
                pass
            finally:
                if not started.done():
                    started.set_result(None)
                queue.put_nowait({"stream": "ended"})

        self._tasks.append(asyncio.get_running_loop().create_task(read()))
        async with asyncio.timeout(TIMEOUT):
            await started

    def close_streams(self) -> None:
        """Close every GET stream this client opened (the server sees the client go)."""
        for task in self._tasks:
            task.cancel()

    async def next(self, session_id: str | None = None) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT):
            return await self.streams[session_id].get()

    async def answer_of(
        self, request_id: int, session_id: str | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        seen = []
        while True:
            message = await self.next(session_id)
            assert message != {"stream": "ended"}, f"stream ended before the answer to {request_id}: {seen}"
            if message.get("id") == request_id and "method" not in message:
                return message, seen
            seen.append(message)

    async def delete(self) -> httpx.Response:
        return await self.client.request("DELETE", self.url, headers=self.headers())


def agent_pids(server: RemoteServer) -> list[int]:
    """The agent pids of the server's live connections (subprocess agents)."""
    return [c.backend.pid for c in server.connections.values() if c.backend.pid is not None]


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def processes_running(marker: bytes) -> list[int]:
    """Live processes below this one whose command line contains ``marker``."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            found.append(pid)
    return found


class ServeProcess:
    """``acp-driver serve --port 0 ...`` in a subprocess; ``url`` from its ready line."""

    def __init__(self, process: asyncio.subprocess.Process, url: str, lines: list[str]) -> None:
        self.process = process
        self.url = url
        self.lines = lines

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, *args: str, env: dict[str, str] | None = None, ignoring: tuple[int, ...] = ()
    ) -> AsyncIterator[ServeProcess]:
        """``env``: the server's environment (its agents inherit it); default: this process's.
        ``ignoring``: signals the server starts with ignored (``acp-driver serve &`` in a script)."""

        def ignore() -> None:  # in the child, before exec: an ignored signal stays ignored across it
            for sig in ignoring:
                signal.signal(sig, signal.SIG_IGN)

        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "acp_driver",
            "serve",
            "--port",
            "0",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            preexec_fn=ignore if ignoring else None,
        )
        assert process.stderr is not None
        lines: list[str] = []
        prefix = "acp-driver serve: listening on "
        try:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    raw = await process.stderr.readline()
                    assert raw, f"serve exited before its ready line: {lines}"
                    line = raw.decode().rstrip("\n")
                    lines.append(line)
                    if line.startswith(prefix):
                        url = line[len(prefix) :]
                        break
            drain = asyncio.get_running_loop().create_task(cls._drain(process.stderr, lines))
            yield cls(process, url, lines)
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TIMEOUT):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            with contextlib.suppress(Exception):
                await drain

    @staticmethod
    async def _drain(stream: asyncio.StreamReader, lines: list[str]) -> None:
        async for raw in stream:
            lines.append(raw.decode(errors="replace").rstrip("\n"))


@pytest.fixture
async def make_server() -> AsyncIterator[Callable[..., Any]]:
    """Fixture (import it into a test module): ``await make_server(argv=None | [...], agent=None | factory, **settings)``: a started server."""
    servers: list[RemoteServer] = []

    async def make(
        argv: list[str] | None = None, agent: Callable[[], Any] | None = None, **options: Any
    ) -> RemoteServer:
        options.setdefault("port", 0)
        options.setdefault("cancel_budget", 2.0)
        if agent is not None:
            server = await serve_agent(agent, **options)
        else:
            server = await serve_command(argv or REFERENCE, **options)
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.aclose()
        assert server.connections == {}, "a connection outlived the server"
