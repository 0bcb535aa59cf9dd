"""asyncio connections over real OS pipes to another process (``peer.py``).

Each test is a short story run twice: once with ``asyncio.create_subprocess_exec`` and
``Connection.open_streams`` (asyncio streams), once with ``os.pipe`` + ``subprocess.Popen``
(``pass_fds``) and ``Connection.open_pipes`` (asyncio pipe transports on both sides). Timeouts
are generous: only hangs fail, never slowness.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver import (
    Connection,
    ConnectionClosedError,
    RequestCancelledError,
    RequestTimeoutError,
    RpcError,
)
from acp_driver.core import ProtocolViolation, Violation

from ..waiting import eventually

PEER = str(Path(__file__).with_name("peer.py"))
SECRET = "secret-do-not-leak-4f2a"  # what peer.py's ``fail`` puts in its exception text
LONG = 20.0  # seconds: the bound on anything that should take milliseconds
SHORT = 0.5  # seconds: a request timeout meant to fire while the peer's handler runs
CANCEL = "$/cancel_request"


class Harness:
    """Our connection to one peer process, with everything our tracer saw."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.inn: list[dict[str, Any]] = []
        self.violations: list[ProtocolViolation] = []
        self.conn = Connection(name="test", tracer=self.trace)
        self.conn.on_violation = self.violations.append
        self.proc: asyncio.subprocess.Process | subprocess.Popen[bytes] | None = None

    def trace(self, direction: str, data: bytes) -> None:
        target = self.out if direction == "out" else self.inn
        for line in data.splitlines():
            try:
                target.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                target.append({"unparsable": line.decode(errors="replace")})

    # ---------------------------------------------------------------- wire views

    def cancels_sent(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.out if m.get("method") == CANCEL]

    def cancels_received(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.inn if m.get("method") == CANCEL]

    def responses_received(self, rid: Any) -> list[dict[str, Any]]:
        return [m for m in self.inn if "method" not in m and m.get("id") == rid]

    def responses_sent(self, rid: Any) -> list[dict[str, Any]]:
        return [m for m in self.out if "method" not in m and m.get("id") == rid]

    def last_request_id(self, method: str) -> Any:
        ids = [m["id"] for m in self.out if m.get("method") == method and "id" in m]
        assert ids, f"no {method} request went out"
        return ids[-1]

    # ---------------------------------------------------------------- helpers

    async def stats(self) -> dict[str, Any]:
        result = await self.conn.request("stats")
        assert isinstance(result, dict)
        return result

    async def wait_exit(self) -> int:
        proc = self.proc
        assert proc is not None
        async with asyncio.timeout(LONG):
            if isinstance(proc, asyncio.subprocess.Process):
                return await proc.wait()
            return await asyncio.to_thread(proc.wait, LONG)

    async def reap(self) -> None:
        """Make sure the process is gone: give it a moment to exit on its own, then kill it."""
        proc = self.proc
        if proc is None:
            return
        try:
            async with asyncio.timeout(5):
                await self.wait_exit()
        except TimeoutError:
            pass
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            async with asyncio.timeout(LONG):
                await self.wait_exit()


async def spawn_streams(h: Harness) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, PEER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    h.proc = proc
    assert proc.stdout is not None
    assert proc.stdin is not None
    await h.conn.open_streams(proc.stdout, proc.stdin)


async def spawn_pipes(h: Harness) -> None:
    to_peer_r, to_peer_w = os.pipe()
    from_peer_r, from_peer_w = os.pipe()
    try:
        h.proc = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, PEER, "--fds", f"{to_peer_r},{from_peer_w}"],
            pass_fds=(to_peer_r, from_peer_w),
            stdin=subprocess.DEVNULL,
        )
    except BaseException:
        os.close(to_peer_w)
        os.close(from_peer_r)
        raise
    finally:
        os.close(to_peer_r)  # the child's ends: only the child keeps them
        os.close(from_peer_w)
    reader = os.fdopen(from_peer_r, "rb", buffering=0)
    writer = os.fdopen(to_peer_w, "wb", buffering=0)
    await h.conn.open_pipes(reader, writer)


