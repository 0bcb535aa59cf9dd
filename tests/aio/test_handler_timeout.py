"""A handler's ``timeout`` runs on the connection's clock: at that moment its request is answered
``-32800`` and every request the handler made is cancelled (``$/cancel_request``), also one
made from a task of its own, which the handler's cancellation does not reach.

One connection wired to a transport that records what is sent; the test plays the peer by
feeding messages, and moves a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from acp_driver import Connection

from ..fakeclock import FakeClock
from .test_requests import RecordingTransport, spin

T0 = 1000.0
TIMEOUT = 2.0


def answers(wire: RecordingTransport, rid: Any) -> list[dict[str, Any]]:
    return [m for m in wire.messages() if m.get("id") == rid and "method" not in m]


async def test_a_handler_that_times_out_is_answered_and_cancels_the_requests_it_made() -> None:
    clock = FakeClock(T0)
    conn = Connection(name="t", clock=clock)
    wire = RecordingTransport()
    conn.attach(wire)
    nested: list[asyncio.Future[Any]] = []
    never = asyncio.Event()

    async def parent(params: Any) -> Any:
        # The nested request runs in a task of its own: cancelling the handler does not
        # cancel it; only the connection's cascade from the timed-out parent can.
        nested.append(asyncio.ensure_future(conn.request("child", {})))
        await never.wait()

    conn.on_request("parent", parent, timeout=TIMEOUT)
    try:
        conn.feed_messages([orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "parent", "params": {}})])
        await spin()
        (child,) = [m["id"] for m in wire.messages() if m.get("method") == "child"]
        assert clock.deadlines == [T0 + TIMEOUT]  # the handler's timeout, on the connection's clock
        clock.advance_to(T0 + TIMEOUT - 0.001)
        await spin()
        assert answers(wire, 1) == []
        assert wire.cancels() == []
        clock.advance_to(T0 + TIMEOUT)
        await spin()
        (answer,) = answers(wire, 1)
        assert answer["error"]["code"] == -32800
        assert answer["error"]["message"] == f"Request timed out after {TIMEOUT}s"
        assert wire.cancels() == [child]  # the request the handler made is withdrawn
        with pytest.raises(asyncio.CancelledError):
            await nested[0]
        assert conn.in_flight == (0, 0)
    finally:
        await conn.aclose()


async def test_a_handler_within_its_timeout_is_answered_and_its_timer_is_gone() -> None:
    clock = FakeClock(T0)
    conn = Connection(name="t", clock=clock)
    wire = RecordingTransport()
    conn.attach(wire)
    go = asyncio.Event()

    async def quick(params: Any) -> Any:
        await go.wait()
        return {"ok": True}

    conn.on_request("quick", quick, timeout=TIMEOUT)
    try:
        conn.feed_messages([orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "quick", "params": {}})])
        await spin()
        assert clock.deadlines == [T0 + TIMEOUT]
        go.set()
        await spin()
        assert answers(wire, 1)[0]["result"] == {"ok": True}
        assert clock.deadlines == []  # the timer went with the handler
        clock.advance_to(T0 + 10 * TIMEOUT)  # nothing fires late into a finished scope
        await spin()
        assert len(answers(wire, 1)) == 1
    finally:
        await conn.aclose()
