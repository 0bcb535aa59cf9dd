"""The network client's graceful close (an HTTP DELETE, a WebSocket close) is bounded by its
grace, measured on the connection's clock: a server that never finishes the close is aborted
exactly then. The server is a Streamable HTTP server written out by hand (``handmade.py``)
that never answers the DELETE; only the clock is fake."""

from __future__ import annotations

import asyncio

from acp_driver.aio import Connection
from acp_driver.net import open_transport

from ..fakeclock import FakeClock
from ..waiting import eventually
from .handmade import http_peer
from .serving import INIT_PARAMS

T0 = 1000.0
GRACE = 5.0
LIMIT = 60


async def test_a_close_the_server_never_finishes_is_aborted_at_the_grace_on_the_clock() -> None:
    clock = FakeClock(T0)
    async with asyncio.timeout(LIMIT), http_peer([], hang_delete=True) as peer:
        conn = Connection(name="close", clock=clock)
        transport = await open_transport(peer.url, conn)
        try:
            assert (await conn.request("initialize", INIT_PARAMS))["protocolVersion"] == 1
            closing = asyncio.ensure_future(transport.aclose(GRACE))
            await peer.deleted.wait()  # the graceful close began: the server sits on it
            await eventually(lambda: T0 + GRACE in clock.deadlines, "the grace to run on the clock")
            clock.advance_to(T0 + GRACE - 0.001)
            for _ in range(20):
                await asyncio.sleep(0)
            assert not closing.done()
            clock.advance_to(T0 + GRACE)
            await closing  # aborted at the grace
            assert transport.end_reason == "the host closed the connection"
        finally:
            peer.done.set()
            await conn.aclose()
            await transport.wait_closed()
