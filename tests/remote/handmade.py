"""A Streamable HTTP server written out by hand, for the network client's tests: it does what
a test needs of the server (an event stream with given events, a close that never finishes),
on a loopback socket in the test's process."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any


class HttpPeer:
    """A Streamable HTTP server by hand: ``initialize`` answered with a connection id, the
    connection's event stream carries ``events`` and stays open until ``done``; every other
    POST is recorded (``posted``) and accepted. ``hang_delete``: a DELETE (the client's
    graceful close) is never answered; ``deleted`` is set when one arrives."""

    def __init__(self, events: list[bytes], *, hang_delete: bool = False) -> None:
        self.events = events
        self.hang_delete = hang_delete
        self.deleted = asyncio.Event()
        self.posted: list[Any] = []
        self.done = asyncio.Event()
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                first, *lines = head.split(b"\r\n")
                headers = dict(
                    (name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(b":") for line in lines if b":" in line)
                )
                body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
                method = first.split()[0]
                if method == b"GET":
                    await self._stream(writer)
                    return
                if method == b"DELETE":
                    self.deleted.set()
                    if self.hang_delete:
                        await self.done.wait()
                        return
                message = json.loads(body) if body else None
                if isinstance(message, dict) and message.get("method") == "initialize":
                    answer = json.dumps(
                        {"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}}
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAcp-Connection-Id: c1\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer)
                    )
                else:
                    if method == b"POST":
                        self.posted.append(message)
                    writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for event in self.events:
            chunk = b"data: " + event + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        await self.done.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


@contextlib.asynccontextmanager
async def http_peer(events: list[bytes], *, hang_delete: bool = False) -> AsyncIterator[HttpPeer]:
    peer = HttpPeer(events, hang_delete=hang_delete)
    listener = await asyncio.start_server(peer.handle, "127.0.0.1", 0)
    peer.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/acp"
    try:
        yield peer
    finally:
        peer.done.set()
        listener.close()
        await listener.wait_closed()
