"""Our ``acp_driver.aio.Connection`` against the official ACP Python SDK's ``acp.connection.Connection``.

The SDK runs in a subprocess (``sdk_peer.py``) on its own stdin/stdout; we talk to it over real
OS pipes, once through ``open_pipes`` and once through ``open_streams`` (fixture ``sdk_peer``).
Assertions on the wire read our tracer: "out" is every message we queued, "in" every line we read.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from acp_driver.aio import current_request
from acp_driver.core import ConnectionClosedError, ErrorCode, RequestTimeoutError, RpcError

from ..waiting import eventually
from .pipe_peer import Peer

pytestmark = pytest.mark.interop

CANCEL = "$/cancel_request"
GRACE = 5.0
BIG = 1_000_000  # more than a pipe's buffer (64 KiB) and the SDK's StreamReader limit (64 KiB)


def is_response(msg: dict[str, Any]) -> bool:
    return "method" not in msg and ("result" in msg or "error" in msg)


def the_one(messages: list[dict[str, Any]], what: str, peer: Peer) -> dict[str, Any]:
    assert len(messages) == 1, (
        f"expected exactly one {what}, got {len(messages)}: {messages}\n{peer.report()}"
    )
    return messages[0]


async def test_echo_round_trip(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    params = {"text": "héllo ✓", "nested": {"list": [1, 2.5, None, True]}, "empty": {}}
    async with asyncio.timeout(30):
        assert await conn.request("echo", params) == params
        assert await conn.request("echo", []) == []

    sent = [m for m in sdk_peer.trace.messages("out") if m.get("method") == "echo"]
    got = [m for m in sdk_peer.trace.messages("in") if is_response(m)]
    assert [m["id"] for m in got] == [m["id"] for m in sent], sdk_peer.report()
    assert all(m["jsonrpc"] == "2.0" for m in got)
    assert conn.in_flight == (0, 0)


@pytest.mark.parametrize("how", ["task_cancel", "timeout"])
async def test_we_cancel_a_request_to_the_sdk(sdk_peer: Peer, how: str) -> None:
    conn, trace = sdk_peer.conn, sdk_peer.trace
    started = asyncio.Event()
    conn.on_notification("peer/started", lambda params: started.set())
    async with asyncio.timeout(30):
        if how == "task_cancel":
            task = asyncio.create_task(conn.request("slow", {}, cancel_grace=GRACE))
            await eventually(started.is_set, "the SDK's slow handler to start", 10, details=sdk_peer.report)
            assert not task.done(), sdk_peer.report()
            gave_up = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            gave_up = time.monotonic() + 1.0
            with pytest.raises(RequestTimeoutError, match="peer confirmed the cancel"):
                await conn.request("slow", {}, timeout=1.0, cancel_grace=GRACE)
            assert started.is_set(), f"the SDK's handler did not start within 1 s\n{sdk_peer.report()}"
        waited = time.monotonic() - gave_up

    rid = the_one([m for m in trace.messages("out") if m.get("method") == "slow"], "slow request", sdk_peer)[
        "id"
    ]
    cancel = the_one([m for m in trace.messages("out") if m.get("method") == CANCEL], CANCEL, sdk_peer)
    assert cancel == {"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": rid}}

    # The SDK answered the cancelled request, within the grace, with -32800 (a result would do too).
    (cancel_at,) = [t for t, m in trace.timed("out") if m.get("method") == CANCEL]
    answers = [(t, m) for t, m in trace.timed("in") if is_response(m) and m.get("id") == rid]
    assert len(answers) == 1, f"expected one answer for id {rid}, got {answers}\n{sdk_peer.report()}"
    answered_at, answer = answers[0]
    assert answered_at - cancel_at < GRACE, sdk_peer.report()
    assert "result" in answer or answer["error"]["code"] == ErrorCode.REQUEST_CANCELLED, sdk_peer.report()
    # We stopped waiting as soon as that answer came, not at the end of the grace.
    assert waited < GRACE, f"waited {waited:.2f}s\n{sdk_peer.report()}"
    assert conn.in_flight == (0, 0)

    # The SDK really cancelled its handler (it did not just answer for it).
    async with asyncio.timeout(30):
        stats = await conn.request("stats")
    assert stats["slow_cancelled"] == 1, f"{stats}\n{sdk_peer.report()}"
    assert stats["slow_finished"] == 0


async def test_sdk_cancels_a_request_to_us(sdk_peer: Peer) -> None:
    conn, trace = sdk_peer.conn, sdk_peer.trace
    started, cancelled, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}

    async def our_slow(params: Any) -> Any:
        ctx = current_request()
        assert ctx is not None
        seen["params"] = params
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen["cancel_requested"] = ctx.cancel_requested
            cancelled.set()
            raise
        finished.set()
        return {"slept": 30}

    conn.on_request("our/slow", our_slow)
    async with asyncio.timeout(30):
        assert await conn.request("ask_back", {"after": 0.2}) == {"gave_up": True}
        await eventually(cancelled.is_set, "our handler to be cancelled", 10, details=sdk_peer.report)

    sdk_rid = the_one(
        [m for m in trace.messages("in") if m.get("method") == "our/slow"], "our/slow request", sdk_peer
    )["id"]
    assert started.is_set()
    assert not finished.is_set()
    assert seen == {"params": {"from": "sdk"}, "cancel_requested": True}, sdk_peer.report()
    cancel = the_one(
        [m for m in trace.messages("in") if m.get("method") == CANCEL], f"incoming {CANCEL}", sdk_peer
    )
    assert cancel["params"] == {"requestId": sdk_rid}, sdk_peer.report()
    assert "id" not in cancel, f"{CANCEL} must be a notification: {cancel}"

    # A round trip after it, so that anything we queued for the SDK has gone out.
    async with asyncio.timeout(30):
        assert await conn.request("echo", {"after": "cancel"}) == {"after": "cancel"}
    ours = [m for m in trace.messages("out") if is_response(m) and m["id"] == sdk_rid]
    answer = the_one(ours, f"response of ours to the SDK's request {sdk_rid!r}", sdk_peer)
    assert answer["error"]["code"] == ErrorCode.REQUEST_CANCELLED, sdk_peer.report()
    assert conn.in_flight == (0, 0)


async def test_unknown_method_to_the_sdk(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    async with asyncio.timeout(30):
        with pytest.raises(RpcError) as info:
            await conn.request("no/such_method", {"x": 1})
    assert info.value.code == ErrorCode.METHOD_NOT_FOUND, repr(info.value)
    assert conn.in_flight == (0, 0)


async def test_unknown_method_from_the_sdk(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    async with asyncio.timeout(30):
        got = await conn.request("call_unknown", {"method": "our/no_such_method"})
    assert got["code"] == ErrorCode.METHOD_NOT_FOUND, f"{got}\n{sdk_peer.report()}"
    assert got["data"] == {"method": "our/no_such_method"}
    sdk_rid = the_one(
        [m for m in sdk_peer.trace.messages("in") if m.get("method") == "our/no_such_method"],
        "our/no_such_method request",
        sdk_peer,
    )["id"]
    ours = [m for m in sdk_peer.trace.messages("out") if is_response(m) and m["id"] == sdk_rid]
    assert the_one(ours, "answer of ours", sdk_peer)["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert conn.in_flight == (0, 0)


async def test_notifications_are_never_answered(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    async with asyncio.timeout(30):
        await conn.notify("peer/note", {"n": 1})
        await conn.notify("nobody/listens", {"n": 2})  # the SDK-side handler raises method_not_found
        await conn.notify(CANCEL, {"requestId": 424242})  # unknown id: to be ignored
        assert await conn.request("echo", {"n": 3}) == {"n": 3}
        stats = await conn.request("stats")
    assert stats["notifications"] == [
        {"method": "peer/note", "params": {"n": 1}},
        {"method": "nobody/listens", "params": {"n": 2}},
    ]
    our_ids = {m["id"] for m in sdk_peer.trace.messages("out") if "method" in m and "id" in m}
    incoming = sdk_peer.trace.messages("in")
    assert all(is_response(m) and m["id"] in our_ids for m in incoming), sdk_peer.report()
    assert conn.in_flight == (0, 0)


async def test_close_answers_the_sdk_request_in_flight(sdk_peer: Peer) -> None:
    """We close while serving the SDK's request: it still gets -32800 before our output ends."""
    conn, trace = sdk_peer.conn, sdk_peer.trace
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def our_slow(params: Any) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"slept": 30}

    conn.on_request("our/slow", our_slow)
    async with asyncio.timeout(30):
        ask = asyncio.create_task(conn.request("ask_back", {"after": 30}))
        await eventually(
            started.is_set, "the SDK's request to reach our handler", 10, details=sdk_peer.report
        )
        await conn.aclose("test closes with requests in flight")
        with pytest.raises(ConnectionClosedError):
            await ask
        await sdk_peer.process.wait()  # our output ended: the SDK's main loop returns

    assert cancelled.is_set()
    assert conn.in_flight == (0, 0)
    sdk_rid = the_one(
        [m for m in trace.messages("in") if m.get("method") == "our/slow"], "our/slow request", sdk_peer
    )["id"]
    ours = [m for m in trace.messages("out") if is_response(m) and m["id"] == sdk_rid]
    assert the_one(ours, "answer of ours", sdk_peer)["error"]["code"] == ErrorCode.REQUEST_CANCELLED
    # ... and the SDK read that answer before our end of output.
    seen_by_sdk = [json.loads(line) for line in sdk_peer.stderr().splitlines() if line.startswith("{")]
    assert {"peer": "incoming", "message": ours[0]} in seen_by_sdk, sdk_peer.report()


async def test_large_messages_and_many_concurrent_requests(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    big = {"blob": "é" * (BIG // 2), "n": 1}
    async with asyncio.timeout(30):
        assert await conn.request("echo", big) == big
        results = await asyncio.gather(*(conn.request("echo", {"i": i}) for i in range(200)))
    assert results == [{"i": i} for i in range(200)]
    assert conn.in_flight == (0, 0)


async def test_sdk_exits_with_our_request_in_flight(sdk_peer: Peer) -> None:
    conn = sdk_peer.conn
    started = asyncio.Event()
    conn.on_notification("peer/started", lambda params: started.set())
    async with asyncio.timeout(30):
        slow = asyncio.create_task(conn.request("slow", {}))
        await eventually(started.is_set, "the SDK's slow handler to start", 10, details=sdk_peer.report)
        with pytest.raises(ConnectionClosedError):
            await conn.request("exit")
        with pytest.raises(ConnectionClosedError):
            await slow
        await conn.wait_closed()
    assert conn.close_reason == "peer closed its output"
    assert conn.in_flight == (0, 0)
    assert not [m for m in sdk_peer.trace.messages("out") if m.get("method") == CANCEL], sdk_peer.report()
