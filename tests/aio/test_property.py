"""Two ``aio.Connection`` objects wired to each other in memory, driven by a state machine.

Each example owns a fresh event loop. Rules interleave, in both directions: requests (as tasks)
to handlers that return, yield, raise, sleep until cancelled, return a partial result when
cancelled, time out inside the server, or call back the other side (cascade); caller
cancellation; client timeouts with and without ``cancel_grace``; notifications; loop iterations,
short real-time waits, settling to quiescence; and closing either side.

What must always hold (checked on the wire, through each side's tracer):

- a side answers each request it received at most once, and never answers anything else
  (notifications, unknown ids); ``$/cancel_request`` goes out at most once per request;
- a request in flight on either side while its parent (the request it serves) has ended is a
  cascade that did not land;
- at quiescence with both sides open, the two ledgers agree (what one side waits for is exactly
  what the other serves) and every notification has arrived, in order;
- after both sides closed: every request that reached a side was answered exactly once, no
  caller task is pending (each has a result, an ``RpcError`` or ``CancelledError``, consistent
  with its handler), ``in_flight == (0, 0)``, no task is left on the loop, no peer violation was
  reported and nothing reached the loop's exception handler.

Quiescence ("nothing is ready to run, timers aside") is read from the loop's private ``_ready``
queue; without it the ledger comparison is skipped.

The module ends with minimal reproductions of bugs found (and fixed) in src: they stay as regression tests.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from acp_driver import (
    Connection,
    ConnectionClosedError,
    LocalProtocolError,
    RequestCancelledError,
    RequestTimeoutError,
    RpcError,
)
from acp_driver.core import ProtocolViolation

CANCEL = "$/cancel_request"

# A request that arrives after ``aclose`` closed the core (while the state is still CLOSING)
# cannot be answered any more: it is recorded ABANDONED, never left in flight (this used to be a
# bug; see ``test_request_arriving_while_closing_is_answered`` below).


# ---------------------------------------------------------------------------- in-memory wire


class MemoryTransport:
    """A message transport (``acp_driver.aio.Transport``): delivers each send to the peer on the
    next loop iteration; ``close`` delivers EOF."""

    def __init__(self, loop: asyncio.AbstractEventLoop, peer: Connection) -> None:
        self._loop = loop
        self._peer = peer
        self._closing = False
        self.writes_after_close = 0

    def send(self, messages: list[bytes]) -> None:
        if self._closing:
            self.writes_after_close += 1
            return
        # A message medium: each message without the NDJSON newline.
        self._loop.call_soon(self._peer.feed_messages, [m[:-1] for m in messages])

    def close_write(self) -> None:
        self.close()

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._loop.call_soon(self._peer.feed_eof)

    def is_closing(self) -> bool:
        return self._closing


# ---------------------------------------------------------------------------- handlers

KINDS = ("echo", "yield", "fail", "rpc_error", "sleep", "partial", "sleep_timed", "cascade")
NESTED_KINDS = tuple(k for k in KINDS if k != "cascade")
SERVER_TIMEOUT = 0.005  # for "sleep_timed", enforced by ``on_request(..., timeout=)``


async def _forever() -> None:
    await asyncio.Event().wait()


def expected_result(kind: str, params: dict[str, Any]) -> Any:
    """The result a successful call of ``kind`` returns; None when it never returns one."""
    if kind in ("echo", "yield"):
        return params
    if kind == "partial":
        return {"partial": True, "token": params["token"]}
    if kind == "cascade":
        return expected_result(params["kind"], params["params"])
    return None


def error_allowed(kind: str, params: dict[str, Any], exc: RpcError) -> bool:
    """Whether a call of ``kind`` may legitimately fail with ``exc`` (timeouts checked apart)."""
    if isinstance(exc, RequestCancelledError | ConnectionClosedError):
        return True  # the serving side closed, or the connection ended first
    if kind == "fail":
        return (
            exc.code == -32603
            and exc.message == "Internal error in fail"
            and exc.data == {"exception": "ValueError"}
        )
    if kind == "rpc_error":
        return (
            exc.code == -32001 and exc.message == "custom" and exc.data == {"x": 1, "token": params["token"]}
        )
    if kind == "cascade":
        # The nested call's error is forwarded verbatim; a nested ConnectionClosedError becomes
        # a plain -32603 on the way.
        return exc.code == -32603 or error_allowed(params["kind"], params["params"], exc)
    return False


# ---------------------------------------------------------------------------- bookkeeping


class Side:
    """One connection plus everything its tracer saw."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.conn = Connection(name=name, close_timeout=0.5, tracer=self.trace)
        self.out: list[dict[str, Any]] = []
        self.inn: list[dict[str, Any]] = []
        self.late_requests: list[Any] = []  # requests that arrived after the core was closed
        self.violations: list[ProtocolViolation] = []
        self.notes_received: list[int] = []
        self.notes_sent = 0
        self.transport: MemoryTransport | None = None
        self.conn.on_violation = self.violations.append
        self.conn.on_notification("note", lambda params: self.notes_received.append(params["seq"]))

    def trace(self, direction: str, data: bytes) -> None:
        if direction == "out":
            for line in data.splitlines():
                msg = orjson.loads(line)
                assert type(msg) is dict, f"{self.name} sent a non-object line {line!r}"
                self.out.append(msg)
        else:
            msg = orjson.loads(data)
            assert type(msg) is dict, f"{self.name} received a non-object line {data!r}"
            self.inn.append(msg)
            if "method" in msg and "id" in msg and self.conn.core.closed:
                self.late_requests.append(msg["id"])

    # wire views
    def received_request_ids(self) -> list[Any]:
        return [m["id"] for m in self.inn if "method" in m and "id" in m]

    def sent_request_ids(self) -> list[Any]:
        return [m["id"] for m in self.out if "method" in m and "id" in m]

    def response_counts(self) -> dict[Any, int]:
        counts: dict[Any, int] = {}
        for m in self.out:
            if "method" not in m:
                counts[m.get("id")] = counts.get(m.get("id"), 0) + 1
        return counts

    def cancels_sent(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.out if m.get("method") == CANCEL]


