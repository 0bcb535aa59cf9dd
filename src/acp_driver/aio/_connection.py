"""The asyncio connection: the sans-IO core driven by a transport, handler tasks and futures.

``Connection`` is assembled from one module per concern, around the core:

- ``_serving``: the peer's requests (a task per ``async def`` handler, so ``$/cancel_request``
  can cancel it; the asyncio half of "every request gets exactly one answer") and notifications;
- ``_requesting``: our requests as futures (give up -> ``$/cancel_request``, deadlines, grace,
  cascade) and our notifications (with backpressure);
- ``_outbox``: the one ordered writer to the transport;
- ``_transport``: the seam below -- NDJSON over pipes (``_ndjson``), or any message transport;
- here: the lifecycle (``State``), event dispatch, peer violations, and closing with every
  request answered or abandoned and no task left.

The protocol rules themselves (what is valid, what may be answered, and only once) are the
core's; this layer decides *when*, from tasks, futures and the transport's signals.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_TOMBSTONES,
    CancelRequest,
    ConnectionClosedError,
    EndOfInput,
    Endpoint,
    ErrorResponse,
    Notification,
    NotificationRun,
    ProtocolViolation,
    Quiet,
    Received,
    RemoteProtocolError,
    Request,
    RequestId,
    RequestTimeoutError,
    Response,
    Tracer,
    Violation,
    worth_logging,
)
from ._clock import Clock
from ._deadlines import Deadlines
from ._outbox import Outbox
from ._requesting import PendingRequest, Requesting
from ._serving import HandlerSpec, NotificationHandler, Serving
from ._state import State
from ._transport import Transport

logger = logging.getLogger("acp_driver.connection")


def _guarded(tracer: Tracer, name: str) -> Tracer:
    """The tracer, made harmless: an exception it raises is logged (the first, then every
    hundredth) and never reaches the read loop or the caller sending a message."""
    failures = 0

    def traced(direction: str, data: bytes) -> None:
        nonlocal failures
        try:
            tracer(direction, data)
        except Exception:
            failures += 1
            if failures == 1 or failures % 100 == 0:
                logger.exception(
                    "%s: the tracer failed (%d times so far); the message goes on", name, failures
                )

    return traced


class Connection(Serving, Requesting):
    """A JSON-RPC 2.0 peer over a message transport.

    Register handlers with ``on_request``/``on_notification``, then attach a transport with
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
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.clock = clock
        """What request deadlines, grace timers and handler timeouts run on (None: the event
        loop's time); tests inject a fake one."""
        self.max_message_bytes = max_line_bytes
        """The largest message a transport delivers (bigger ones are dropped and reported)."""
        self._honour_cancel_request = honour_cancel_request
        self._core = Endpoint(
            max_line_bytes=max_line_bytes,
            max_tombstones=max_tombstones,
            default=json_default if json_default is not None else _json_default,
            tracer=None if tracer is None else _guarded(tracer, name),
        )
        self._outbox = Outbox(self._core, self.write_lost)
        self._close_timeout = close_timeout
        # serving
        self._requests: dict[str, HandlerSpec] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._notification_runs: dict[str, Callable[[list[Any]], None]] = {}
        self._fallback: Callable[[str, Any], Awaitable[Any]] | None = None
        self._tasks: dict[RequestId, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._cancel_hooks: dict[str, Callable[[RequestId], None]] = {}
        # requesting
        self._waiters: dict[RequestId, PendingRequest] = {}
        self._deadlines: Deadlines[PendingRequest] | None = None
        self._expired: dict[RequestId, RequestTimeoutError] = {}
        """Requests past their timeout, waiting out their grace for the peer's answer."""
        # lifecycle
        self._loop: asyncio.AbstractEventLoop | None = None
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
        self.violation_counts: collections.Counter[Violation] = collections.Counter()
        """How many of each kind (the log shows the first of each kind, then only counts)."""
        self.on_peer_gone: Callable[[str], object] | None = None
        """If set, called with ``"eof"`` when the peer's output ends, or ``"write_lost"`` when
        it stops reading, instead of closing at once: the owner closes (e.g. once it knows the
        peer process's exit status, to name it in the errors)."""
        self._dispatch: dict[type, Callable[[Any], None]] = {
            Request: self._on_request,
            CancelRequest: self._on_cancel_request,
            ErrorResponse: self._on_error_response,
            Quiet: self._on_quiet,
            ProtocolViolation: self._on_violation,
            EndOfInput: self._on_end_of_input,
        }

    # ------------------------------------------------------------------ introspection

    @property
    def core(self) -> Endpoint:
        """The sans-IO core (ledgers and state); read it, do not drive it."""
        return self._core

    @property
    def in_flight(self) -> tuple[int, int]:
        """(incoming requests not yet answered, outgoing requests not yet answered)."""
        return len(self._core.incoming), len(self._core.outgoing)

    @property
    def is_open(self) -> bool:
        return self.state is State.OPEN

    @property
    def honours_cancel_request(self) -> bool:
        """Whether ``$/cancel_request`` from the peer is acted on (a test fault may turn it off)."""
        return self._honour_cancel_request

    def _not_open_error(self) -> ConnectionClosedError:
        return self.closed_error(f"connection {self.state.value}: {self.close_reason or 'not open'}")

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    @property
    def transport(self) -> Transport | None:
        return self._outbox.transport

    # ------------------------------------------------------------------ transports

    def attach(self, transport: Transport) -> None:
        """Start talking over ``transport`` (see ``_transport`` for the contract both ways)."""
        if self.state is not State.NEW:
            raise RuntimeError("connection already attached")
        self._loop = asyncio.get_running_loop()
        self._outbox.attach(transport, self._loop)
        self.state = State.OPEN

    async def open_pipes(self, read_pipe: Any, write_pipe: Any) -> None:
        """NDJSON over pipe file objects (or fds wrapped by ``open``)."""
        from ._ndjson import open_pipes

        await open_pipes(self, read_pipe, write_pipe)

    async def open_streams(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """NDJSON over an asyncio stream pair (sockets, anything ``asyncio`` streams wrap)."""
        from ._ndjson import open_streams

        await open_streams(self, reader, writer)

    # ------------------------------------------------------------------ what the transport calls

    def feed_messages(self, messages: Sequence[Received]) -> None:
        """Messages from the peer, in order."""
        if self.state is State.CLOSED:
            return
        dispatch = self._dispatch
        waiters = self._waiters
        notifications = self._notifications
        for event in self._core.receive_messages(messages):
            # Notifications and results are handled here, the rest through ``dispatch``: one
            # place for each, and no call per message on the hot paths.
            if type(event) is NotificationRun:
                self._handle_run(event.method, event.params)
                continue
            if type(event) is Notification:
                method = event.method
                handler = notifications.get(method)
                if handler is None:
                    logger.debug("%s: ignoring notification %s", self.name, method)
                    continue
                try:
                    outcome = handler(event.params)
                except Exception:
                    logger.exception("%s: notification handler for %s failed", self.name, method)
                    continue
                if outcome is not None and inspect.isawaitable(outcome):
                    self._spawn(outcome, f"notification {method}")
                continue
            if type(event) is Response:
                # ``_answer_future``, inlined for a result: the call costs ~0.6 % of a request's
                # instructions (host only, 1000 concurrent, ``benchmarks/instructions.py``),
                # over the 0.5 % an inline copy must save to stay (docs/benchmarks.md).
                fut = waiters.pop(event.id, None)
                if fut is not None and not fut.done():
                    if fut.timer is not None:
                        self._finished(fut)
                    if fut.on_result is not None:
                        self._result_read(fut, event.result)  # first: what it wakes runs first
                    fut.set_result(event.result)
            else:
                dispatch[type(event)](event)
        if self._core.has_data_to_send:
            self._outbox.schedule()

    def feed_eof(self) -> None:
        """The peer's output ended."""
        if self._core.their_eof or self.state is State.CLOSED:
            return
        for event in self._core.receive_eof():
            self._dispatch[type(event)](event)

    def pause_writing(self) -> None:
        self._outbox.pause()

    def resume_writing(self) -> None:
        self._outbox.resume()

    def write_lost(self, exc: BaseException | None) -> None:
        """The write side is gone (the peer stopped reading)."""
        if not self._outbox.lost():
            return
        if exc is not None and not isinstance(exc, (OSError, RuntimeError)):
            # Not the peer going away but our transport failing (encoding, a bug): what was
            # queued is lost, so no answer can come -- fail every waiter now, not at the close.
            logger.error("%s: writing to the transport failed", self.name, exc_info=exc)
            self._fail_all_waiters(f"writing to the transport failed: {exc!r}")
        if self.state is State.OPEN:
            if self.on_peer_gone is not None:
                self.on_peer_gone("write_lost")
                return
            reason = "peer stopped reading" + (f": {exc}" if exc else "")
            self._begin_close(reason)

    # ------------------------------------------------------------------ writing

    def send_raw(self, message: bytes) -> None:
        """Send one message's text as it is, bypassing the core (after what is queued).

        For audits and tests that must send what a correct peer never would (malformed JSON).
        """
        self._outbox.send_raw(message)

    def close_write(self) -> None:
        """Close our output after what is queued (the peer sees end of input); keep reading."""
        self._outbox.close_write()

    @property
    def writable(self) -> bool:
        return self._outbox.writable

    @property
    def write_paused(self) -> bool:
        """The transport's buffer is full (backpressure); it resumes when the peer reads."""
        return self._outbox.paused

    # ------------------------------------------------------------------ reports

    def _on_quiet(self, event: Quiet) -> None:
        logger.debug("%s: %s for request %r (%s)", self.name, event.reason.value, event.id, event.method)

    def _on_violation(self, event: ProtocolViolation) -> None:
        self.violations += 1
        kind = event.kind
        if kind is Violation.INVALID_RESPONSE:
            fut = self._answer_future(event.id)
            if fut is not None:
                fut.set_exception(RemoteProtocolError(f"invalid response from peer: {event.detail}"))
        counts = self.violation_counts
        counts[kind] += 1
        n = counts[kind]
        if worth_logging(n):
            # Rate-limited: a peer that sends garbage on every line must not flood the log.
            level = logging.INFO if kind is Violation.UNKNOWN_CANCEL_ID else logging.WARNING
            if n == 1:
                logger.log(level, "%s: peer protocol violation (%s): %s", self.name, kind.value, event.detail)
            else:
                logger.log(
                    level,
                    "%s: peer protocol violation (%s), %d so far (only every 10x logged); latest: %s",
                    self.name,
                    kind.value,
                    n,
                    event.detail,
                )
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
        stop every task, then close the transport. Idempotent; returns when all is done."""
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

    async def _close(self, reason: str) -> None:
        self.state = State.CLOSING
        self.close_reason = reason
        try:
            # 1. Cancel every handler; each answers -32800 as it unwinds.
            tasks = self._cancel_all_incoming(reason)
            # 2. Our own requests will never be answered now.
            self._fail_all_waiters(reason)
            # 3. Wait (bounded) for handlers to unwind.
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=self._close_timeout)
                for task in pending:
                    logger.warning("%s: handler %s ignores cancellation; answered for it", self.name, task)
            # 4. Backstop: anything still in flight is answered -32800 (or abandoned if unwritable).
            self._answer_leftovers()
            for task in list(self._background):
                task.cancel()
            if self._background:
                await asyncio.wait(list(self._background), timeout=self._close_timeout)
            # 5. Flush and close the transport.
            self._outbox.flush()
            self._core.close()
            await self._close_transport()
        finally:
            self.state = State.CLOSED
            self._closed_event.set()
            for callback in self.on_close:
                try:
                    callback(reason)
                except Exception:
                    logger.exception("%s: on_close callback failed", self.name)

    async def _close_transport(self) -> None:
        outbox = self._outbox
        transport = outbox.transport
        if transport is None:
            return
        if outbox.paused and not outbox.closed and not transport.is_closing():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._close_timeout):
                    await outbox.wait_writable()
        try:
            transport.close()
        except Exception:
            logger.debug("%s: closing the transport failed", self.name, exc_info=True)
        # Let the transport's connection_lost callbacks run.
        await asyncio.sleep(0)


def _json_default(value: Any) -> Any:
    """Serialize pydantic models (e.g. ``acp.schema``) and other objects with ``model_dump``."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=True)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")
