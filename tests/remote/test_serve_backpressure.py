"""Flow control in ``serve``: a client that reads slower than its agent writes slows the agent
down (the agent's stdout is no longer read) instead of growing the server's memory or losing
its connection; a client that reads nothing for the idle timeout is ended through the ladder.

The slow client is a raw WebSocket client on an asyncio stream with a small receive buffer
(the ``websockets`` library would read ahead into its own memory): it stops reading after the
prompt, so only the kernel's socket buffers and the server's outlet can hold the agent's output.
The stream (``/stream 60000 0``, ~10 MB) is far larger than the server's bound (512 KiB): without
flow control the connection would be ended for not reading.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from acp_driver.reference_agent import ReferenceAgent
from acp_driver.remote import RemoteServer

from ..waiting import eventually
from . import serving
from .serving import INIT_PARAMS, HttpClient, pid_gone, text_prompt

make_server = serving.make_server  # the fixture

UPDATES = 60000
BOUND = 512 * 1024  # max_buffered_bytes: the outlet pauses the agent at half of it


class RawWs:
    """A WebSocket client that reads only when asked (RFC 6455 framing by hand)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._ids = 0

    @classmethod
    async def connect(cls, url: str) -> RawWs:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)

    async def request(self, method: str, params: Any) -> int:
        self._ids += 1
        payload = orjson.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        await self.writer.drain()
        return self._ids

    async def next(self) -> dict[str, Any]:
        data = b""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", await self.reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(n)
            opcode = b0 & 0x0F
            assert opcode != 0x8, f"the server closed the WebSocket: {payload[2:]!r}"
            if opcode in (0x1, 0x0):
                data += payload
                if b0 & 0x80:
                    message: dict[str, Any] = orjson.loads(data)
                    return message

    async def answer_of(self, request_id: int) -> tuple[dict[str, Any], int]:
        """Read to the answer of ``request_id``; returns it and the updates before it."""
        updates = 0
        while True:
            message = await self.next()
            if message.get("method") == "session/update":
                updates += 1
            elif message.get("id") == request_id:
                return message, updates

    def close(self) -> None:
        self.writer.close()


def only_connection(server: RemoteServer) -> Any:
    assert len(server.connections) == 1, server.connections
    return next(iter(server.connections.values()))


@pytest.mark.parametrize("served", ["subprocess", "in-process"])
async def test_a_slow_websocket_client_pauses_the_agent_and_loses_nothing(
    make_server: Any, served: str
) -> None:
    # In-process, the agent's updates wait (its connection is paused) as a subprocess's writes
    # block on its full stdout pipe.
    agent = (lambda: ReferenceAgent("polite")) if served == "in-process" else None
    server = await make_server(agent=agent, max_buffered_bytes=BOUND)
    client = await RawWs.connect(serving.ws_url(server.url))
    try:
        await client.answer_of(await client.request("initialize", INIT_PARAMS))
        new, _ = await client.answer_of(await client.request("session/new", {"cwd": "/", "mcpServers": []}))
        sid = new["result"]["sessionId"]
        prompt = await client.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt(f"/stream {UPDATES} 0")}
        )
        conn = only_connection(server)
        # Not reading: the outlet fills past its high-water mark and the agent's output pauses.
        await eventually(lambda: conn.paused_since is not None, "the agent's output paused")
        # Reading again: every update arrives, then the answer; the connection never ended.
        async with asyncio.timeout(120):
            answer, updates = await client.answer_of(prompt)
        assert answer["result"]["stopReason"] == "end_turn", answer
        assert updates == UPDATES
        assert conn.end_reason is None
        assert conn.paused_since is None
    finally:
        client.close()


@pytest.mark.parametrize("served", ["subprocess", "in-process"])
async def test_a_client_that_reads_nothing_is_ended_after_the_idle_timeout(
    make_server: Any, served: str
) -> None:
    agent = (lambda: ReferenceAgent("polite")) if served == "in-process" else None
    server = await make_server(agent=agent, max_buffered_bytes=BOUND, idle_timeout=0.5)
    client = await RawWs.connect(serving.ws_url(server.url))
    try:
        await client.answer_of(await client.request("initialize", INIT_PARAMS))
        new, _ = await client.answer_of(await client.request("session/new", {"cwd": "/", "mcpServers": []}))
        sid = new["result"]["sessionId"]
        await client.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt("/stream 10000000 0")}
        )
        conn = only_connection(server)
        backend = conn.backend
        await eventually(lambda: conn.end_reason is not None, "the stalled connection ended")
        assert conn.end_reason == "the client read none of the agent's output for 0.5 s"
        if backend.pid is not None:
            await eventually(lambda: pid_gone(backend.pid), "the agent reaped")
        await eventually(lambda: backend.exited, "the agent's runtime closed")
        await eventually(lambda: server.connections == {}, "the connection reaped")
    finally:
        client.close()


async def test_a_session_stream_opened_late_gets_everything(make_server: Any) -> None:
    """Streamable HTTP: the session's stream is not open while the turn streams; its outlet
    pauses the agent, and once the client opens the stream every update arrives."""
    server = await make_server(max_buffered_bytes=BOUND)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        await http.open_stream()
        rid = await http.request("session/new", {"cwd": "/", "mcpServers": []})
        answer, _ = await http.answer_of(rid)
        sid = answer["result"]["sessionId"]
        prompt = await http.request(
            "session/prompt", {"sessionId": sid, "prompt": text_prompt(f"/stream {UPDATES} 0")}, sid
        )
        conn = only_connection(server)
        await eventually(lambda: conn.paused_since is not None, "the agent's output paused")
        await http.open_stream(sid)
        async with asyncio.timeout(120):
            answer, before = await http.answer_of(prompt, sid)
        assert answer["result"]["stopReason"] == "end_turn", answer
        assert sum(1 for m in before if m.get("method") == "session/update") == UPDATES
        assert conn.end_reason is None