@dataclass
class Call:
    src: Side
    kind: str
    params: dict[str, Any]
    timeout: float | None
    grace: float
    task: asyncio.Task[Any]
    cancelled_by_test: bool = False


# ---------------------------------------------------------------------------- the machine


class TwoConnections(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.loop_errors: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _loop, context: self.loop_errors.append(context))
        self.sides = (Side("a"), Side("b"))
        self.calls: list[Call] = []
        self.close_tasks: list[asyncio.Task[None]] = []
        self.tokens = itertools.count()
        for side in self.sides:
            self._register(side)
        self.loop.run_until_complete(self._attach())

    def _register(self, side: Side) -> None:
        conn = side.conn

        async def echo(params: Any) -> Any:
            return params

        async def yield_(params: Any) -> Any:
            for _ in range(params["n"]):
                await asyncio.sleep(0)
            return params

        async def fail(params: Any) -> Any:
            raise ValueError(f"secret detail {params['token']}")

        async def rpc_error(params: Any) -> Any:
            raise RpcError(-32001, "custom", {"x": 1, "token": params["token"]})

        async def sleep(params: Any) -> Any:
            await _forever()

        async def partial(params: Any) -> Any:
            try:
                await _forever()
            except asyncio.CancelledError:
                return {"partial": True, "token": params["token"]}

        async def cascade(params: Any) -> Any:
            return await conn.request(params["kind"], params["params"], cancel_grace=params["grace"])

        conn.on_request("echo", echo)
        conn.on_request("yield", yield_)
        conn.on_request("fail", fail)
        conn.on_request("rpc_error", rpc_error)
        conn.on_request("sleep", sleep)
        conn.on_request("partial", partial)
        conn.on_request("sleep_timed", sleep, timeout=SERVER_TIMEOUT)
        conn.on_request("cascade", cascade)

    async def _attach(self) -> None:
        a, b = self.sides
        a.transport = MemoryTransport(self.loop, b.conn)
        b.transport = MemoryTransport(self.loop, a.conn)
        a.conn.attach(a.transport)
        b.conn.attach(b.transport)

    # -------------------------------------------------------------- loop helpers

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def iterate(self, n: int) -> None:
        if n > 0:
            self.run(_iterations(n))

    async def _settle(self) -> bool:
        """Run until nothing is ready (timers aside). True if quiescence was reached."""
        ready = getattr(self.loop, "_ready", None)  # private, but nothing public tells
        if ready is None:
            await _iterations(50)
            return False
        for _ in range(500):
            await asyncio.sleep(0)
            if not ready:
                return True
        return False

    def _params(self, kind: str, nested: str, n: int, grace: float) -> dict[str, Any]:
        token = f"t{next(self.tokens)}"
        if kind == "cascade":
            nested_params = self._params(nested, nested, n, grace)
            return {"token": token, "kind": nested, "params": nested_params, "grace": grace}
        if kind == "yield":
            return {"token": token, "n": n}
        return {"token": token}

    @property
    def pending(self) -> list[Call]:
        return [c for c in self.calls if not c.task.done()]

    # -------------------------------------------------------------- rules

    @rule(
        src=st.integers(0, 1),
        kind=st.sampled_from(KINDS),
        nested=st.sampled_from(NESTED_KINDS),
        n=st.integers(1, 5),
        timeout=st.one_of(st.none(), st.sampled_from([0.001, 0.005, 0.02])),
        grace=st.sampled_from([0.0, 0.0, 0.005, 0.05]),
        run=st.integers(0, 3),
    )
    def start_request(
        self, src: int, kind: str, nested: str, n: int, timeout: float | None, grace: float, run: int
    ) -> None:
        side = self.sides[src]
        params = self._params(kind, nested, n, grace)
        coro = side.conn.request(kind, params, timeout=timeout, cancel_grace=grace)
        task = self.loop.create_task(coro)
        self.calls.append(Call(side, kind, params, timeout, grace, task))
        self.iterate(run)

    @rule(pick=st.integers(0, 10_000), run=st.integers(0, 3))
    def cancel_caller(self, pick: int, run: int) -> None:
        pending = self.pending
        if pending:
            call = pending[pick % len(pending)]
            assert call.task.cancel()  # not done, so the cancel is registered
            call.cancelled_by_test = True
        self.iterate(run)

    @rule(src=st.integers(0, 1), count=st.integers(1, 3))
    def notify(self, src: int, count: int) -> None:
        side = self.sides[src]
        for _ in range(count):
            try:
                side.conn.notify_nowait("note", {"seq": side.notes_sent + 1})
            except ConnectionClosedError:
                assert not side.conn.is_open
                return
            side.notes_sent += 1

    @rule(n=st.integers(1, 8))
    def step(self, n: int) -> None:
        self.iterate(n)

    @rule(ms=st.integers(1, 25))
    def wait(self, ms: int) -> None:
        self.run(asyncio.sleep(ms / 1000))

    @rule()
    def settle(self) -> None:
        self.run(self._settle_and_check())

    async def _settle_and_check(self) -> None:
        quiet = await self._settle()
        a, b = self.sides
        if not (quiet and a.conn.is_open and b.conn.is_open):
            return
        event(f"ledgers compared with {sum(a.conn.in_flight) + sum(b.conn.in_flight)} entries in flight")
        # Checked synchronously at the quiescent instant: nothing is in transit.
        for me, peer in ((a, b), (b, a)):
            waiting = {e.id for e in me.conn.core.outgoing}
            served = {e.id for e in peer.conn.core.incoming}
            assert waiting == served, (
                f"ledgers disagree: {me.name} waits for {sorted(waiting)}, {peer.name} serves {sorted(served)}"
            )
            assert peer.notes_received == list(range(1, me.notes_sent + 1))

    @rule(which=st.integers(0, 1), wait=st.booleans(), dice=st.integers(0, 3))
    def close(self, which: int, wait: bool, dice: int) -> None:
        if dice:  # closing ends the interesting part: do it one time in four
            self.iterate(dice)
            return
        conn = self.sides[which].conn
        if wait:
            self.run(asyncio.wait_for(conn.aclose(), 10))
            assert conn.closed
        else:
            self.close_tasks.append(self.loop.create_task(conn.aclose()))

    # -------------------------------------------------------------- invariants (every step)

    @invariant()
    def wire_is_sane(self) -> None:
        for side in self.sides:
            received = set(side.received_request_ids())
            counts = side.response_counts()
            for rid, count in counts.items():
                assert rid in received, f"{side.name} answered {rid!r}, which was never a request to it"
                assert count == 1, f"{side.name} answered request {rid!r} {count} times"
            cancels = side.cancels_sent()
            assert len(cancels) == len(set(cancels)), f"{side.name} repeated a $/cancel_request: {cancels}"
            assert set(cancels) <= set(side.sent_request_ids())
            assert side.transport is not None
            assert side.transport.writes_after_close == 0

    @invariant()
    def children_end_with_their_parent(self) -> None:
        for side in self.sides:
            core = side.conn.core
            for entry in core.outgoing:
                if entry.parent is not None:
                    assert entry.parent in core.incoming, (
                        f"{side.name}: nested request {entry.id} outlived its parent {entry.parent}"
                    )

    # -------------------------------------------------------------- the end

    def teardown(self) -> None:
        try:
            self.run(self._finish())
            self._check_final()
        finally:
            leftovers = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in leftovers:
                task.cancel()
            if leftovers:
                self.loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            self.loop.close()

    async def _finish(self) -> None:
        async with asyncio.timeout(20):
            await self._settle_and_check()
            for side in self.sides:
                await side.conn.aclose()
            await asyncio.gather(*self.close_tasks)
            tasks = [c.task for c in self.calls]
            if tasks:
                await asyncio.wait(tasks)
            await self._settle()
        me = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        assert not left, f"tasks left after both sides closed: {left}"

    def _check_final(self) -> None:
        for call in self.calls:
            self._check_outcome(call)
        for side in self.sides:
            conn = side.conn
            assert conn.closed
            assert not side.violations, f"{side.name} saw violations: {side.violations}"
            late = side.late_requests
            counts = side.response_counts()
            for rid in side.received_request_ids():
                expected = 0 if rid in late else 1
                assert counts.get(rid, 0) == expected, (
                    f"{side.name} answered request {rid!r} {counts.get(rid, 0)} times (expected {expected})"
                )
            assert conn.in_flight == (0, 0), f"{side.name}: in_flight {conn.in_flight}"
            # Notifications arrive in order; only a tail may be lost to a close.
            peer = self.sides[1] if side is self.sides[0] else self.sides[0]
            assert side.notes_received == list(range(1, len(side.notes_received) + 1))
            assert len(side.notes_received) <= peer.notes_sent
        errors = self.loop_errors
        assert not errors, errors

    def _check_outcome(self, call: Call) -> None:
        task = call.task
        assert task.done()
        where = f"{call.src.name}: {call.kind}({call.params}) timeout={call.timeout} grace={call.grace}"
        event(f"outcome of {call.kind}: {_describe(task)}")
        if task.cancelled():
            assert call.cancelled_by_test, f"{where} was cancelled by nobody"
            return
        assert not call.cancelled_by_test, f"{where}: cancelled, yet it ended with {task!r}"
        exc = task.exception()
        if exc is None:
            expected = expected_result(call.kind, call.params)
            assert expected is not None, f"{where} returned {task.result()!r}"
            assert task.result() == expected, f"{where} returned {task.result()!r}"
            return
        assert isinstance(exc, RpcError), f"{where} raised {exc!r}"
        if isinstance(exc, RequestTimeoutError):
            assert call.timeout is not None, f"{where} timed out without a timeout"
            return
        assert error_allowed(call.kind, call.params, exc), f"{where} raised {exc!r}"


