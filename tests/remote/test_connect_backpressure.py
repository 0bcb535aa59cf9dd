"""The client transports keep the ``aio.Transport`` contract's flow control: a peer that stops
reading pauses the connection (``Connection.notify`` then waits) once 1 MiB is queued, and
resumes it when the queue drains -- nothing lost, in order. The peer is a real WebSocket server
(the ``websockets`` library, in this process) on loopback that does not read until told to."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection, serve

from acp_driver.aio import Connection
from acp_driver.net import open_transport

from ..waiting import eventually

LIMIT = 60
COUNT = 400
BIG = "x" * 64 * 1024  # 400 x 64 KiB: far more than the socket buffers hold


async def test_a_peer_that_stops_reading_pauses_then_resumes_the_connection() -> None:
    reading = asyncio.Event()
    received: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection) -> None:
        await reading.wait()
        async for frame in ws:
            received.append(orjson.loads(frame))

    async with asyncio.timeout(LIMIT), serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        conn = Connection(name="backpressure")
        transport = await open_transport(f"ws://127.0.0.1:{port}/acp", conn)
        sender = asyncio.ensure_future(_send_all(conn))
        await eventually(lambda: conn.write_paused or sender.done(), "the connection to pause", timeout=LIMIT)
        assert not sender.done(), "every message was queued at once: the connection was never paused"
        assert not received  # the peer reads nothing yet: the sender waits, it does not buffer for ever
        reading.set()
        await sender
        await eventually(lambda: len(received) == COUNT, "every message to reach the peer", timeout=LIMIT)
        assert [m["params"]["n"] for m in received] == list(range(COUNT))
        assert not conn.write_paused
        await conn.aclose()
        await transport.wait_closed()


async def _send_all(conn: Connection) -> None:
    for n in range(COUNT):
        await conn.notify("_test/big", {"n": n, "data": BIG})
