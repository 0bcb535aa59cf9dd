"""asyncio connection: tasks, futures and one ordered writer around the sans-IO core.

This layer owns no protocol rule; the core decides what is valid and what may be sent. Here:

- every incoming request served by an ``async def`` handler runs in its own task, so
  ``$/cancel_request`` can cancel it; whatever happens to the task (result, error, cancellation
  before or after it started, timeout, close), exactly one response goes out -- the task's
  done-callback answers ``-32800``/``-32603`` if the handler could not. A plain ``def`` handler
  is answered inline (there is nothing to cancel in work that never waits);
- each outgoing request is a future (``_Pending``); a caller that gives up -- its task
  cancelled, the future cancelled, or its timeout -- sends ``$/cancel_request`` once, then
  either stops waiting at once or waits for the peer's answer up to a grace;
- a ContextVar holds the incoming request being served, so outgoing requests made while serving
  it record it as their parent: cancelling the parent cancels its children (cascade);
- writes go through one outbox, in order: the first message of a loop iteration is written at
  once, the rest of the iteration's messages together at its end; ``notify`` waits while the
  transport is paused (backpressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from ..core import (
    CancelRequest,
    EndOfInput,
    ErrorCode,
    ErrorResponse,
    InFlight,
    Notification,
    ProtocolViolation,
    Quiet,
    Request,
    RequestId,
    Response,
    Tracer,
    Violation,
)
from ..core import Connection as CoreConnection
from ..core._errors import (
    ConnectionClosedError,
    RemoteProtocolError,
    RequestCancelledError,
    RequestTimeoutError,
    RpcError,
    error_from_object,
)
from ..core._framing import DEFAULT_MAX_LINE_BYTES
from ..core._ledger import DEFAULT_TOMBSTONES

logger = logging.getLogger("acp_driver.connection")

YIELD_EVERY = 64
"""``notify`` yields to the loop when this many messages wait unflushed."""

RequestHandler = Callable[[Any], Awaitable[Any]]
"""``async def handler(params) -> result``. Raise ``RpcError`` to answer with a specific error."""
NotificationHandler = Callable[[Any], Awaitable[None] | None]
"""``def handler(params)`` (called in order, inline) or ``async def`` (started in order, as a task)."""


class RequestContext:
    """The incoming request being served by the current task (see ``current_request``)."""

    __slots__ = ("_entry", "connection")

    def __init__(self, connection: Connection, entry: InFlight) -> None:
        self.connection = connection
        self._entry = entry

    @property
    def id(self) -> RequestId:
        return self._entry.id

    @property
    def method(self) -> str:
        return self._entry.method

    @property
    def cancel_requested(self) -> bool:
        """The peer sent ``$/cancel_request`` for this request (or we are closing)."""
        return self._entry.cancel_requested

    def __repr__(self) -> str:
        return f"RequestContext(id={self.id!r}, method={self.method!r})"


_current: ContextVar[RequestContext | None] = ContextVar("acp_driver_current_request", default=None)


def current_request() -> RequestContext | None:
    """The incoming request the calling task serves, if any."""
    return _current.get()


class State(enum.Enum):
    """Lifecycle of a connection."""

    NEW = "new"
    """Created; no transport attached yet."""
    OPEN = "open"
    """Reading and writing."""
    CLOSING = "closing"
    """Answering what is in flight with -32800, failing our waiters; no new work."""
    CLOSED = "closed"
    """Done; every request was answered or abandoned, no task is left."""


class Connection:
    """A JSON-RPC 2.0 peer over a pair of byte streams.

    Register handlers with ``on_request``/``on_notification``, then attach streams with
    ``open_pipes``, ``open_streams`` or ``attach``. ``request`` and ``notify`` talk to the peer;
    ``aclose`` ends it all with every request answered.
    """

    def __init__(
        self,
        *,
        name: str = "acp",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_tombstones: int = DEFAULT_TOMBSTONES,
        close_timeout: float = 1.0,
        json_default: Callable[[Any], Any] | None = None,
        tracer: Tracer | None = None,
        honour_cancel_request: bool = True,
    ) -> None:
        self.name = name
        self._honour_cancel_request = honour_cancel_request
        self._core = CoreConnection(
            max_line_bytes=max_line_bytes,
            max_tombstones=max_tombstones,
            default=json_default if json_default is not None else _json_default,
            tracer=tracer,
        )
        self._close_timeout = close_timeout
        self._requests: dict[str, tuple[Any, float | None, bool]] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._fallback: Callable[[str, Any], Awaitable[Any]] | None = None
        self._tasks: dict[RequestId, asyncio.Task[None]] = {}
        self._waiters: dict[RequestId, _Pending] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._closers: list[Callable[[], object]] = []
        self._write_closed = False
        self._write_paused = False
        self._writable_waiters: list[asyncio.Future[None]] = []
        self._deadlines: dict[float, dict[RequestId, tuple[float, _Pending, float, str]]] = {}
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = 0.0
        self._expired: dict[RequestId, RequestTimeoutError] = {}
        """Requests past their timeout, waiting out their grace for the peer's answer."""
        self._flush_scheduled = False
        self._tick_open = False
        self.state = State.NEW
        self.close_reason: str | None = None
        self._close_task: asyncio.Task[None] | None = None
        self._closed_event = asyncio.Event()
        self.on_violation: Callable[[ProtocolViolation], None] | None = None
        """Called for every peer violation (after logging). Exceptions are logged, not raised."""
        self.closed_error: Callable[[str], ConnectionClosedError] = ConnectionClosedError
        """Builds the error our callers get once the connection is closed (an owner may use a
        subclass naming more, e.g. the peer process's exit status)."""
        self.on_close: list[Callable[[str], object]] = []
        """Called with the close reason once the connection is closed."""
        self.violations = 0
        """How many peer violations were seen."""
        self.on_peer_gone: Callable[[str], object] | None = None
        """If set, called with ``"eof"`` when the peer's output ends, or ``"write_lost"`` when
        it stops reading, instead of closing at once: the owner closes (e.g. once it knows the
        peer process's exit status, to name it in the errors)."""
        self._dispatch: dict[type, Callable[[Any], None]] = {
            Request: self._on_request,
            Notification: self._on_notification,
            CancelRequest: self._on_cancel_request,
            Response: self._on_response,
            ErrorResponse: self._on_error_response,
            Quiet: self._on_quiet,
            ProtocolViolation: self._on_violation,
            EndOfInput: self._on_end_of_input,
        }

    # ------------------------------------------------------------------ registry

    def on_request(
        self, method: str, handler: RequestHandler | Callable[[Any], Any], *, timeout: float | None = None
    ) -> None:
        """Serve ``method`` with ``handler``; ``timeout`` cancels it internally (answer -32800).

        An ``async def`` handler runs in a task of its own (so ``$/cancel_request`` can cancel
        it). A plain ``def`` handler is answered inline, as soon as its request is read, with no
        task: for trivial methods (there is nothing to cancel in work that never waits).
        """
        inline = timeout is None and not inspect.iscoroutinefunction(handler)
        self._requests[method] = (handler, timeout, inline)

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        """Handle the notification ``method``. Unknown notifications are ignored (debug log)."""
        self._notifications[method] = handler

    def on_unknown_request(self, handler: Callable[[str, Any], Awaitable[Any]] | None) -> None:
        """Serve methods with no handler (``handler(method, params)``); by default they get -32601."""
        self._fallback = handler

    # ------------------------------------------------------------------ introspection

    @property
    def core(self) -> CoreConnection:
        """The sans-IO core (ledgers and state); read it, do not drive it."""
        return self._core

    @property
    def in_flight(self) -> tuple[int, int]:
        """(incoming requests not yet answered, outgoing requests not yet answered)."""
        return len(self._core.incoming), len(self._core.outgoing)

    @property
    def is_open(self) -> bool:
        return self.state is State.OPEN

    # ------------------------------------------------------------------ transports

    def attach(
        self,
        transport: asyncio.WriteTransport,
        *,
        closers: list[Callable[[], object]] | None = None,
    ) -> None:
        """Attach the write side; input comes through ``feed_data``/``feed_eof``.

        Flow control must be reported with ``pause_writing``/``resume_writing``/``write_lost``.
        ``closers`` are called at the end of ``aclose`` (close the read side there).
        """
        if self.state is not State.NEW:
            raise RuntimeError("connection already attached")
        self._loop = asyncio.get_running_loop()
        self._transport = transport
        if closers:
            self._closers.extend(closers)
        self.state = State.OPEN

    async def open_pipes(self, read_pipe: Any, write_pipe: Any) -> None:
        """Read from and write to pipe file objects (or fds wrapped by ``open``)."""
        from ._transports import open_pipes

        await open_pipes(self, read_pipe, write_pipe)

    async def open_streams(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Use an asyncio stream pair (sockets, anything ``asyncio`` streams wrap)."""
        from ._transports import open_streams

        await open_streams(self, reader, writer)

    # ------------------------------------------------------------------ input side

    def feed_data(self, data: bytes) -> None:
        """Bytes from the peer."""
        if not data or self.state is State.CLOSED:
            return
        dispatch = self._dispatch
        for event in self._core.receive_data(data):
            dispatch[type(event)](event)
        if self._core.has_data_to_send:
            self._schedule_flush()

    def feed_eof(self) -> None:
        """The peer's output ended."""
        if self._core.their_eof or self.state is State.CLOSED:
            return
        for event in self._core.receive_data(b""):
            self._dispatch[type(event)](event)
        if self._core.has_data_to_send:
            self._schedule_flush()

    # ------------------------------------------------------------------ write side

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._writable_waiters = self._writable_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def write_lost(self, exc: BaseException | None) -> None:
        """The write side is gone (the peer stopped reading)."""
        if self._write_closed:
            return
        self._write_closed = True
        self.resume_writing()
        if self.state is State.OPEN:
            if self.on_peer_gone is not None:
                self.on_peer_gone("write_lost")
                return
            reason = "peer stopped reading" + (f": {exc}" if exc else "")
            self._begin_close(reason)

    async def _wait_writable(self) -> None:
        if not self._write_paused or self._write_closed:
            return
        assert self._loop is not None
        fut = self._loop.create_future()
        self._writable_waiters.append(fut)
        await fut

    def _schedule_flush(self) -> None:
        # The first message of a loop iteration is written at once (latency: a lone request or
        # answer does not wait for the next iteration); the ones that follow in the same
        # iteration are written together when it ends (throughput: one write for a burst).
        if self._flush_scheduled or self._loop is None:
            return
        self._flush_scheduled = True
        if not self._tick_open:
            self._tick_open = True
            self._flush()
            self._loop.call_soon(self._end_tick)
        # else: _end_tick, already scheduled for this iteration, writes what accumulates

    def _end_tick(self) -> None:
        self._tick_open = False
        if self._flush_scheduled:
            self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        data = self._core.data_to_send()
        if not data or self._write_closed or self._transport is None:
            return
        try:
            self._transport.write(data)
        except (OSError, RuntimeError) as exc:  # closed underneath us
            self.write_lost(exc)

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are, bypassing the core (after what is queued).

        For audits and tests that must send what a correct peer never would (malformed lines).
        """
        self._flush()
        if self.writable and self._transport is not None:
            self._transport.write(data)

    def close_write(self) -> None:
        """Close our output after what is queued (the peer sees end of input); keep reading."""
        self._flush()
        if self._transport is not None and not self._write_closed:
            self._write_closed = True
            self._transport.close()

    @property
    def writable(self) -> bool:
        return not self._write_closed and self._transport is not None and not self._transport.is_closing()

    # ------------------------------------------------------------------ incoming requests

    def _on_request(self, event: Request) -> None:
        core = self._core
        if self.state is not State.OPEN:
            if core.closed or not self.writable:
                core.abandon_incoming(event.id)  # nothing can be sent any more
            else:
                core.send_cancelled(event.id, "Request cancelled: connection closing")
            return
        spec = self._requests.get(event.method)
        if spec is None:
            fallback = self._fallback
            if fallback is None:
                err = RpcError.method_not_found(event.method)
                core.send_error(event.id, err.code, err.message, err.data)
                return
            method = event.method

            async def serve_fallback(params: Any) -> Any:
                return await fallback(method, params)

            spec = serve_fallback, None, False
        entry = core.incoming.get(event.id)
        assert entry is not None
        handler, timeout, inline = spec
        if inline:
            self._serve_inline(entry, event.params, handler)
        else:
            self._start(entry, event.params, handler, timeout)

    def _start(self, entry: InFlight, params: Any, handler: RequestHandler, timeout: float | None) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._serve(entry, params, handler, timeout))
        self._tasks[entry.id] = task
        task.add_done_callback(lambda t: self._served(t, entry))

    def _serve_inline(self, entry: InFlight, params: Any, handler: Callable[[Any], Any]) -> None:
        token = _current.set(RequestContext(self, entry))
        try:
            result = handler(params)
        except Exception as exc:
            self._answer_exception(entry, exc)
        except BaseException:
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
            raise
        else:
            if type(result) not in _PLAIN and inspect.isawaitable(result):
                # A plain function that returned an awaitable (a lambda around a coroutine):
                # serve it like an async handler.
                awaitable = result

                async def finish(_params: Any) -> Any:
                    return await awaitable

                self._start(entry, params, finish, None)
                if inspect.iscoroutine(awaitable):
                    coroutine = awaitable

                    def close_if_never_run(task: asyncio.Task[None]) -> None:
                        if task.cancelled():
                            coroutine.close()  # cancelled before it ran: no "never awaited" warning

                    self._tasks[entry.id].add_done_callback(close_if_never_run)
            else:
                self._answer_result(entry, result)
        finally:
            _current.reset(token)

    async def _serve(
        self, entry: InFlight, params: Any, handler: RequestHandler, timeout: float | None
    ) -> None:
        _current.set(RequestContext(self, entry))
        try:
            if timeout is None:
                result = await handler(params)
            else:
                try:
                    async with asyncio.timeout(timeout) as scope:
                        result = await handler(params)
                except TimeoutError:
                    if not scope.expired():
                        raise
                    self._cascade(entry)
                    self._answer_error(
                        entry, ErrorCode.REQUEST_CANCELLED, f"Request timed out after {timeout}s"
                    )
                    return
        except asyncio.CancelledError:
            self._cascade(entry)
            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled")
            raise
        except Exception as exc:
            self._answer_exception(entry, exc)
        except BaseException:
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
            raise
        else:
            self._answer_result(entry, result)

    def _answer_exception(self, entry: InFlight, exc: Exception) -> None:
        """A handler raised: its ``RpcError`` as is, anything else ``-32603`` without the text
        (it may hold paths or secrets); the traceback goes to the log."""
        if isinstance(exc, RpcError):
            self._answer_error(entry, exc.code, exc.message, exc.data)
            return
        logger.error("%s: handler for %s (id %r) failed", self.name, entry.method, entry.id, exc_info=exc)
        self._answer_error(
            entry,
            ErrorCode.INTERNAL_ERROR,
            f"Internal error in {entry.method}",
            {"exception": type(exc).__name__},
        )

    def _served(self, task: asyncio.Task[None], entry: InFlight) -> None:
        if self._tasks.get(entry.id) is task:
            del self._tasks[entry.id]
        if task.cancelled():
            # Cancelled before its first step: the handler never ran, yet it gets its answer.
            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled")
        elif task.exception() is not None:
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
        elif self._core.incoming.get(entry.id) is entry:  # pragma: no cover - _serve always answers
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, "handler ended without an answer")

    def _answer_result(self, entry: InFlight, result: Any) -> None:
        core = self._core
        if core.incoming.get(entry.id) is not entry:
            return  # already answered (e.g. by close) -- the ledger keeps it to one answer
        if not self.writable:
            core.abandon_incoming(entry.id)
            return
        try:
            core.send_result(entry.id, result)
        except TypeError as exc:
            logger.error("%s: result of %s is not JSON-serializable: %s", self.name, entry.method, exc)
            core.send_error(entry.id, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
        self._schedule_flush()

    def _answer_error(self, entry: InFlight, code: int, message: str, data: Any = None) -> None:
        core = self._core
        if core.incoming.get(entry.id) is not entry:
            return
        if not self.writable:
            core.abandon_incoming(entry.id)
            return
        try:
            core.send_error(entry.id, code, message, data)
        except TypeError:
            core.send_error(entry.id, code, message)
        self._schedule_flush()

    def _on_cancel_request(self, event: CancelRequest) -> None:
        if not self._honour_cancel_request:
            logger.debug("%s: not honouring $/cancel_request for %r", self.name, event.id)
            return
        task = self._tasks.get(event.id)
        if task is not None:
            task.cancel("$/cancel_request")

    def _cascade(self, parent: InFlight) -> None:
        self.cascade_cancel(parent.id, f"parent request {parent.id!r} ({parent.method}) cancelled")

    def cascade_cancel(self, parent: RequestId, reason: str = "parent request cancelled") -> int:
        """Cancel our pending requests made while serving the peer's request ``parent``.

        Each gets ``$/cancel_request`` (the cascade) and its caller a ``CancelledError`` -- after
        the peer's answer or the request's grace, for a request made with ``cancel_grace``.
        A request already being given up is left to finish giving up. Returns how many.
        """
        count = 0
        for child in self._core.outgoing.children(parent):
            fut = self._waiters.get(child.id)
            if fut is not None and not fut.done() and not fut.giving_up:
                fut.cancel(reason)
                count += 1
        return count

    # ------------------------------------------------------------------ notifications

    def _on_notification(self, event: Notification) -> None:
        handler = self._notifications.get(event.method)
        if handler is None:
            logger.debug("%s: ignoring notification %s", self.name, event.method)
            return
        try:
            outcome = handler(event.params)
        except Exception:
            logger.exception("%s: notification handler for %s failed", self.name, event.method)
            return
        if outcome is not None and inspect.isawaitable(outcome):
            self._spawn(outcome, f"notification {event.method}")

    def _spawn(self, awaitable: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        assert self._loop is not None
        task = self._loop.create_task(_logged(awaitable, what, self.name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------------ outgoing requests

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        cancel_grace: float = 0.0,
        on_sent: Callable[[RequestId], object] | None = None,
    ) -> Any:
        """Send a request and return the peer's result.

        Raises ``RpcError`` for an error answer (``RequestCancelledError`` for ``-32800``),
        ``RequestTimeoutError`` when ``timeout`` elapses, ``ConnectionClosedError`` if the
        connection ends first. When the calling task is cancelled or the timeout elapses,
        ``$/cancel_request`` is sent once; with ``cancel_grace`` > 0 the answer is still awaited
        that long (a timeout then returns a partial result if the peer gives one; a cancelled
        caller still gets its ``CancelledError``, once the answer came or the grace is over).
        ``on_sent`` is called with the request id once it is queued (to cancel it by id later).
        """
        # With a grace, the future declines the caller's first cancel (``_Pending.cancel``):
        # the task keeps waiting for the peer's answer -- up to the grace -- and only then gets
        # its CancelledError. A second cancel, or the grace running out, ends the wait at once.
        return await self._send_request(method, params, timeout, cancel_grace, on_sent, cancel_grace)[1]

    def request_nowait(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        cancel_grace: float = 0.0,
        on_sent: Callable[[RequestId], object] | None = None,
    ) -> asyncio.Future[Any]:
        """Send a request; return a future for its answer (no coroutine, no task per call).

        The same guarantees as ``request``: cancelling the future (or the task awaiting it)
        sends ``$/cancel_request`` and abandons the request; ``timeout`` fails it with
        ``RequestTimeoutError`` after ``$/cancel_request`` and ``cancel_grace`` for the answer.
        """
        return self._send_request(method, params, timeout, cancel_grace, on_sent, 0.0)[1]

    def _send_request(
        self,
        method: str,
        params: Any,
        timeout: float | None,
        cancel_grace: float,
        on_sent: Callable[[RequestId], object] | None,
        grace_on_cancel: float,
    ) -> tuple[RequestId, _Pending]:
        if self.state is not State.OPEN:
            raise self.closed_error(f"connection {self.state.value}: {self.close_reason or 'not open'}")
        ctx = _current.get()
        parent = ctx.id if ctx is not None and ctx.connection is self else None
        rid = self._core.send_request(method, params, parent=parent)
        fut = _Pending(loop=self._loop)
        fut.connection = self
        fut.rid = rid
        fut.timeout = timeout
        fut.grace = grace_on_cancel
        fut.giving_up = False
        self._waiters[rid] = fut
        self._schedule_flush()
        if on_sent is not None:
            on_sent(rid)
        # No wait for a writable transport: the answer cannot come before the request is
        # written, so awaiting it is backpressure enough (and the timeout covers both).
        if timeout is not None:
            self._add_deadline(rid, fut, timeout, cancel_grace, method)
        return rid, fut

    def _gave_up(self, fut: _Pending) -> None:
        """The caller cancelled the future of its request (directly, or by being cancelled)."""
        rid = fut.rid
        self._finished(fut)
        if rid in self._core.outgoing:
            if self.state is State.OPEN and self._core.send_cancel_request(rid):
                self._schedule_flush()  # ask the peer to stop
            self._core.abandon(rid)  # a late answer will meet the tombstone

    def _give_up_gracefully(self, fut: _Pending) -> None:
        """The caller of a request with a grace was cancelled: ask the peer to stop, and wait
        for its answer up to the grace (the caller gets its CancelledError after that)."""
        if self._core.send_cancel_request(fut.rid):
            self._schedule_flush()
        assert self._loop is not None
        self._loop.call_later(fut.grace, fut.stop_waiting)

    def _finished(self, fut: _Pending) -> None:
        if fut.timeout is not None:
            self._drop_deadline(fut.rid, fut.timeout)
        if self._waiters.get(fut.rid) is fut:
            del self._waiters[fut.rid]

    # Request deadlines without a Timeout object and a timer per request (asyncio.timeout costs
    # more than the rest of a round trip): one dict per distinct timeout value, in which
    # insertion order is deadline order, and one timer armed for the earliest deadline.

    def _add_deadline(self, rid: RequestId, fut: _Pending, timeout: float, grace: float, method: str) -> None:
        assert self._loop is not None
        deadline = self._loop.time() + timeout
        bucket = self._deadlines.get(timeout)
        if bucket is None:
            bucket = self._deadlines[timeout] = {}
        bucket[rid] = (deadline, fut, grace, method)
        if self._deadline_timer is None or deadline < self._deadline_at:
            self._arm_deadlines(deadline)

    def _drop_deadline(self, rid: RequestId, timeout: float) -> None:
        self._expired.pop(rid, None)
        bucket = self._deadlines.get(timeout)
        if bucket is not None:
            bucket.pop(rid, None)
            if not bucket and len(self._deadlines) > 16:
                del self._deadlines[timeout]

    def _arm_deadlines(self, at: float) -> None:
        assert self._loop is not None
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_at = at
        self._deadline_timer = self._loop.call_at(at, self._expire_deadlines)

    def _expire_deadlines(self) -> None:
        assert self._loop is not None
        self._deadline_timer = None
        now = self._loop.time()
        earliest: float | None = None
        for timeout, bucket in list(self._deadlines.items()):
            while bucket:
                rid = next(iter(bucket))
                deadline, fut, grace, method = bucket[rid]
                if deadline > now:
                    earliest = deadline if earliest is None else min(earliest, deadline)
                    break
                del bucket[rid]
                if not fut.done():
                    self._time_out(rid, fut, timeout, grace, method)
            if not bucket:
                del self._deadlines[timeout]
        if earliest is not None:
            self._arm_deadlines(earliest)

    def _time_out(self, rid: RequestId, fut: _Pending, timeout: float, grace: float, method: str) -> None:
        """``rid`` ran out of time: ``$/cancel_request``, then ``grace`` for the peer's answer."""
        if self.state is State.OPEN and self._core.send_cancel_request(rid):
            self._schedule_flush()
        error = RequestTimeoutError(
            f"{method} timed out after {timeout}s; $/cancel_request sent", {"requestId": rid}
        )
        if grace > 0 and self.state is State.OPEN:
            assert self._loop is not None
            self._expired[rid] = error
            self._loop.call_later(grace, self._fail, fut, error)
        else:
            self._fail(fut, error)

    def _fail(self, fut: asyncio.Future[Any], error: BaseException) -> None:
        """Fail our request's future (timeout, grace over) and abandon the request."""
        if fut.done():
            return
        fut.set_exception(error)
        assert isinstance(fut, _Pending)
        self._finished(fut)
        if fut.rid in self._core.outgoing:
            self._core.abandon(fut.rid)

    def cancel_request(self, rid: RequestId) -> bool:
        """Send ``$/cancel_request`` for our pending request ``rid`` (once); its caller keeps waiting."""
        if self.state is State.OPEN and self._core.send_cancel_request(rid):
            self._schedule_flush()
            return True
        return False

    def awaiting(self, rid: RequestId) -> bool:
        """Whether our request ``rid`` still waits for its answer, in event order.

        Unlike the core's ledger, which reflects a whole chunk of input at once, this is exact
        while the events of one chunk are dispatched (an update before the response sees True).
        """
        fut = self._waiters.get(rid)
        return fut is not None and not fut.done()

    def _answer_future(self, rid: RequestId) -> asyncio.Future[Any] | None:
        """The future to resolve with the answer to ``rid`` (None if nobody waits any more)."""
        fut = self._waiters.pop(rid, None)
        if fut is None or fut.done():
            return None
        if fut.timeout is not None:
            self._drop_deadline(rid, fut.timeout)
        return fut

    def _on_response(self, event: Response) -> None:
        fut = self._answer_future(event.id)
        if fut is not None:
            fut.set_result(event.result)

    def _on_error_response(self, event: ErrorResponse) -> None:
        timed_out = self._expired.get(event.id)  # read before _answer_future clears it
        fut = self._answer_future(event.id)
        if fut is not None:
            error = error_from_object({"code": event.code, "message": event.message, "data": event.data})
            if timed_out is not None and isinstance(error, RequestCancelledError):
                # Our timeout's $/cancel_request, confirmed by the peer within the grace.
                message = timed_out.message.replace("$/cancel_request sent", "the peer confirmed the cancel")
                confirmed = RequestTimeoutError(message, timed_out.data)
                confirmed.__cause__ = error
                error = confirmed
            fut.set_exception(error)

    # ------------------------------------------------------------------ notifications out

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification; waits while the transport is paused (backpressure).

        A sender that never awaits anything else still yields to the loop every
        ``YIELD_EVERY`` queued messages, so output is flushed and input (a cancel) is read.
        """
        self.notify_nowait(method, params)
        if self._write_paused:
            await self._wait_writable()
        elif self._core.pending_messages >= YIELD_EVERY:
            await asyncio.sleep(0)

    def notify_nowait(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting for the transport."""
        if self.state is not State.OPEN:
            raise self.closed_error(f"connection {self.state.value}: {self.close_reason or 'not open'}")
        self._core.send_notification(method, params)
        self._schedule_flush()

    # ------------------------------------------------------------------ reports

    def _on_quiet(self, event: Quiet) -> None:
        logger.debug("%s: %s for request %r (%s)", self.name, event.reason.value, event.id, event.method)

    def _on_violation(self, event: ProtocolViolation) -> None:
        self.violations += 1
        if event.kind is Violation.INVALID_RESPONSE:
            fut = self._answer_future(event.id)
            if fut is not None:
                fut.set_exception(RemoteProtocolError(f"invalid response from peer: {event.detail}"))
        level = logging.INFO if event.kind is Violation.UNKNOWN_CANCEL_ID else logging.WARNING
        logger.log(level, "%s: peer protocol violation (%s): %s", self.name, event.kind.value, event.detail)
        if self.on_violation is not None:
            try:
                self.on_violation(event)
            except Exception:
                logger.exception("%s: on_violation hook failed", self.name)

    def _on_end_of_input(self, event: EndOfInput) -> None:
        if self.state is not State.OPEN:
            return
        if self.on_peer_gone is not None:
            self.on_peer_gone("eof")
        else:
            self._begin_close("peer closed its output")

    # ------------------------------------------------------------------ closing

    def _begin_close(self, reason: str) -> None:
        if self._close_task is None and self._loop is not None:
            self._close_task = self._loop.create_task(self._close(reason))

    async def aclose(self, reason: str = "closed") -> None:
        """Close: answer every request in flight with -32800 (while writable), fail our waiters,
        stop every task, then close the transports. Idempotent; returns when all is done."""
        if self.state is State.NEW:
            self.state = State.CLOSED
            self.close_reason = reason
            self._closed_event.set()
            return
        self._begin_close(reason)
        assert self._close_task is not None
        await asyncio.shield(self._close_task)

    async def wait_closed(self) -> None:
        """Wait until the connection is closed (by either side)."""
        await self._closed_event.wait()

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    async def _close(self, reason: str) -> None:
        self.state = State.CLOSING
        self.close_reason = reason
        core = self._core
        try:
            # 1. Cancel every handler; each answers -32800 as it unwinds.
            tasks = list(self._tasks.values())
            for entry in core.incoming:
                entry.cancel_requested = True
            for task in tasks:
                task.cancel(f"connection closing: {reason}")
            # 2. Our own requests will never be answered now.
            for fut in list(self._waiters.values()):
                if not fut.done():
                    fut.set_exception(self.closed_error(f"connection closed before an answer: {reason}"))
            self._waiters.clear()
            for entry in core.outgoing:
                core.abandon(entry.id)
            # 3. Wait (bounded) for handlers to unwind.
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=self._close_timeout)
                for task in pending:
                    logger.warning("%s: handler %s ignores cancellation; answered for it", self.name, task)
            # 4. Backstop: anything still in flight is answered -32800 (or abandoned if unwritable).
            for entry in core.incoming:
                self._answer_error(
                    entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled: connection closing"
                )
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
                self._deadline_timer = None
            self._deadlines.clear()
            self._expired.clear()
            for task in list(self._background):
                task.cancel()
            if self._background:
                await asyncio.wait(list(self._background), timeout=self._close_timeout)
            # 5. Flush and close the transports.
            self._flush()
            core.close()
            await self._close_transports()
        finally:
            self.state = State.CLOSED
            self._closed_event.set()
            for callback in self.on_close:
                try:
                    callback(reason)
                except Exception:
                    logger.exception("%s: on_close callback failed", self.name)

    async def _close_transports(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if self._write_paused and not self._write_closed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._close_timeout):
                        await self._wait_writable()
            transport.close()
        for closer in self._closers:
            try:
                closer()
            except Exception:
                logger.debug("%s: closer failed", self.name, exc_info=True)
        # Let the transports' connection_lost callbacks run.
        await asyncio.sleep(0)


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Result types that cannot be awaitable (skips ``inspect.isawaitable`` on the hot path)."""


class _Pending(asyncio.Future[Any]):
    """The future of one of our requests. Cancelling it -- directly, or by cancelling the task
    that awaits it -- is giving up on the request: ``$/cancel_request`` goes out at once."""

    __slots__ = ("connection", "giving_up", "grace", "rid", "timeout")
    connection: Connection
    rid: RequestId
    timeout: float | None
    grace: float
    """How long a cancelled caller keeps waiting for the peer's answer (``cancel_grace``)."""
    giving_up: bool

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        if self.grace > 0 and not self.giving_up and self.connection.is_open:
            # A graceful request's first cancel: decline it (the awaiting task then gets its
            # CancelledError when this future completes) and ask the peer to stop.
            self.giving_up = True
            self.connection._give_up_gracefully(self)
            return False
        if not super().cancel(msg):
            return False
        self.connection._gave_up(self)
        return True

    def stop_waiting(self) -> None:
        """The grace is over (or a second cancel came): cancel for real."""
        self.grace = 0.0
        self.cancel()


async def _logged(awaitable: Awaitable[Any], what: str, name: str) -> Any:
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("%s: %s failed", name, what)
        return None


def _json_default(value: Any) -> Any:
    """Serialize pydantic models (e.g. ``acp.schema``) and other objects with ``model_dump``."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=True)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")