@pytest.fixture(params=["streams", "pipes"])
async def peer(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    h = Harness()
    try:
        async with asyncio.timeout(LONG):
            if request.param == "streams":
                await spawn_streams(h)
            else:
                await spawn_pipes(h)
            # The peer is up and serving (Python start-up can be slow on a loaded machine).
            assert await h.conn.request("echo", ["ready"]) == ["ready"]
        yield h
        async with asyncio.timeout(LONG):
            await h.conn.aclose()
    finally:
        await h.reap()


async def settled(h: Harness) -> dict[str, Any]:
    """Wait until nothing is in flight on either side; return the peer's stats."""
    await eventually(lambda: h.conn.in_flight == (0, 0), f"our side still has {h.conn.in_flight} in flight")
    async with asyncio.timeout(LONG):
        while True:
            stats = await h.stats()
            if (stats["incoming"], stats["outgoing"]) == (0, 0):
                return stats
            await asyncio.sleep(0.01)


# ------------------------------------------------------------------------------------ stories


async def test_round_trip(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        assert await peer.conn.request("echo", {"a": [1, 2, {"b": None}], "s": "é\n"}) == {
            "a": [1, 2, {"b": None}],
            "s": "é\n",
        }
        assert await peer.conn.request("echo", [1, "two"]) == [1, "two"]
        assert await peer.conn.request("echo") is None
        results = await asyncio.gather(*(peer.conn.request("echo", {"i": i}) for i in range(50)))
        assert results == [{"i": i} for i in range(50)]
        assert peer.conn.in_flight == (0, 0)
        stats = await peer.stats()
        assert (stats["incoming"], stats["outgoing"], stats["violations"]) == (0, 0, 0)
    assert not peer.violations


async def test_unknown_method_is_method_not_found(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        with pytest.raises(RpcError) as info:
            await peer.conn.request("no/such_method", {"x": 1})
        assert info.value.code == -32601
        assert info.value.data == {"method": "no/such_method"}
        assert await peer.conn.request("echo", {"v": 1}) == {"v": 1}  # the connection goes on


async def test_handler_exception_is_internal_error_without_its_text(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        with pytest.raises(RpcError) as info:
            await peer.conn.request("fail")
        err = info.value
        assert type(err) is RpcError
        assert err.code == -32603
        assert SECRET not in err.message
        assert SECRET not in orjson.dumps(err.data).decode()
        (wire,) = peer.responses_received(peer.last_request_id("fail"))
        assert SECRET not in orjson.dumps(wire).decode()
        assert await peer.conn.request("echo", [2]) == [2]


async def test_rpc_error_passes_code_message_and_data(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        with pytest.raises(RpcError) as info:
            await peer.conn.request("rpc_error")
        assert type(info.value) is RpcError
        assert (info.value.code, info.value.message, info.value.data) == (-32001, "custom", {"x": 1})


async def test_caller_cancellation_lands_on_the_peer(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        task = asyncio.create_task(peer.conn.request("sleep", {"ms": 60_000}))
        await asyncio.sleep(0)  # the task sends its request before ours for the stats
        # Messages are ordered: once stats answers, the peer holds the sleep request.
        stats = await peer.stats()
        assert stats["incoming"] == 1
        rid = peer.last_request_id("sleep")
        assert peer.conn.in_flight == (0, 1)

        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert peer.cancels_sent() == [rid]
        assert peer.conn.in_flight == (0, 0)  # we stopped waiting at once (no grace)

        # The peer cancels its handler and answers -32800; we drop that late answer quietly.
        await eventually(lambda: bool(peer.responses_received(rid)), "the peer never answered the cancel")
        (answer,) = peer.responses_received(rid)
        assert answer["error"]["code"] == -32800
        stats = await settled(peer)
        assert stats["cancels"] == [rid]
        assert stats["cancelled"] == [rid]
        assert peer.cancels_sent() == [rid]  # still exactly one
    assert not peer.violations


async def test_timeout_with_grace_waits_for_the_peer_to_confirm(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        with pytest.raises(RequestTimeoutError) as info:
            await peer.conn.request("sleep", {"ms": 60_000}, timeout=SHORT, cancel_grace=LONG)
        rid = peer.last_request_id("sleep")
        # The grace was used: the peer's -32800 arrived before request() returned.
        (answer,) = peer.responses_received(rid)
        assert answer["error"]["code"] == -32800
        assert isinstance(info.value.__cause__, RequestCancelledError)
        assert isinstance(info.value, TimeoutError)
        assert info.value.code == -32800
        assert info.value.data == {"requestId": rid}
        assert peer.cancels_sent() == [rid]
        assert peer.conn.in_flight == (0, 0)
        stats = await settled(peer)
        assert stats["cancels"] == [rid]
        # Either the handler ran and was cancelled, or (very slow machine) it never started.
        started = ["sleep", rid] in stats["started"]
        assert stats["cancelled"] == ([rid] if started else [])
    assert not peer.violations


async def test_timeout_without_grace_returns_at_once(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        with pytest.raises(RequestTimeoutError) as info:
            await peer.conn.request("sleep", {"ms": 60_000}, timeout=SHORT)
        rid = peer.last_request_id("sleep")
        assert info.value.__cause__ is None
        assert peer.cancels_sent() == [rid]
        # The late -32800 still comes and is recognised (tombstone), not a violation.
        await eventually(lambda: bool(peer.responses_received(rid)), "the peer never answered the cancel")
        await settled(peer)
    assert not peer.violations


async def timeout_once_running(peer: Harness, method: str) -> Any:
    """Call ``method`` with a short timeout and a long grace, and return its result.

    The cancel only meets the handler if the handler started before the timeout; on a machine
    so slow that it did not, the peer answers -32800 instead (checked), and we try again.
    """
    for _ in range(5):
        try:
            return await peer.conn.request(method, {"ms": 60_000}, timeout=SHORT, cancel_grace=LONG)
        except RequestTimeoutError:
            rid = peer.last_request_id(method)
            assert [method, rid] not in (await peer.stats())["started"], "handler ran but gave no result"
    pytest.fail(f"the peer never started {method} within {SHORT}s, five times over")


async def test_partial_result_within_grace(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        result = await timeout_once_running(peer, "partial")
        assert result == {"partial": True}
        rid = peer.last_request_id("partial")
        assert rid in peer.cancels_sent()
        (answer,) = peer.responses_received(rid)
        assert answer["result"] == {"partial": True}
        await settled(peer)
    assert not peer.violations


async def test_handler_ignoring_one_cancel_answers_within_grace(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        assert await timeout_once_running(peer, "ignore_cancel") == "done"
        rid = peer.last_request_id("ignore_cancel")
        assert rid in peer.cancels_sent()
        (answer,) = peer.responses_received(rid)
        assert answer["result"] == "done"
        await settled(peer)
    assert not peer.violations


async def test_cancel_before_the_handler_started_is_still_answered(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        # One write: the peer reads the request and its cancel in the same chunk, so the
        # handler task is cancelled before its first step. A string id keeps it apart from
        # our connection's integer ids (its answer reaches us as an unknown response).
        peer.conn.send_raw(
            b'{"jsonrpc":"2.0","id":"raw-1","method":"sleep","params":{"ms":60000}}\n'
            b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"raw-1"}}\n'
        )
        await eventually(lambda: bool(peer.responses_received("raw-1")), "raw-1 was never answered")
        (answer,) = peer.responses_received("raw-1")
        assert answer["error"]["code"] == -32800
        stats = await settled(peer)
        assert stats["cancels"] == ["raw-1"]
        assert ["sleep", "raw-1"] not in stats["started"]  # the handler never ran
        assert [v.kind for v in peer.violations] == [Violation.UNKNOWN_RESPONSE_ID]


@pytest.mark.parametrize("detached", [False, True], ids=["awaited", "detached"])
async def test_cascade_cancel_reaches_the_nested_request(peer: Harness, detached: bool) -> None:
    # "detached": the peer's handler makes the nested request from a task it does not cancel,
    # so only the connection's cascade (children of a cancelled request) can reach it.
    started = asyncio.Event()
    ours: dict[str, Any] = {}

    async def slow(params: Any) -> Any:
        ours["params"] = params
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ours["cancelled"] = True
            raise
        return "too late"

    peer.conn.on_request("slow", slow)
    async with asyncio.timeout(LONG):
        call = {"method": "slow", "params": {"k": 1}, "detached": detached}
        outer = asyncio.create_task(peer.conn.request("call_back", call))
        await started.wait()
        assert ours["params"] == {"k": 1}
        outer_id = peer.last_request_id("call_back")
        nested_id = next(m["id"] for m in peer.inn if m.get("method") == "slow")
        assert peer.conn.in_flight == (1, 1)

        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert peer.cancels_sent() == [outer_id]

        # The peer's handler was cancelled; it cancelled its nested request to us in turn.
        await eventually(lambda: ours.get("cancelled", False), "our nested handler was never cancelled")
        assert peer.cancels_received() == [nested_id]
        await eventually(lambda: bool(peer.responses_sent(nested_id)), "we never answered the nested request")
        (ours_answer,) = peer.responses_sent(nested_id)
        assert ours_answer["error"]["code"] == -32800
        await eventually(lambda: bool(peer.responses_received(outer_id)), "the peer never answered the outer")
        (theirs,) = peer.responses_received(outer_id)
        assert theirs["error"]["code"] == -32800

        stats = await settled(peer)
        assert stats["cancels"] == [outer_id]
        assert stats["cancelled"] == [outer_id]
        assert peer.conn.in_flight == (0, 0)
    assert not peer.violations


async def test_aclose_fails_our_waiter_and_the_peer_exits(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        task = asyncio.create_task(peer.conn.request("sleep", {"ms": 60_000}))
        await asyncio.sleep(0)  # the task sends its request before ours for the stats
        assert (await peer.stats())["incoming"] == 1
        await peer.conn.aclose()
        assert peer.conn.closed
        # The waiter failed as part of the close, not after some timeout.
        assert task.done()
        with pytest.raises(ConnectionClosedError):
            await task
        assert peer.conn.in_flight == (0, 0)
        with pytest.raises(ConnectionClosedError):
            await peer.conn.request("echo", [1])
        # The peer sees EOF, cancels its handler and exits cleanly.
        assert await peer.wait_exit() == 0


async def test_end_of_our_output_makes_the_peer_answer_and_exit(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        slow = asyncio.create_task(peer.conn.request("sleep", {"ms": 60_000}))
        partial = asyncio.create_task(peer.conn.request("partial", {"ms": 60_000}))
        await asyncio.sleep(0)  # both tasks send their requests before ours for the stats
        assert (await peer.stats())["incoming"] == 2
        peer.conn.close_write()  # the peer's stdin reaches EOF; we keep reading
        # The peer answers what it holds (-32800, or a partial result) before it goes.
        with pytest.raises(RequestCancelledError):
            await slow
        assert await partial == {"partial": True}
        assert await peer.wait_exit() == 0
        await asyncio.wait_for(peer.conn.wait_closed(), LONG)  # then its output ends: we close
        assert peer.conn.in_flight == (0, 0)
    assert not peer.violations


async def test_malformed_line_gets_parse_error_and_the_connection_survives(peer: Harness) -> None:
    async with asyncio.timeout(LONG):
        assert await peer.conn.request("echo", ["before"]) == ["before"]
        peer.conn.send_raw(b'{"jsonrpc": "2.0", "id": 7, "method": \n')
        await eventually(lambda: bool(peer.violations), "no reply to the malformed line")
        (violation,) = peer.violations
        assert violation.kind is Violation.NULL_ID_ERROR
        (reply,) = [m for m in peer.inn if "method" not in m and m.get("id") is None]
        assert reply["error"]["code"] == -32700
        assert await peer.conn.request("echo", ["after"]) == ["after"]
        stats = await settled(peer)
        assert stats["violations"] == 1


async def test_notification_flood_to_the_peer_arrives_in_order(peer: Harness) -> None:
    n = 10_000
    async with asyncio.timeout(LONG):
        for seq in range(n):
            await peer.conn.notify("note", {"seq": seq})
        stats = await peer.stats()  # ordered after every notification
        assert stats["notifications"] == n
        assert stats["notifications_out_of_order"] == 0
        assert not [m for m in peer.inn if "method" not in m and m.get("id") is None]  # none answered


async def test_notification_flood_from_the_peer_arrives_in_order(peer: Harness) -> None:
    n = 10_000
    seen: list[int] = []
    peer.conn.on_notification("note", lambda params: seen.append(params["seq"]))
    async with asyncio.timeout(LONG):
        assert await peer.conn.request("flood", {"n": n}) == {"sent": n}
        assert seen == list(range(n))  # the answer was sent after the last notification
        assert not [m for m in peer.out if "method" not in m and m.get("id") is None]


# ------------------------------------------------------------------------------------ raw wire


async def test_peer_answers_in_flight_requests_on_stdin_eof_and_exits() -> None:
    """No connection on our side: raw lines in, raw lines out, then EOF on the peer's stdin."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, PEER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        async with asyncio.timeout(LONG):
            proc.stdin.write(
                b'{"jsonrpc":"2.0","id":1,"method":"sleep","params":{"ms":60000}}\n'
                b'{"jsonrpc":"2.0","id":2,"method":"partial","params":{"ms":60000}}\n'
                b'{"jsonrpc":"2.0","id":3,"method":"stats"}\n'
            )
            await proc.stdin.drain()
            stats = orjson.loads(await proc.stdout.readline())
            assert stats["id"] == 3
            assert stats["result"]["incoming"] == 2

            proc.stdin.close()
            rest = [orjson.loads(line) for line in (await proc.stdout.read()).splitlines()]
            assert await proc.wait() == 0
        by_id = {m["id"]: m for m in rest}
        assert sorted(by_id) == [1, 2]
        assert len(rest) == 2  # each answered exactly once
        assert by_id[1]["error"]["code"] == -32800
        assert by_id[2]["result"] == {"partial": True}  # a handler may still give a partial result
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
