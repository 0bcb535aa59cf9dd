"""The serving side of a connection: handlers for the peer's requests and notifications.

The rule is the core's -- a request is answered at most once (its ledger refuses a second
answer) -- and the spec's: every request gets a response. What this module adds is the
asyncio half of "exactly one": whatever happens to the task serving a request, an answer is
attempted exactly where the outcome is known:

- the handler returns -> its result; raises ``RpcError`` -> that error; raises anything else ->
  ``-32603`` (the text stays in our log: it may hold paths or secrets);
- it is cancelled (``$/cancel_request``, its timeout, the connection closing) -> ``-32800``,
  after cascading ``$/cancel_request`` to the requests it made (``cascade_cancel``);
- its task is cancelled before its first step, or dies of a ``BaseException`` -> the task's
  done-callback answers ``-32800``/``-32603`` for it;
- a plain ``def`` handler is answered inline, with no task (there is nothing to cancel in work
  that never waits).

An answer that cannot be written any more (the write side is gone) closes the ledger entry as
abandoned instead. ``$/cancel_request`` is honoured by cancelling the serving task.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core import CancelRequest, Endpoint, ErrorCode, InFlight, Request, RequestId, RpcError
from ._clock import Clock, timeout_on
from ._context import RequestContext, current
from ._outbox import Outbox
from ._state import State

logger = logging.getLogger("acp_driver.connection")

RequestHandler = Callable[[Any], Awaitable[Any]]
"""``async def handler(params) -> result``. Raise ``RpcError`` to answer with a specific error."""
NotificationHandler = Callable[[Any], Awaitable[None] | None]
"""``def handler(params)`` (called in order, inline) or ``async def`` (started in order, as a task)."""
HandlerSpec = tuple[Any, float | None, bool]
"""(handler, timeout, answered inline)."""

_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Result types that cannot be awaitable (skips ``inspect.isawaitable`` on the hot path)."""


