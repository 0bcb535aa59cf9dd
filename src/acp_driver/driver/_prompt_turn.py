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

What ends the turn is the protocol profile's (v1: the prompt's answer and its stop reason).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..aio import LadderRunner
from ..core import (
    CancelLadder,
    ConnectionClosedError,
    ErrorCode,
    LocalProtocolError,
    Observation,
    RequestCancelledError,
    RequestId,
    Resolution,
    RpcError,
    Rung,
    Seen,
    TurnEnd,
    TurnMachine,
)
from ._results import CancelOutcome, ToolCallState, TurnResult, outcome_from_ladder
from ._updates import ToolCall as ToolCallView
from ._updates import ToolCallUpdate as ToolCallUpdateView
from ._updates import Update

if TYPE_CHECKING:
    from ._session import SessionHandle

logger = logging.getLogger("acp_driver.driver")

_CANCEL = Observation(Seen.CANCEL)
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
        self._buffer: collections.deque[Update] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = asyncio.Event()
        self.incoming: dict[Any, tuple[str, asyncio.Task[Any]]] = {}
        """The agent's requests being served as work of this turn: id -> (method, task)."""
        self._release_task: asyncio.Task[Any] | None = None
        self._kill_task: asyncio.Task[Any] | None = None
        answer = self._send_prompt()
        self.prompt_answer: asyncio.Future[Any] | None = None if isinstance(answer, RpcError) else answer
        """The future of the ``session/prompt`` request (None if it could not be sent): the turn
        owns the updates that arrive while it is not done (see ``SessionHandle.deliver``)."""
        self.message_id: str | None = None
        """v2: the ``messageId`` the agent gave the prompt when it inserted it."""
        self._cancel_cutoff: list[PromptTurn] = []
        """v2: the held prompts this turn's cancel may withdraw (those held at the cancel)."""
        self._withdrawing = False
        """v2: the host cancelled this prompt while it was held (``$/cancel_request`` went out);
        it stays in the queue until the agent answers: ``-32800`` withdraws it, an insertion
        (an agent that ignored the withdrawal) is cancelled with ``session/cancel`` at once."""
        self._collateral = False
        """v2: held when another turn's withdrawal had to become a ``session/cancel``, which also
        cancels every prompt held then: a ``-32800`` for this one is not its own cancel, so the
        prompt is sent again (a cancel never touches a prompt sent after it)."""
        run = self._run_v2 if agent.profile.turn_end is TurnEnd.IDLE_STATE else self._run
        self._task = asyncio.get_running_loop().create_task(run(answer), name=f"prompt {session.id}")

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
        return self._machine.cancel_requested or self._withdrawing

    @property
    def ladder(self) -> CancelLadder | None:
        return self._machine.ladder

    def __aiter__(self) -> AsyncIterator[Update]:
        return self

    async def __anext__(self) -> Update:
        while True:
            if self._buffer:
                return self._buffer.popleft()
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
        waiter = self._waiter
        if waiter is not None and not waiter.done():
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
        self._buffer.append(update)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # _wake, inlined

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

    def owns(self, update: Update) -> bool:
        """Whether ``update`` names a tool call of this turn (tool call ids are unique in a
        session; message ids are not: an agent may reuse one in a later turn)."""
        tid = update.raw.get("toolCallId")
        return isinstance(tid, str) and tid in self.tool_calls

    # ------------------------------------------------------------------ the prompt

    def _send_prompt(self) -> asyncio.Future[Any] | RpcError:
        # Queued at once, before anything else of the turn (a cancel right after the prompt
        # must reach the agent after it). A prompt that cannot be encoded fails the turn.
        params: dict[str, Any] = {"sessionId": self.session.id, "prompt": self.prompt}
        if self.agent.trace is not None and (meta := self.agent.trace.meta(self.session.id)):
            params["_meta"] = meta  # W3C trace context (spec: extensibility.mdx, _meta)
        try:
            return self.agent.connection.request_nowait(
                p.SESSION_PROMPT, params, on_sent=self._sent, on_result=self._answer_ends_turn
            )
        except (TypeError, ValueError, LocalProtocolError) as exc:
            return RpcError.invalid_params(f"the prompt cannot be sent: {exc}")

    async def _run(self, answer: asyncio.Future[Any] | RpcError) -> None:
        if isinstance(answer, RpcError):
            self._observe(Observation(Seen.FAILED), None, answer)
            return
        try:
            response = await answer
        except RequestCancelledError as exc:
            # -32800 on the prompt: the agent stopped the turn.
            self._observe(Observation(Seen.FAILED, stop_reason="cancelled"), "cancelled", exc)
        except ConnectionClosedError as exc:
            self._observe(Observation(Seen.GONE, signalled=self.agent.signalled), None, exc)
        except RpcError as exc:
            self._observe(Observation(Seen.FAILED), None, exc)
        except asyncio.CancelledError:
            abandoned = RequestCancelledError("turn abandoned by the host")
            self._observe(Observation(Seen.ABANDONED), None, abandoned)
            raise
        else:
            self._response(response)  # already seen as it was read, unless it was not a result

    @property
    def _answer_ends_turn(self) -> Callable[[Any], None] | None:
        """v1: the answer ends the turn, seen as it is read; v2: it only settles the prompt."""
        return self._response if self.agent.profile.turn_end is TurnEnd.PROMPT_ANSWER else None

    def _response(self, response: Any) -> None:
        """The prompt's result, seen as it is read (``on_result``): the turn resolves in the
        same loop iteration, and ``cancel()`` or ``await turn`` resume in the next one."""
        if self.result is not None:
            return  # seen as it was read; this is the turn's task, awaiting the same answer
        stop_reason = self.agent.profile.answer_stop_reason(response)
        if stop_reason is not None:
            self._observe(Observation(Seen.ANSWERED, stop_reason=stop_reason), stop_reason, None)
        else:
            error = RpcError(ErrorCode.INVALID_REQUEST, f"invalid session/prompt response: {response!r}")
            self._observe(Observation(Seen.FAILED), None, error)

    async def _run_v2(self, answer: asyncio.Future[Any] | RpcError) -> None:
        """v2: the prompt's answer says it was inserted (``{messageId}``); the turn ends at the
        first idle after that (``idle``), or with the prompt when it is refused, withdrawn or
        cancelled before insertion (an error, ``-32800``)."""
        spans = self.session.spans
        assert spans is not None
        if isinstance(answer, RpcError):
            spans.refused(self)
            self._observe(Observation(Seen.FAILED), None, answer)
            return
        try:
            response = await answer
        except RequestCancelledError as exc:
            spans.refused(self)  # held, then withdrawn or cancelled: it never ran
            if self._collateral and not self.cancel_requested:
                self._collateral = False
                await self._run_v2(self._send_again(spans))  # another turn's cancel took it
                return
            self._observe(Observation(Seen.FAILED, stop_reason="cancelled"), "cancelled", exc)
        except ConnectionClosedError as exc:
            self._observe(Observation(Seen.GONE, signalled=self.agent.signalled), None, exc)
        except RpcError as exc:
            spans.refused(self)
            self._observe(Observation(Seen.FAILED), None, exc)
        except asyncio.CancelledError:
            spans.refused(self)  # withdrawn by the host ($/cancel_request went out)
            abandoned = RequestCancelledError("prompt withdrawn by the host")
            self._observe(Observation(Seen.ABANDONED), None, abandoned)
            raise
        else:
            message_id = response.get("messageId") if isinstance(response, dict) else None
            if not isinstance(message_id, str):
                logger.warning(
                    "session %s: a prompt answered without a messageId: %.200r", self.session.id, response
                )
            elif self.message_id is not None and self.message_id != message_id:
                logger.warning(
                    "session %s: prompt answered with messageId %r, its user message said %r",
                    self.session.id,
                    message_id,
                    self.message_id,
                )
            self.message_id = message_id if isinstance(message_id, str) else self.message_id
            spans.answered(self, message_id if isinstance(message_id, str) else None)
            self._inserted(spans)

    def _send_again(self, spans: Any) -> asyncio.Future[Any] | RpcError:
        """v2: send the prompt again, at the end of the queue (see ``_collateral``)."""
        answer = self._send_prompt()
        self.prompt_answer = None if isinstance(answer, RpcError) else answer
        spans.sent(self)
        return answer

    def inserted_by_update(self, update: Update) -> None:
        """v2: the agent's ``user_message`` says where this prompt was inserted."""
        message_id = update.raw.get("messageId")
        if isinstance(message_id, str) and self.message_id is None:
            self.message_id = message_id
        if self.session.spans is not None:
            self._inserted(self.session.spans)

    def _inserted(self, spans: Any) -> None:
        """v2: inserted although the host withdrew it (the agent ignored ``$/cancel_request``):
        now it runs, and only ``session/cancel`` stops it -- the ladder takes over."""
        if self._withdrawing and not self._machine.cancel_requested and self.result is None:
            for held in spans.waiting:
                if held is not self and not held.cancel_requested:
                    held._collateral = True  # sent after this prompt: not this cancel's
            self._cancel_cutoff = []
            spans.cancel_sent([self])
            self._observe(_CANCEL)

    def gone(self, error: RpcError) -> None:
        """The agent is gone (its process exited, or the connection ended) before this turn
        ended. v1 sees it through the prompt's future; v2's was answered at insertion."""
        self._observe(Observation(Seen.GONE, signalled=self.agent.signalled), None, error)

    def idle(self, stop_reason: str | None) -> None:
        """v2: the idle that ends this turn's span (its stop reason, None if it reported none)."""
        self._observe(Observation(Seen.ANSWERED, stop_reason=stop_reason), stop_reason, None)

    def _sent(self, rid: Any) -> None:
        self.request_id = rid

    def over(self) -> bool:
        """Whether the protocol ended this turn, as far as the input read so far goes (the fence:
        updates after that point are late). v1: the prompt was answered."""
        answer = self.prompt_answer  # the only TurnEnd so far: TurnEnd.PROMPT_ANSWER
        return answer is None or answer.done()

    # ------------------------------------------------------------------ the ladder

    def _prompt_requests(self) -> tuple[RequestId, ...]:
        """What the middle rung's ``$/cancel_request`` is for: v1 the prompt; v2 the prompts
        still held that were held at the cancel (a running turn's prompt was answered at its
        insertion: there is nothing left to cancel of it)."""
        spans = self.session.spans
        if spans is None:
            return () if self.request_id is None else (self.request_id,)
        return tuple(
            t.request_id for t in self._cancel_cutoff if t in spans.waiting and t.request_id is not None
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
        if session.spans is not None:
            session.spans.forget(self)
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
        spans = self.session.spans
        if spans is not None and self.result is None:
            self._cancel_v2(spans)
        else:
            self._observe(_CANCEL)
        await self._done.wait()
        if self._release_task is not None:
            # The turn's terminals are dead when cancel() returns (bounded: never hang here).
            with contextlib.suppress(Exception):
                await asyncio.wait({self._release_task}, timeout=self.agent.reap_timeout)
        result = self.result
        assert result is not None
        if result.cancel is not None:
            return result.cancel  # what ``_finish`` made of this cancel's ladder
        # v2: a held prompt withdrawn (no ladder: nothing was running)
        return CancelOutcome(
            "current_turn", result.resolution, "withdrawn", result.elapsed, result.stop_reason, ("withdraw",)
        )

    def _cancel_v2(self, spans: Any) -> None:
        """v2: a held prompt is withdrawn (``$/cancel_request``, answered ``-32800``); a running
        turn's cancel is the session's (``session/cancel`` stops the work and every prompt held
        now), so this turn leads the ladder and the others of the session sent before it follow
        it (their own part of each rung -- permissions answered, terminals killed -- without
        acting on the agent twice). A prompt sent after the cancel is never touched."""
        if self in spans.waiting:
            if not self._withdrawing and self.request_id is not None:
                self._withdrawing = True  # the answer ends it: -32800, or an insertion (_inserted)
                self.agent.connection.cancel_request(self.request_id)
            return
        if self._machine.cancel_requested:
            return
        others = [t for t in self.session.turns if t is not self and not t._machine.cancel_requested]
        self._cancel_cutoff = [t for t in spans.waiting if t is not self]
        spans.cancel_sent([t for t in (self, *others) if t in spans.live])
        for follower in others:
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
