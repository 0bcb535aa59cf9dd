"""Outgoing requests: futures, graceful and immediate give-ups, timeouts, late answers.

One connection wired to a message transport that records what is sent; the test plays the peer
by feeding messages. Each test is a short story with an assertion after each step.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import orjson
import pytest

from acp_driver import Connection, RequestCancelledError, RequestTimeoutError
from acp_driver.core import Ignored, Outcome, Quiet

from ..fakeclock import FakeClock


class RecordingTransport:
    """A message transport (see ``acp_driver.aio.Transport``) that keeps what is sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, messages: list[bytes]) -> None:
        self.sent.extend(messages)

    def close_write(self) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def messages(self) -> list[dict[str, Any]]:
        return [orjson.loads(message) for message in self.sent]

    def cancels(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.messages() if m.get("method") == "$/cancel_request"]


async def connected() -> tuple[Connection, RecordingTransport]:
    conn = Connection(name="t")
    wire = RecordingTransport()
    conn.attach(wire)
    return conn, wire


async def spin(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def answer(rid: Any, result: Any = None, code: int | None = None) -> list[bytes]:
    if code is None:
        return [orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})]
    return [orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": "m"}})]


async def test_request_nowait_is_a_future_answered_in_order() -> None:
    conn, wire = await connected()
    fut = conn.request_nowait("echo", {"x": 1})
    assert isinstance(fut, asyncio.Future)
    (sent,) = wire.messages()
    conn.feed_messages(answer(sent["id"], {"x": 1}))
    assert await fut == {"x": 1}
    assert conn.in_flight == (0, 0)
    await conn.aclose()


async def test_cancelling_the_future_sends_cancel_request_at_once_and_abandons() -> None:
    conn, wire = await connected()
    fut = conn.request_nowait("slow", {})
    rid = wire.messages()[0]["id"]
    assert fut.cancel()
    assert conn.in_flight == (0, 0)  # given up synchronously
    await spin()
    assert wire.cancels() == [rid]
    stone = conn.core.outgoing.tombstone(rid)
    assert stone is not None
    assert stone.outcome is Outcome.ABANDONED
    quiet: list[Any] = []
    conn.on_violation = quiet.append
    conn.feed_messages(answer(rid, code=-32800))  # the late confirmation is recognised
    assert quiet == []
    assert conn.violations == 0
    await conn.aclose()


async def test_graceful_cancel_waits_for_the_answer_then_raises() -> None:
    conn, wire = await connected()
    task = asyncio.ensure_future(conn.request("slow", {}, cancel_grace=30))
    await spin()
    rid = wire.messages()[0]["id"]
    task.cancel()
    await spin()
    assert wire.cancels() == [rid]
    assert not task.done()  # still waiting for the peer's confirmation
    conn.feed_messages(answer(rid, code=-32800))
    with pytest.raises(asyncio.CancelledError):
        await task
    stone = conn.core.outgoing.tombstone(rid)
    assert stone is not None
    assert stone.outcome is Outcome.CANCELLED  # the answer was recorded, not abandoned
    await conn.aclose()


async def test_graceful_cancel_gives_up_after_the_grace() -> None:
    conn, wire = await connected()
    task = asyncio.ensure_future(conn.request("slow", {}, cancel_grace=0.05))
    await spin()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):
            await task
    assert len(wire.cancels()) == 1
    assert conn.in_flight == (0, 0)
    await conn.aclose()


async def test_a_second_cancel_stops_the_grace_at_once() -> None:
    conn, wire = await connected()
    task = asyncio.ensure_future(conn.request("slow", {}, cancel_grace=30))
    await spin()
    task.cancel()
    await spin()
    assert not task.done()
    task.cancel()
    await spin()
    assert task.cancelled()
    assert len(wire.cancels()) == 1  # $/cancel_request is sent once
    assert conn.in_flight == (0, 0)
    await conn.aclose()


