"""The requesting side of a connection: our requests to the peer, as futures, and notifications.

- Each outgoing request is a ``PendingRequest`` future (no coroutine or task per call). A
  caller that gives up -- the future cancelled, the task awaiting it cancelled, or its timeout
  -- sends ``$/cancel_request`` once (the core sends it at most once per request), then either
  stops waiting at once or waits for the peer's answer up to a grace.
- A request made while serving one of the peer's requests records it as its parent (from the
  ``RequestContext``): cancelling the parent cancels its children (``cascade_cancel``).
- Deadlines: ``Deadlines`` (one timer for all, nothing to undo when the answer comes). A timed-out request gets ``$/cancel_request``
  and ``cancel_grace`` for the peer's answer; a ``-32800`` within it is reported as the timeout
  the peer confirmed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import (
    ConnectionClosedError,
    Endpoint,
    ErrorResponse,
    RequestCancelledError,
    RequestId,
    RequestTimeoutError,
    error_from_object,
)
from ._clock import Clock, Timer
from ._context import current
from ._deadlines import Deadlines
from ._outbox import Outbox
from ._state import State

logger = logging.getLogger("acp_driver.connection")

YIELD_EVERY = 64
"""``notify`` yields to the loop when this many messages wait unflushed."""


class PendingRequest(asyncio.Future[Any]):
    """The future of one of our requests. Cancelling it -- directly, or by cancelling the task
    that awaits it -- is giving up on the request: ``$/cancel_request`` goes out at once."""

    # Set for every request: slots. The rest keep their class default unless a request sets
    # them (then in the instance dict asyncio's Future has anyway): fewer stores per request.
    __slots__ = ("connection", "deadline", "method", "rid", "timeout")
    connection: Requesting
    deadline: float
    """When ``timeout`` elapses (loop time), once ``Deadlines`` has it."""
    rid: RequestId
    method: str
    timeout: float | None
    timeout_grace: float = 0.0
    """How long a timed-out request waits for the peer's answer (``cancel_grace``)."""
    grace: float = 0.0
    """How long a cancelled caller keeps waiting for the peer's answer."""
    giving_up: bool = False
    timer: Timer | None = None
    """The grace being waited out, if any (cancelled when the answer comes)."""
    on_result: Callable[[Any], object] | None = None
    """Called with the result as the peer's answer is read (see ``request_nowait``)."""

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
        self.timer = None
        self.grace = 0.0
        self.cancel()