def _describe(task: asyncio.Task[Any]) -> str:
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return "result" if exc is None else f"{type(exc).__name__} {getattr(exc, 'code', '')}"


async def _iterations(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


TwoConnections.TestCase.settings = settings(
    # ACP_PROPERTY_EXAMPLES=2000 for a long hunt; the suite's default stays quick.
    max_examples=int(os.environ.get("ACP_PROPERTY_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTwoConnections = TwoConnections.TestCase


# ---------------------------------------------------------------------------- known bug, minimal


def wire_pair(loop: asyncio.AbstractEventLoop) -> tuple[Connection, Connection]:
    a, b = Connection(name="a"), Connection(name="b")

    async def echo(params: Any) -> Any:
        return params

    for conn in (a, b):
        conn.on_request("echo", echo)
    a.attach(MemoryTransport(loop, b))
    b.attach(MemoryTransport(loop, a))
    return a, b


async def test_in_memory_pair_round_trip_and_close() -> None:
    """The harness itself: a request in each direction, then a clean close on both sides."""
    a, b = wire_pair(asyncio.get_running_loop())
    assert await a.request("echo", {"x": 1}) == {"x": 1}
    assert await b.request("echo", [2]) == [2]
    await a.aclose()
    await asyncio.wait_for(b.wait_closed(), 5)
    assert a.in_flight == b.in_flight == (0, 0)


async def test_request_arriving_while_closing_is_answered() -> None:
    """A request that arrives while ``aclose`` is finishing must be answered or abandoned.

    Iteration by iteration: b queues a request (its flush is scheduled); a starts closing;
    b's flush delivers the request into a's loop queue; a's close task calls ``core.close()``
    and yields once (``_close_transport``' ``sleep(0)``) while still CLOSING; the request is fed
    then, ``_on_request`` calls ``core.send_cancelled`` on a closed core, which raises
    ``LocalProtocolError`` out of ``feed_messages``; the entry the core opened stays in flight.
    """
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    a, b = wire_pair(loop)
    caller = asyncio.create_task(b.request("echo", {"x": 1}))
    await asyncio.sleep(0)  # b's request is queued; its flush runs in the next iteration
    await a.aclose()
    await asyncio.wait_for(b.wait_closed(), 5)
    with_error = await asyncio.gather(caller, return_exceptions=True)
    assert isinstance(with_error[0], ConnectionClosedError | RequestCancelledError)
    assert not errors, [e.get("exception") for e in errors]
    assert a.in_flight == (0, 0)


class RecordingTransport:
    """A message transport that keeps what is sent; nothing answers."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self._closing = False

    def send(self, messages: list[bytes]) -> None:
        self.sent.extend(messages)

    def close_write(self) -> None:
        self._closing = True

    def close(self) -> None:
        self._closing = True

    def is_closing(self) -> bool:
        return self._closing


async def test_answer_arriving_right_after_the_timeout_is_kept_within_grace() -> None:
    """The timeout fires (the caller's future is cancelled, its wakeup scheduled); the answer is
    fed before the caller resumes. With ``cancel_grace`` the caller gets that answer: it crossed
    the cancel, and it wins (it used to be dropped, with a RequestTimeoutError)."""
    wire = RecordingTransport()
    conn = Connection(name="a")
    conn.attach(wire)
    time_out = conn._time_out

    def time_out_then_answer(fut: Any) -> None:
        time_out(fut)  # $/cancel_request queued, the grace armed; the caller has not resumed yet
        (entry,) = list(conn.core.outgoing)
        conn.feed_messages([b'{"jsonrpc":"2.0","id":%d,"result":"on time"}' % entry.id])

    conn._time_out = time_out_then_answer  # type: ignore[method-assign]
    caller = asyncio.create_task(conn.request("slow", {}, timeout=0.05, cancel_grace=5))
    try:
        async with asyncio.timeout(10):
            result = await caller
    finally:
        await conn.aclose()
    assert result == "on time"


async def test_scalar_params_are_refused_locally() -> None:
    wire = RecordingTransport()
    conn = Connection(name="a")
    conn.attach(wire)
    try:
        with pytest.raises((LocalProtocolError, TypeError, ValueError)):
            await asyncio.wait_for(conn.request("echo", 1), 0.2)
        await asyncio.sleep(0)
        assert wire.sent == []
    finally:
        await conn.aclose()