class Serving:
    """Mixin of ``Connection``: the peer's requests and notifications (see the module docstring)."""

    name: str
    clock: Clock | None
    """What a handler's ``timeout`` is measured on (None: the event loop's time)."""
    _core: Endpoint
    _outbox: Outbox
    _loop: asyncio.AbstractEventLoop | None
    _honour_cancel_request: bool
    _requests: dict[str, HandlerSpec]
    _notifications: dict[str, NotificationHandler]
    _notification_runs: dict[str, Callable[[list[Any]], None]]
    _fallback: Callable[[str, Any], Awaitable[Any]] | None
    _tasks: dict[RequestId, asyncio.Task[None]]
    _background: set[asyncio.Task[Any]]
    _cancel_hooks: dict[str, Callable[[RequestId], None]]
    state: State

    if TYPE_CHECKING:  # provided by the requesting side and by the connection

        def cascade_cancel(self, parent: RequestId, reason: str = "parent request cancelled") -> int: ...

    # ------------------------------------------------------------------ registry

    def on_request(
        self,
        method: str,
        handler: RequestHandler | Callable[[Any], Any],
        *,
        timeout: float | None = None,
        on_cancel: Callable[[RequestId], None] | None = None,
    ) -> None:
        """Serve ``method`` with ``handler``; ``timeout`` (seconds on the connection's clock)
        cancels it internally: answer -32800, and ``$/cancel_request`` for the requests it made.

        An ``async def`` handler runs in a task of its own (so ``$/cancel_request`` can cancel
        it). A plain ``def`` handler is answered inline, as soon as its request is read, with no
        task: for trivial methods (there is nothing to cancel in work that never waits).

        ``on_cancel(request_id)``, if given, is called for a ``$/cancel_request`` naming a request
        of this method *instead of* cancelling its task: for handlers that answer a cancel with a
        result of their own (the handler sees ``current_request().cancel_requested`` too, for a
        cancel that arrived before it started).
        """
        inline = timeout is None and not inspect.iscoroutinefunction(handler)
        self._requests[method] = (handler, timeout, inline)
        if on_cancel is not None:
            self._cancel_hooks[method] = on_cancel
        else:
            self._cancel_hooks.pop(method, None)

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        """Handle the notification ``method``. Unknown notifications are ignored (debug log)."""
        self._notification_runs.pop(method, None)
        self._core.run_methods = frozenset(self._notification_runs)
        self._notifications[method] = handler

    def on_notification_run(self, method: str, handler: Callable[[list[Any]], None]) -> None:
        """Handle the notification ``method`` a run at a time: ``handler(params_list)`` gets the
        params of consecutive ``method`` notifications of one read, in order (a run ends at any
        other message, so what came before and after it is handled in between, as it came).

        For streams (``session/update``): one call per read instead of one per message. The
        handler is a plain ``def``; an exception is logged, and the next run is handled as usual.
        """
        self._notifications.pop(method, None)
        self._notification_runs[method] = handler
        self._core.run_methods = frozenset(self._notification_runs)

    def on_unknown_request(self, handler: Callable[[str, Any], Awaitable[Any]] | None) -> None:
        """Serve methods with no handler (``handler(method, params)``); by default they get -32601."""
        self._fallback = handler

    # ------------------------------------------------------------------ incoming requests

    def _on_request(self, event: Request) -> None:
        core = self._core
        if self.state is not State.OPEN:
            if core.closed or not self._outbox.writable:
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
        token = current.set(RequestContext(self, entry))  # type: ignore[arg-type]
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
            current.reset(token)

    async def _serve(
        self, entry: InFlight, params: Any, handler: RequestHandler, timeout: float | None
    ) -> None:
        current.set(RequestContext(self, entry))  # type: ignore[arg-type]
        try:
            if timeout is None:
                result = await handler(params)
            else:
                try:
                    async with timeout_on(self.clock, timeout) as scope:
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
            # Spec (cancellation.mdx), on $/cancel_request: "MUST send one of these responses".
            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled")
        elif task.exception() is not None:
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
        elif self._core.incoming.get(entry.id) is entry:  # pragma: no cover - _serve always answers
            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, "handler ended without an answer")

    def _answer_result(self, entry: InFlight, result: Any) -> None:
        core = self._core
        if core.incoming.get(entry.id) is not entry:
            return  # already answered (e.g. by close) -- the ledger keeps it to one answer
        if not self._outbox.writable:
            core.abandon_incoming(entry.id)
            return
        try:
            core.send_result(entry.id, result)
        except TypeError as exc:
            logger.error("%s: result of %s is not JSON-serializable: %s", self.name, entry.method, exc)
            core.send_error(entry.id, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")
        self._outbox.schedule()

    def _answer_error(self, entry: InFlight, code: int, message: str, data: Any = None) -> None:
        core = self._core
        if core.incoming.get(entry.id) is not entry:
            return
        if not self._outbox.writable:
            core.abandon_incoming(entry.id)
            return
        try:
            core.send_error(entry.id, code, message, data)
        except TypeError:
            core.send_error(entry.id, code, message)
        self._outbox.schedule()

    def _on_cancel_request(self, event: CancelRequest) -> None:
        if not self._honour_cancel_request:
            logger.debug("%s: not honouring $/cancel_request for %r", self.name, event.id)
            return
        task = self._tasks.get(event.id)
        if task is None:
            return
        if self._cancel_hooks:
            entry = self._core.incoming.get(event.id)
            hook = self._cancel_hooks.get(entry.method) if entry is not None else None
            if hook is not None:
                try:
                    hook(event.id)
                except Exception:
                    logger.exception(
                        "%s: cancel hook for %r failed; cancelling its task", self.name, event.id
                    )
                    task.cancel("$/cancel_request")
                return
        task.cancel("$/cancel_request")

    def _cascade(self, parent: InFlight) -> None:
        self.cascade_cancel(parent.id, f"parent request {parent.id!r} ({parent.method}) cancelled")

    def _cancel_all_incoming(self, reason: str) -> list[asyncio.Task[None]]:
        """Closing: every request in flight is cancelled; returns the tasks serving them."""
        for entry in self._core.incoming:
            entry.cancel_requested = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel(f"connection closing: {reason}")
        return tasks

    def _answer_leftovers(self) -> None:
        """Closing, backstop: anything still in flight is answered -32800 (or abandoned)."""
        for entry in self._core.incoming:
            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled: connection closing")

    # ------------------------------------------------------------------ notifications

    def _handle_run(self, method: str, run: list[Any]) -> None:
        """A run of ``method`` notifications (see ``on_notification_run``)."""
        try:
            self._notification_runs[method](run)
        except Exception:
            logger.exception("%s: notification handler for %s failed", self.name, method)

    def _spawn(self, awaitable: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        assert self._loop is not None
        task = self._loop.create_task(_logged(awaitable, what, self.name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task


async def _logged(awaitable: Awaitable[Any], what: str, name: str) -> Any:
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("%s: %s failed", name, what)
        return None