class Requesting:
    """Mixin of ``Connection``: our requests and notifications (see the module docstring)."""

    _core: Endpoint
    _outbox: Outbox
    _loop: asyncio.AbstractEventLoop | None
    clock: Clock | None
    _waiters: dict[RequestId, PendingRequest]
    state: State
    _deadlines: Deadlines[PendingRequest] | None
    _expired: dict[RequestId, RequestTimeoutError]
    closed_error: Callable[[str], ConnectionClosedError]

    if TYPE_CHECKING:  # provided by the connection

        @property
        def is_open(self) -> bool: ...

        def _not_open_error(self) -> ConnectionClosedError: ...

    # ------------------------------------------------------------------ sending

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
        # With a grace, the future declines the caller's first cancel (``PendingRequest.cancel``):
        # the task keeps waiting for the peer's answer -- up to the grace -- and only then gets
        # its CancelledError. A second cancel, or the grace running out, ends the wait at once.
        fut = self.request_nowait(method, params, timeout=timeout, cancel_grace=cancel_grace, on_sent=on_sent)
        if cancel_grace:
            fut.grace = cancel_grace  # nothing can cancel it before this line: no await since
        return await fut

    def request_nowait(
        self,
        method: str,
        params: Any = None,
        timeout: float | None = None,
        *,
        cancel_grace: float = 0.0,
        on_sent: Callable[[RequestId], object] | None = None,
        on_result: Callable[[Any], object] | None = None,
    ) -> PendingRequest:
        """Send a request; return a future for its answer (no coroutine, no task per call).

        The same guarantees as ``request``: cancelling the future (or the task awaiting it)
        sends ``$/cancel_request`` and abandons the request; ``timeout`` fails it with
        ``RequestTimeoutError`` after ``$/cancel_request`` and ``cancel_grace`` for the answer.

        ``on_result(result)``, if given, is called as soon as a result is read, before the
        next message of the same read is handled and just before the future gets the result:
        one loop iteration before a task awaiting the future resumes, and what it wakes resumes
        before that task. It is called for a result only (an error answer, a timeout or the
        close are seen by awaiting the future); an exception it raises is logged, never raised
        into the read loop.
        """
        if self.state is not State.OPEN:
            raise self._not_open_error()
        outbox = self._outbox
        if outbox.closed:
            raise self.closed_error("cannot send a request: the write side is closed")
        ctx = current.get()
        parent = ctx.id if ctx is not None and ctx.connection is self else None
        rid = self._core.send_request(method, params, parent)  # positional: the cheaper call
        fut = PendingRequest(loop=self._loop)
        fut.connection = self
        fut.rid = rid
        fut.method = method
        fut.timeout = timeout
        if cancel_grace:
            fut.timeout_grace = cancel_grace
        if on_result is not None:
            fut.on_result = on_result
        self._waiters[rid] = fut
        if not outbox.scheduled:
            outbox.schedule()
        if on_sent is not None:
            on_sent(rid)
        # No wait for a writable transport: the answer cannot come before the request is
        # written, so awaiting it is backpressure enough (and the timeout covers both).
        if timeout is not None:
            deadlines = self._deadlines
            if deadlines is None:
                assert self._loop is not None
                deadlines = self._deadlines = Deadlines(self._loop, self._time_out, self.clock)
            deadlines.add(timeout, fut)  # nothing to remove when answered: see ``Deadlines``
        return fut

    def cancel_request(self, rid: RequestId) -> bool:
        """Send ``$/cancel_request`` for our pending request ``rid`` (once); its caller keeps waiting."""
        if self.is_open and self._core.send_cancel_request(rid):
            self._outbox.schedule()
            return True
        return False

    def awaiting(self, rid: RequestId) -> bool:
        """Whether our request ``rid`` still waits for its answer, in event order.

        Unlike the core's ledger, which reflects a whole chunk of input at once, this is exact
        while the events of one chunk are dispatched (an update before the response sees True).
        """
        fut = self._waiters.get(rid)
        return fut is not None and not fut.done()

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

    # ------------------------------------------------------------------ giving up

    def _gave_up(self, fut: PendingRequest) -> None:
        """The caller cancelled the future of its request (directly, or by being cancelled)."""
        rid = fut.rid
        self._finished(fut)
        if rid in self._core.outgoing:
            if self.is_open and self._core.send_cancel_request(rid):
                self._outbox.schedule()  # ask the peer to stop
            self._core.abandon(rid)  # a late answer will meet the tombstone

    def _give_up_gracefully(self, fut: PendingRequest) -> None:
        """The caller of a request with a grace was cancelled: ask the peer to stop, and wait
        for its answer up to the grace (the caller gets its CancelledError after that)."""
        if self._core.send_cancel_request(fut.rid):
            self._outbox.schedule()
        fut.timer = self._call_later(fut.grace, fut.stop_waiting)

    def _call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        """A grace timer, on the injected clock if there is one (else the loop's)."""
        clock = self.clock
        if clock is not None:
            return clock.call_at(clock.now() + delay, callback)
        assert self._loop is not None
        return self._loop.call_later(delay, callback)

    def _finished(self, fut: PendingRequest) -> None:
        # The deadline needs no removal: ``Deadlines`` skips a future that is done.
        if fut.timer is not None:
            fut.timer.cancel()  # the grace is not waited out any more
            fut.timer = None
            self._expired.pop(fut.rid, None)
        if self._waiters.get(fut.rid) is fut:
            del self._waiters[fut.rid]

    def _time_out(self, fut: PendingRequest) -> None:
        """Its timeout elapsed: ``$/cancel_request``, then its grace for the peer's answer."""
        if fut.done():
            return
        rid = fut.rid
        if self.is_open and self._core.send_cancel_request(rid):
            self._outbox.schedule()
        error = RequestTimeoutError(
            f"{fut.method} timed out after {fut.timeout}s; $/cancel_request sent", {"requestId": rid}
        )
        if fut.timeout_grace > 0 and self.is_open:
            self._expired[rid] = error
            fut.timer = self._call_later(fut.timeout_grace, lambda: self._fail(fut, error))
        else:
            self._fail(fut, error)

    def _fail(self, fut: PendingRequest, error: BaseException) -> None:
        """Fail our request's future (timeout, grace over) and abandon the request."""
        if fut.done():
            return
        fut.timer = None
        if self._expired:
            self._expired.pop(fut.rid, None)
        fut.set_exception(error)
        self._finished(fut)
        if fut.rid in self._core.outgoing:
            self._core.abandon(fut.rid)

    def _fail_all_waiters(self, reason: str) -> None:
        """Closing: our requests will never be answered now."""
        for fut in list(self._waiters.values()):
            if not fut.done():
                if fut.timer is not None:
                    fut.timer.cancel()
                    fut.timer = None
                fut.set_exception(self.closed_error(f"connection closed before an answer: {reason}"))
        self._waiters.clear()
        core = self._core
        for entry in core.outgoing:
            core.abandon(entry.id)
        if self._deadlines is not None:
            self._deadlines.clear()
        self._expired.clear()

    # ------------------------------------------------------------------ answers

    def _answer_future(self, rid: RequestId) -> PendingRequest | None:
        """The future to resolve with the answer to ``rid`` (None if nobody waits any more)."""
        fut = self._waiters.pop(rid, None)
        if fut is None or fut.done():
            return None
        if fut.timer is not None:
            self._finished(fut)
        return fut

    def _result_read(self, fut: PendingRequest, result: Any) -> None:
        """Call the request's ``on_result`` (the read loop goes on whatever it does)."""
        on_result = fut.on_result
        assert on_result is not None
        fut.on_result = None  # called once; and no cycle left for the collector (its owner holds fut)
        try:
            on_result(result)
        except Exception:
            logger.exception("on_result callback of %s (id %r) failed", fut.method, fut.rid)

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
        if self._outbox.paused:
            await self._outbox.wait_writable()
        elif self._core.pending_messages >= YIELD_EVERY:
            await asyncio.sleep(0)

    def notify_nowait(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting for the transport."""
        if not self.is_open:
            raise self._not_open_error()
        if self._outbox.closed:
            raise self.closed_error("cannot send a notification: the write side is closed")
        self._core.send_notification(method, params)
        self._outbox.schedule()
