"""The serving side's edges that only one line of code guards: a plain ``def`` handler that
raises, handlers that ignore their cancellation when the connection closes, and a request read
while the connection is closing. Each must still get exactly one answer, with the right code.

One connection on a recording message transport; the test plays the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson

from acp_driver import Connection, RpcError
from acp_driver.core import ErrorCode

from ..waiting import eventually
from .test_requests import RecordingTransport


def request(rid: int, method: str, params: Any = None) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})


def answers(wire: RecordingTransport) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in wire.messages() if "method" not in m}


async def test_a_plain_def_handler_that_raises_is_answered_once() -> None:
    conn = Connection(name="t")
    wire = RecordingTransport()
    conn.attach(wire)

    def boom(params: Any) -> Any:
        raise ValueError("secret path /home/x")

    def refuse(params: Any) -> Any:
        raise RpcError(ErrorCode.INVALID_PARAMS, "Invalid params: no")

    conn.on_request("boom", boom)
    conn.on_request("refuse", refuse)
    conn.feed_messages([request(1, "boom"), request(2, "refuse")])
    await eventually(lambda: len(answers(wire)) == 2, "both answers")
    got = answers(wire)
    assert got[1]["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert "secret" not in got[1]["error"]["message"]  # the exception's text stays in the log
    assert got[2]["error"] == {"code": ErrorCode.INVALID_PARAMS, "message": "Invalid params: no"}
    assert conn.in_flight == (0, 0)
    await conn.aclose()


async def test_handlers_ignoring_their_cancellation_at_close_are_answered_cancelled() -> None:
    conn = Connection(name="t", close_timeout=0.2)
    wire = RecordingTransport()
    conn.attach(wire)
    release = asyncio.Event()

    async def stubborn(params: Any) -> Any:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return {"finished": True}  # too late: the request was answered at close

    conn.on_request("stubborn", stubborn)
    conn.feed_messages([request(1, "stubborn"), request(2, "stubborn")])
    try:
        await asyncio.wait_for(conn.aclose("bye"), 30)
        got = answers(wire)
        assert sorted(got) == [1, 2]
        for rid in (1, 2):
            assert got[rid]["error"]["code"] == ErrorCode.REQUEST_CANCELLED, got[rid]
    finally:
        release.set()


async def test_a_request_read_while_closing_is_answered_cancelled() -> None:
    conn = Connection(name="t", close_timeout=5.0)
    wire = RecordingTransport()
    conn.attach(wire)
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(params: Any) -> Any:
        started.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return {}

    conn.on_request("slow", slow)
    conn.feed_messages([request(1, "slow")])
    await asyncio.wait_for(started.wait(), 30)
    closing = asyncio.ensure_future(conn.aclose("bye"))
    try:
        await eventually(lambda: not conn.is_open, "the connection to start closing")
        conn.feed_messages([request(2, "slow")])  # read while the close waits for request 1
        await eventually(lambda: 2 in answers(wire), "an answer to the request read while closing")
        assert answers(wire)[2]["error"]["code"] == ErrorCode.REQUEST_CANCELLED
    finally:
        release.set()
        await asyncio.wait_for(closing, 30)
    assert len([m for m in wire.messages() if m.get("id") == 2]) == 1  # exactly one answer
