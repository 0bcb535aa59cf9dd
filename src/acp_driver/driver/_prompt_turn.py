"""A prompt turn on the host side: its updates, its result, and its cancel.

Every decision about the turn's cancellation -- which ladder step is due, when the next one
is, how the turn resolved -- is made by the pure ``core.TurnMachine``, and carried out by the
one ``aio.LadderRunner`` on the agent's clock against the agent's ``HostControl``. A
``PromptTurn`` reports what it observes (the cancel, the kill, the prompt's answer or the
agent's end) and does its own part of each rung (``_on_rung``):

- ``session_cancel``: the host side first -- spec (prompt-turn.mdx): "The Client MUST respond
  to all pending ``session/request_permission`` requests with the ``cancelled`` outcome" --
  then the runner sends ``session/cancel``; the turn's other agent requests are cancelled, its
  terminals killed, its unfinished tool calls marked cancelled (spec SHOULD);
- ``cancel_request``: ``$/cancel_request`` for the ``session/prompt``;
- ``terminate``/``kill``: SIGTERM/SIGKILL to the agent's process group; for a remote agent
  (``connect``) there is no process here: close the connection gracefully (WebSocket close,
  HTTP ``DELETE``), then abort it -- the server ends the agent's work.

When the turn starts, whose an update is and when the turn ends are the session's lifecycle's
(``core/_lifecycle.py``, one per protocol version): the turn reports its prompt's answer as it
is read (``on_result``: in wire order with the updates around it) and its error when its one
run loop sees it, and carries out the decisions it gets back (``decided``). A cancel asks the
lifecycle for its plan: the ladder, or -- v2, a prompt held behind other work -- the held
ladder (``$/cancel_request`` for it; unconfirmed within the budget, the host resolves the turn,
and cancels its span at once should the agent insert it later).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Generator
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..aio import LadderRunner
from ..core import (
    CancelLadder,
    CancelPlan,
    ConnectionClosedError,
    Decided,
    Decision,
    ErrorCode,
    LocalProtocolError,
    Observation,
    RequestCancelledError,
    RequestId,
    Resolution,
    RpcError,
    Rung,
    Seen,
    TurnMachine,
)
from ._results import CancelOutcome, ToolCallState, TurnResult, outcome_from_ladder
from ._updates import ToolCall as ToolCallView
from ._updates import ToolCallUpdate as ToolCallUpdateView
from ._updates import Update, make_update

if TYPE_CHECKING:
    from ._session import SessionHandle

logger = logging.getLogger("acp_driver.driver")

_CANCEL = Observation(Seen.CANCEL)
_WITHDRAW = Observation(Seen.WITHDRAW)
_INSERTED = Observation(Seen.INSERTED)
_KILL_NOW = Observation(Seen.KILL_NOW)


class PromptTurn:
    """One running prompt turn. Iterate it for updates; await it for the ``TurnResult``."""

    def __init__(self, session: SessionHandle, prompt: list[dict[str, Any]]) -> None:
        self.session = session
        self.agent = agent = session.agent
        self.prompt = prompt
        self._clock = agent.clock
        self.started_at = self._clock.now()
        self.request_id: Any = None
        self.tool_calls: dict[str, ToolCallState] = {}
        self.plan: list[dict[str, Any]] = []
        self.late_updates: list[Update] = []
        """Updates that arrived after this turn's response (a peer violation; reported here)."""
        self.result: TurnResult | None = None
        self._machine = TurnMachine(
            agent.ladder_policy, exit_wait=agent.reap_timeout, remote=agent.remote, profile=agent.profile
        )
        self._runner = LadderRunner(
            self._machine,
            agent.control,
            self._clock,
            sessions=lambda: (session.id,),
            requests=self._prompt_requests,
            on_rung=self._on_rung,
            on_resolved=self._on_resolved,
            name=f"turn of {session.id}",
        )
        self._ending: tuple[str | None, RpcError | None] | None = None
        """What the observation being fed says the turn ended with (None: a tick)."""
        self._buffer: collections.deque[dict[str, Any]] = collections.deque()
        """The turn's updates not read yet, as the agent sent them: each becomes its typed view
        when read, so a stream waiting here is plain data (no object per update for the
        garbage collector to scan)."""
        self._waiter: asyncio.Future[None] | None = None
        self._done = asyncio.Event()
        self.incoming: dict[Any, tuple[str, asyncio.Task[Any]]] = {}
        """The agent's requests being served as work of this turn: id -> (method, task)."""
        self._release_task: asyncio.Task[Any] | None = None
        self._kill_task: asyncio.Task[Any] | None = None
        self.message_id: str | None = None
        """v2: the ``messageId`` the agent gave the prompt when it inserted it."""
        self.prompt_answer: asyncio.Future[Any] | None = None
        """The future of the ``session/prompt`` request (None if it could not be sent)."""
        answer = self._send_prompt()
        self._task = asyncio.get_running_loop().create_task(self._run(answer), name=f"prompt {session.id}")

    # ------------------------------------------------------------------ consuming

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def stop_reason(self) -> str | None:
        return self.result.stop_reason if self.result else None

    @property
    def cancel_requested(self) -> bool:
        """The host asked to cancel this turn (or to kill it; v2: or to withdraw it)."""
        return self._machine.cancel_requested

    @property
    def ladder(self) -> CancelLadder | None:
        return self._machine.ladder

    def __aiter__(self) -> AsyncIterator[Update]:
        return self

    @property
    def unread(self) -> list[Update]:
        """The updates received and not read yet, oldest first (reading them does not consume)."""
        return [make_update(self.session.id, raw) for raw in self._buffer]

    async def __anext__(self) -> Update:
        while True:
            if self._buffer:
                return make_update(self.session.id, self._buffer.popleft())
            if self.result is not None:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self.wait().__await__()

    async def wait(self) -> TurnResult:
        """Wait for the turn to end (updates stay available to iterate)."""
        await self._done.wait()
        assert self.result is not None
        return self.result

    def _wake(self) -> None:
        """The reader waiting for an update (if any) runs: woken once, so the updates after this
        one find no one waiting until it reads them all and waits again."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ updates in

    def accept(self, update: Update) -> None:
        """An update of this turn (the session decided it belongs here)."""
        kind = update.kind
        if kind == "tool_call" or kind == "tool_call_update":
            assert isinstance(update, (ToolCallView, ToolCallUpdateView))
            self._track_tool_call(update)
        elif kind == "plan":
            entries = update.raw.get("entries")
            self.plan = entries if isinstance(entries, list) else []
        self._buffer.append(update.raw)
        self._wake()

    def _track_tool_call(self, update: ToolCallView | ToolCallUpdateView) -> None:
        tid = update.tool_call_id
        state = self.tool_calls.get(tid)
        if state is None:
            state = self.tool_calls[tid] = ToolCallState(tid)
        raw = update.raw
        if "title" in raw:
            state.title = update.title
        if "kind" in raw:
            state.kind = update.tool_kind
        if "status" in raw:
            state.status = update.status
        state.updates += 1

    # ------------------------------------------------------------------ the prompt

    def _send_prompt(self) -> asyncio.Future[Any] | RpcError:
        # Queued at once, before anything else of the turn (a cancel right after the prompt
        # must reach the agent after it). A prompt that cannot be encoded fails the turn.
        params: dict[str, Any] = {"sessionId": self.session.id, "prompt": self.prompt}
        if self.agent.trace is not None and (meta := self.agent.trace.meta(self.session.id)):
            params["_meta"] = meta  # W3C trace context (spec: extensibility.mdx, _meta)
        try:
            answer = self.agent.connection.request_nowait(
                p.SESSION_PROMPT, params, on_sent=self._sent, on_result=self._answered
            )
        except (TypeError, ValueError, LocalProtocolError) as exc:
            return RpcError.invalid_params(f"the prompt cannot be sent: {exc}")
        self.prompt_answer = answer
        # Its future is done exactly from its answer on in the input (futures are resolved in
        # the order read): the lifecycle's v1 fence.
        self.session.life.sent(self, answer.done)
        return answer

    async def _run(self, answer: asyncio.Future[Any] | RpcError) -> None:
        """The one run loop: wait for the prompt's answer's error (a result was seen as it was
        read, ``_answered``), and send the prompt again when the lifecycle says so."""
        while self.result is None:
            if isinstance(answer, RpcError):
                self._observe(Observation(Seen.FAILED), None, answer)
                return
            try:
                await answer
            except RequestCancelledError as exc:
                if self._decide(self.session.life.refused(self, True), exc):
                    answer = self._send_prompt()  # RESEND: another turn's cancel took it
                    continue
            except ConnectionClosedError as exc:
                self._observe(Observation(Seen.GONE, signalled=self.agent.signalled), None, exc)
            except RpcError as exc:
                self._decide(self.session.life.refused(self, False), exc)
            except asyncio.CancelledError:
                self.session.life.refused(self, True)  # withdrawn by the host ($/cancel_request went out)
                abandoned = RequestCancelledError("turn abandoned by the host")
                self._observe(Observation(Seen.ABANDONED), None, abandoned)
                raise
            return

    def _answered(self, response: Any) -> None:
        """The prompt's result, seen as it is read (``on_result``, in wire order): the lifecycle
        decides what it means (v1: the end of the turn; v2: its insertion)."""
        if self.result is None:
            self._decide(self.session.life.answered(self, response), None)

    def decided(self, step: Decided[Any]) -> None:
        """A decision of the session's lifecycle about this turn (from an update)."""
        self._decide([step], None)

    def _decide(self, steps: list[Decided[Any]], error: RpcError | None) -> bool:
        """Carry out the lifecycle's decisions; True if the prompt is to be sent again."""
        again = False
        for step in steps:
            decision = step.decision
            if decision is Decision.ENDED:
                self._observe(
                    Observation(Seen.ANSWERED, stop_reason=step.stop_reason), step.stop_reason, None
                )
            elif decision is Decision.INSERTED:
                self._inserted(step.message_id)
            elif decision is Decision.REFUSED:
                if step.error is not None:
                    error = RpcError(ErrorCode.INVALID_REQUEST, step.error)
                    logger.warning("session %s: %s", self.session.id, step.error)
                stop = step.stop_reason
                self._observe(Observation(Seen.FAILED, stop_reason=stop), stop, error)
            elif decision is Decision.RESEND:
                again = True
            elif decision is Decision.CANCEL_SPAN:
                self._cancel_span()
            elif decision is Decision.SPEAKS_V1:
                self.agent.speaks_v1(self)
                self._observe(
                    Observation(Seen.ANSWERED, stop_reason=step.stop_reason), step.stop_reason, None
                )
        return again

    def _inserted(self, message_id: str | None) -> None:
        if message_id is not None and self.message_id is None:
            self.message_id = message_id
        if self.agent.trace is not None:
            self.agent.trace.event("inserted", session=self.session.id, message=message_id)

    def _cancel_span(self) -> None:
        """v2: the agent inserted a prompt the host was withdrawing (it ignored the
        ``$/cancel_request``): ``session/cancel`` now -- the turn's ladder goes on from its
        cancel; a turn the host already resolved is never live, its span is cancelled alone."""
        if self.result is None:
            self._observe(_INSERTED)
        else:
            self.agent.control.cancel_session(self.session.id)

    def gone(self, error: RpcError) -> None:
        """The agent is gone (its process exited, or the connection ended) before this turn
        ended. v1 sees it through the prompt's future; v2's was answered at insertion."""
        self._observe(Observation(Seen.GONE, signalled=self.agent.signalled), None, error)

    def _sent(self, rid: Any) -> None:
        self.request_id = rid

    # ------------------------------------------------------------------ the ladder

    def _prompt_requests(self) -> tuple[RequestId, ...]:
        """What ``$/cancel_request`` (the middle rung, the held ladder's withdrawal) is for: the
        lifecycle's answer (v1 the prompt; v2 the turn's own prompt while held, and the prompts
        held at its cancel that are still held)."""
        return tuple(
            t.request_id for t in self.session.life.cancel_requests(self) if t.request_id is not None
        )

    def _observe(
        self, observation: Observation, stop_reason: str | None = None, error: RpcError | None = None
    ) -> None:
        """Tell the ladder what was seen (it decides, and carries out what is due)."""
        if self.result is not None:
            return
        self._ending = (stop_reason, error)
        try:
            self._runner.observe(observation)
        finally:
            self._ending = None

    def _on_resolved(self, resolution: Resolution, now: float) -> None:
        ending = self._ending
        if ending is None:  # a tick: SIGKILL sent, and no end seen within the exit wait
            ending = (None, self.agent.peer.error("agent killed; no exit seen in time"))
        self._finish(ending[0], resolution, ending[1], now)

    def _on_rung(self, rung: Rung) -> None:
        """The turn's own part of a rung, before the runner acts on the agent."""
        if self.agent.trace is not None:
            self.agent.trace.event(
                "rung", rung=rung.value, session=self.session.id, **_deadlines(self.ladder)
            )
        on_step = self.agent.on_ladder_step
        if on_step is not None:
            try:
                on_step(self, rung)
            except Exception:
                logger.exception("on_ladder_step callback failed")
        if rung is Rung.SESSION_CANCEL:
            self._cancel_host_side()
        elif rung is Rung.TERMINATE:
            what = "closing the connection" if self.agent.remote else "SIGTERM to the agent's group"
            logger.warning("turn of %s ignored the cancel; %s", self.session.id, what)
        elif rung is Rung.KILL:
            what = "aborting the connection" if self.agent.remote else "SIGKILL to the agent's group"
            logger.warning("turn of %s still unresolved; %s", self.session.id, what)

    def _cancel_host_side(self) -> None:
        """Spec: answer pending permission requests ``cancelled``; stop what the turn started here."""
        for tool in self.tool_calls.values():
            if not tool.finished:
                tool.cancelled = True
        # Each permission request of the turn is a task here; cancelled by the turn, it answers
        # {"outcome": "cancelled"} at once (see ``_routing``).
        for _method, task in list(self.incoming.values()):
            task.cancel("turn cancelled")
        terminals = self.agent.services.terminals
        if terminals is not None:
            # Killed now; released when the turn ends, so that the agent's cleanup (terminal
            # output, wait_for_exit, kill, release) still works while it unwinds.
            kill_owner = getattr(terminals, "kill_owner", None)
            if kill_owner is None:
                self._release_terminals(terminals)
            elif self._kill_task is None:
                self._kill_task = self.agent.spawn(kill_owner(self), "kill terminals of the turn")

    def _finish(
        self, stop_reason: str | None, resolution: Resolution, error: RpcError | None, now: float
    ) -> None:
        ladder = self._machine.ladder
        self.result = TurnResult(
            stop_reason=stop_reason,
            resolution=resolution,
            elapsed=now - self.started_at,
            error=error,
            cancel=(
                outcome_from_ladder("current_turn", ladder, stop_reason, self._machine.resolved_by)
                if ladder
                else None
            ),
            cancelled_by=self._machine.cancelled_by,
        )
        if self.agent.trace is not None:
            self.agent.trace.event(
                "resolved",
                session=self.session.id,
                resolution=resolution.value,
                stop_reason=stop_reason,
                by=self._machine.resolved_by,
                cancelled_by=self._machine.cancelled_by,
                elapsed=round(now - self.started_at, 6),
            )
        session = self.session
        if self in session.turns:
            session.turns.remove(self)
        if self._machine.gave_up:
            session.life.gave_up(self)  # its span, if the agent inserts it later, is cancelled
        session.life.forget(self)
        session.last_turn = self
        self._done.set()
        self._wake()
        # Agent requests still open for this turn end with it.
        for _method, task in list(self.incoming.values()):
            task.cancel("turn ended")
        # A cancelled or killed turn's terminals die with it; after a normal end they stay the
        # agent's to release (it may use them in a later turn).
        terminals = self.agent.services.terminals
        if terminals is not None and (self.cancel_requested or resolution is not Resolution.COMPLETED):
            self._release_terminals(terminals)

    def _release_terminals(self, terminals: Any) -> None:
        if self._release_task is None:
            self._release_task = self.agent.spawn(
                terminals.release_owner(self), "release terminals of the turn"
            )

    # ------------------------------------------------------------------ cancel

    async def cancel(self) -> CancelOutcome:
        """Cancel this turn (scope ``current_turn``): idempotent; returns when it resolved."""
        if self.result is not None and self._machine.ladder is None:
            return CancelOutcome(
                "current_turn", self.result.resolution, "finished", 0.0, self.result.stop_reason
            )
        if self.agent.trace is not None:
            self.agent.trace.event(
                "cancel",
                scope="current_turn",
                by="host",
                session=self.session.id,
                request=self.request_id,
                schedule={r.value: at for at, r in self.agent.ladder_policy.schedule()},
            )
        if self.result is None:
            self._start_cancel()
        await self._done.wait()
        if self._release_task is not None:
            # The turn's terminals are dead when cancel() returns (bounded: never hang here).
            with contextlib.suppress(Exception):
                await asyncio.wait({self._release_task}, timeout=self.agent.reap_timeout)
        result = self.result
        assert result is not None
        if result.cancel is not None:
            return result.cancel  # what ``_finish`` made of this cancel's ladder
        return CancelOutcome("current_turn", result.resolution, "finished", 0.0, result.stop_reason)

    def _start_cancel(self) -> None:
        """The lifecycle's plan: a prompt held behind other work (v2) is withdrawn -- the held
        ladder, which touches nothing else; otherwise the cancel is the session's
        (``session/cancel`` stops the work, and in v2 every prompt held now), so this turn
        leads the ladder and the session's other turns sent before it follow it (their own
        part of each rung -- permissions answered, terminals killed -- without acting on the
        agent twice). A prompt sent after the cancel is never touched."""
        if self._machine.cancel_requested:
            return
        life = self.session.life
        if life.plan(self) is CancelPlan.WITHDRAW:
            life.withdraw(self)
            self._observe(_WITHDRAW)
            return
        followers = [t for t in self.session.turns if t is not self and not t._machine.cancel_requested]
        life.cancel(self, followers)
        for follower in followers:
            follower._runner.peer = _FOLLOWER
            follower._observe(_CANCEL)
        self._observe(_CANCEL)

    def kill(self) -> None:
        """Skip the rest of the ladder: SIGKILL the agent's group now (e.g. a second Ctrl-C)."""
        self._observe(_KILL_NOW)

    def closed_by_host(self) -> None:
        """The host is closing this turn's session: the cancellation that follows is the host's."""
        self._machine.host_closed = True

    def __repr__(self) -> str:
        return f"PromptTurn(session={self.session.id!r}, request={self.request_id!r}, done={self.done})"


class _Follower:
    """A turn that follows another's cancel does nothing to the agent itself (``aio.PeerControl``)."""

    def cancel_session(self, session_id: str) -> None:
        pass

    def cancel_request(self, request_id: RequestId) -> None:
        pass

    def close_input(self) -> None:
        pass

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass


_FOLLOWER = _Follower()


def _deadlines(ladder: CancelLadder | None) -> dict[str, float | None]:
    """For a trace: when the rung just taken was due and when the next one is, in seconds after
    the cancel (on the ladder's clock)."""
    if ladder is None or not ladder.taken:
        return {}
    following = ladder.next_deadline()
    return {
        "due": round(ladder.taken[-1][0] - ladder.started_at, 6),
        "next": None if following is None else round(following - ladder.started_at, 6),
    }