async def test_timeout_then_a_partial_result_within_the_grace_is_returned() -> None:
    conn, wire = await connected()
    task = asyncio.ensure_future(conn.request("slow", {}, timeout=0.05, cancel_grace=30))
    await spin()
    rid = wire.messages()[0]["id"]
    while not wire.cancels():
        await asyncio.sleep(0.01)
    assert wire.cancels() == [rid]
    conn.feed_messages(answer(rid, {"partial": True}))
    assert await task == {"partial": True}
    await conn.aclose()


async def test_timeout_confirmed_by_the_peer_is_a_request_timeout_error() -> None:
    conn, wire = await connected()
    task = asyncio.ensure_future(conn.request("slow", {}, timeout=0.05, cancel_grace=30))
    while not wire.cancels():
        await asyncio.sleep(0.01)
    conn.feed_messages(answer(wire.cancels()[0], code=-32800))
    with pytest.raises(RequestTimeoutError, match="confirmed") as info:
        await task
    assert isinstance(info.value, RequestCancelledError)
    assert isinstance(info.value, TimeoutError)
    await conn.aclose()


async def test_timeouts_of_many_requests_share_one_timer() -> None:
    conn, wire = await connected()
    futs = [conn.request_nowait("slow", {}, timeout=0.05) for _ in range(100)]
    futs += [conn.request_nowait("slow", {}, timeout=0.1) for _ in range(100)]
    results = await asyncio.gather(*futs, return_exceptions=True)
    assert all(isinstance(r, RequestTimeoutError) for r in results)
    assert len(wire.cancels()) == 200
    assert conn.in_flight == (0, 0)
    assert conn._deadlines is not None
    assert not conn._deadlines.armed
    assert len(conn._deadlines) == 0
    await conn.aclose()


async def test_answered_requests_do_not_pile_up_in_the_deadlines() -> None:
    # Answers do not remove their deadline (that was a cost per answer); the entries of answered
    # requests are dropped later, and never held beyond a bound, even behind a long request.
    conn, _wire = await connected()
    long = conn.request_nowait("slow", {}, timeout=3600)
    for _ in range(10):
        futs = [conn.request_nowait("echo", {}, timeout=3600) for _ in range(1000)]
        for fut in futs:
            conn.feed_messages(answer(fut.rid, "ok"))  # type: ignore[attr-defined]
        assert await asyncio.gather(*futs) == ["ok"] * 1000
    deadlines = conn._deadlines
    assert deadlines is not None
    assert len(deadlines) == 1  # only the long request still waits for its deadline
    assert deadlines.held <= 2 * 1000 + 1024  # 10001 added, the answered ones swept
    assert not long.done()
    await conn.aclose()


async def test_a_deadline_behind_answered_requests_still_fires() -> None:
    conn, wire = await connected()
    answered = [conn.request_nowait("echo", {}, timeout=0.05) for _ in range(50)]
    late = conn.request_nowait("slow", {}, timeout=0.05)
    for fut in answered:  # answered at once: the loop has not run, no deadline can have passed
        conn.feed_messages(answer(fut.rid, "ok"))  # type: ignore[attr-defined]
    assert await asyncio.gather(*answered) == ["ok"] * 50
    with pytest.raises(RequestTimeoutError):
        await asyncio.wait_for(late, 30)
    assert wire.cancels() == [late.rid]  # type: ignore[attr-defined]  # only the unanswered one
    assert conn.in_flight == (0, 0)
    await conn.aclose()


async def test_an_answer_within_the_grace_cancels_the_grace_timer() -> None:
    # Each timed-out request waits out its grace on a timer; once the answer is in, the timer
    # must go too (it used to stay armed, one live timer per answered request).
    conn, wire = await connected()
    fut = conn.request_nowait("slow", {}, timeout=0.01, cancel_grace=30)
    rid = wire.messages()[0]["id"]
    async with asyncio.timeout(10):
        while not wire.cancels():
            await asyncio.sleep(0.005)
    timer = fut.timer  # type: ignore[attr-defined]
    assert timer is not None
    conn.feed_messages(answer(rid, {"partial": True}))
    assert await fut == {"partial": True}
    assert timer.cancelled()
    assert not conn._expired  # nor is the timeout error kept for it
    await conn.aclose()


async def test_late_answer_after_an_immediate_give_up_is_quiet() -> None:
    conn, wire = await connected()
    events: list[Any] = []
    fut = conn.request_nowait("slow", {})
    rid = wire.messages()[0]["id"]
    fut.cancel()
    real = conn._on_quiet

    def record(event: Any) -> None:
        events.append(event)
        real(event)

    conn._dispatch[Quiet] = record
    conn.feed_messages(answer(rid, {"too": "late"}))
    assert [e.reason for e in events] == [Ignored.LATE_RESPONSE]
    await conn.aclose()


def note(method: str, n: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": [n]})


async def test_a_run_of_notifications_is_one_call_and_ends_at_any_other_message() -> None:
    conn, wire = await connected()
    fut = conn.request_nowait("prompt", {})
    rid = wire.messages()[0]["id"]
    log: list[Any] = []
    conn.on_notification_run("u", lambda run: log.append(("run", [n for (n,) in run], fut.done())))
    conn.on_notification("other", lambda params: log.append(("other", params[0])))
    conn.feed_messages(
        [note("u", 1), note("u", 2), note("other", "a"), note("u", 3), *answer(rid, "r"), note("u", 4)]
    )
    # In message order: the run before the answer sees the request still waiting, the one after
    # sees it answered (what fences a turn's updates); a different notification ends a run.
    assert log == [("run", [1, 2], False), ("other", "a"), ("run", [3], False), ("run", [4], True)]
    assert await fut == "r"
    conn.feed_messages([note("u", 5)])
    assert log[-1] == ("run", [5], True)  # the next read, the next run
    await conn.aclose()


async def test_runs_of_two_methods_interleaved_stay_apart_and_in_order() -> None:
    conn, _wire = await connected()
    log: list[Any] = []
    conn.on_notification_run("u", lambda run: log.append(("u", [n for (n,) in run])))
    conn.on_notification_run("v", lambda run: log.append(("v", [n for (n,) in run])))
    conn.feed_messages([note("u", 1), note("u", 2), note("v", 3), note("u", 4), note("v", 5), note("v", 6)])
    # A notification of the other method ends a run: each run is one method's, in message order.
    assert log == [("u", [1, 2]), ("v", [3]), ("u", [4]), ("v", [5, 6])]
    await conn.aclose()


async def test_a_failing_run_handler_is_logged_and_the_next_run_still_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn, _wire = await connected()
    runs: list[list[Any]] = []

    def handler(run: list[Any]) -> None:
        runs.append([n for (n,) in run])
        if len(runs) == 1:
            raise ValueError("boom")

    conn.on_notification_run("u", handler)
    conn.on_notification("other", lambda params: None)
    conn.feed_messages([note("u", 1), note("other", None), note("u", 2)])
    assert runs == [[1], [2]]
    assert "notification handler for u failed" in caplog.text
    assert conn.is_open
    await conn.aclose()


async def test_registering_a_notification_handler_replaces_a_run_handler_and_back() -> None:
    conn, _wire = await connected()
    single: list[Any] = []
    runs: list[list[Any]] = []
    conn.on_notification_run("u", lambda run: runs.append([n for (n,) in run]))
    conn.on_notification("u", lambda params: single.append(params[0]))
    conn.feed_messages([note("u", 1), note("u", 2)])
    assert (single, runs) == ([1, 2], [])
    conn.on_notification_run("u", lambda run: runs.append([n for (n,) in run]))
    conn.feed_messages([note("u", 3), note("u", 4)])
    assert (single, runs) == ([1, 2], [[3, 4]])
    await conn.aclose()


async def test_on_result_is_called_as_the_result_is_read_before_the_next_message() -> None:
    conn, wire = await connected()
    log: list[Any] = []
    fut = conn.request_nowait("prompt", {}, on_result=lambda result: log.append(("result", result)))
    failing = conn.request_nowait("other", {}, on_result=lambda result: log.append(("never", result)))
    await spin()  # the end of the loop iteration writes the second request
    rid, failing_rid = (m["id"] for m in wire.messages())
    conn.on_notification("after", lambda params: log.append(("after", params[0], fut.done())))
    conn.feed_messages([*answer(rid, "r"), note("after", 1), *answer(failing_rid, code=-32000)])
    # In message order, in the same read; an error answer is not a result.
    assert log == [("result", "r"), ("after", 1, True)]
    assert await fut == "r"
    with pytest.raises(Exception, match="m"):
        await failing
    await conn.aclose()


async def test_a_failing_on_result_is_logged_and_the_read_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    conn, wire = await connected()

    def boom(result: Any) -> None:
        raise ValueError("boom")

    fut = conn.request_nowait("prompt", {}, on_result=boom)
    other = conn.request_nowait("other", {})
    await spin()
    rid, other_rid = (m["id"] for m in wire.messages())
    conn.feed_messages([*answer(rid, "r"), *answer(other_rid, "s")])
    assert "on_result callback of prompt" in caplog.text
    assert (await fut, await other) == ("r", "s")
    assert conn.is_open
    await conn.aclose()


async def test_what_on_result_wakes_resumes_before_the_tasks_awaiting_the_future() -> None:
    # The host's turn resolves in on_result: the caller waiting for the turn must not wait for
    # the turn's own task, which awaits the prompt's future, to take a step first.
    conn, wire = await connected()
    order: list[str] = []
    woken = asyncio.Event()
    fut = conn.request_nowait("prompt", {}, on_result=lambda result: woken.set())

    async def awaiting_the_future() -> None:
        await fut
        order.append("future")

    async def awaiting_what_on_result_set() -> None:
        await woken.wait()
        order.append("on_result")

    tasks = [
        asyncio.ensure_future(awaiting_the_future()),
        asyncio.ensure_future(awaiting_what_on_result_set()),
    ]
    await spin()  # both wait
    conn.feed_messages(answer(wire.messages()[0]["id"], "r"))
    await asyncio.gather(*tasks)
    assert order == ["on_result", "future"]
    await conn.aclose()


async def test_on_result_leaves_no_reference_cycle() -> None:
    # The callback's owner usually holds the future (a turn holds its prompt's): once called,
    # the future drops the callback, so both are freed by reference counting, not by the
    # collector (which the host's hot path would otherwise pay for on every turn).
    conn, wire = await connected()

    class Owner:
        fut: Any = None

        def on_result(self, result: Any) -> None:
            pass

    owner = Owner()
    owner.fut = conn.request_nowait("prompt", {}, on_result=owner.on_result)
    gone = weakref.ref(owner)
    gc.disable()
    try:
        conn.feed_messages(answer(wire.messages()[0]["id"], "r"))
        assert await owner.fut == "r"
        del owner
        assert gone() is None
    finally:
        gc.enable()
    await conn.aclose()


async def test_deadlines_and_graces_run_on_an_injected_clock() -> None:
    """Issue 23: request deadlines and grace timers run on the clock the connection is given
    (the driver gives it the agent's), so they are testable on fake time: nothing here waits."""
    clock = FakeClock()
    conn = Connection(name="t", clock=clock)
    wire = RecordingTransport()
    conn.attach(wire)
    try:
        timed = asyncio.ensure_future(conn.request("slow", {}, timeout=3600, cancel_grace=7200))
        graceful = asyncio.ensure_future(conn.request("slow", {}, cancel_grace=600))
        await spin()
        rid_timed, rid_graceful = (m["id"] for m in wire.messages())
        graceful.cancel()  # the first cancel: $/cancel_request, then the grace for the answer
        await spin()
        assert wire.cancels() == [rid_graceful]
        clock.advance(3599)
        await spin()
        assert graceful.done()  # the grace (600 s) ran out on the fake clock
        assert not timed.done()
        assert wire.cancels() == [rid_graceful]
        clock.advance(1)  # the deadline
        await spin()
        assert wire.cancels() == [rid_graceful, rid_timed]
        assert not timed.done()  # waiting out its own grace for the peer's answer
        clock.advance(7200)
        await spin()
        with pytest.raises(RequestTimeoutError):
            await timed
        with pytest.raises(asyncio.CancelledError):
            await graceful
    finally:
        await conn.aclose()  # fails what still waits: a broken clock must fail, not hang
