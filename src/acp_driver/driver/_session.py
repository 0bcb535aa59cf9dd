"""A session on the agent, host side: its turns, and which turn each update belongs to.

Turn fencing (``deliver_all``): updates are attributed by the protocol's ordering. An update is
the running turn's only while that turn's ``session/prompt`` is still unanswered *at that point
of the input* -- the connection resolves request futures in event order while it dispatches a
chunk, and hands updates over in runs that end at any other message, so the prompt's future
(``PromptTurn.prompt_answer``) is done exactly for the updates after its answer, even when both
arrive in one read. Updates after the response are peer violations: counted, kept on the turn they came after
(``late_updates``), never attributed to the next turn. Message ids do not decide anything (an
agent may reuse a ``messageId`` in a later turn); tool call ids are unique in a session, so an
update of a tool call the *previous* turn started, that the running one never announced, is
late too. Session-wide updates (commands, mode, config, title, usage) belong to no turn and are
accepted at any time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from .. import protocol as p
from ..core import AcpError, SessionSpans, TurnEnd, worth_logging
from ._prompt_turn import PromptTurn
from ._results import CancelOutcome
from ._updates import AgentMessageChunk, Update

if TYPE_CHECKING:
    from ._agent import AgentHandle

logger = logging.getLogger("acp_driver.driver")

Scope = Literal["request", "current_turn", "session", "agent"]


class SessionHandle:
    """The host's handle on one session of an agent."""

    def __init__(self, agent: AgentHandle, session_id: str, cwd: str, response: dict[str, Any]) -> None:
        self.agent = agent
        self.id = session_id
        self.cwd = cwd
        self.roots: list[str] = [cwd]
        """Directories the agent may touch through the host's fs and terminal services."""
        self.response = response
        self.modes: dict[str, Any] | None = (
            response.get("modes") if isinstance(response.get("modes"), dict) else None
        )
        self.config_options: list[Any] | None = (
            response.get("configOptions") if isinstance(response.get("configOptions"), list) else None
        )
        self.turns: list[PromptTurn] = []
        """The turns not resolved yet, oldest first (v1: at most one; v2: held prompts too)."""
        self.last_turn: PromptTurn | None = None
        self.spans: SessionSpans[PromptTurn] | None = (
            SessionSpans() if agent.profile.turn_end is TurnEnd.IDLE_STATE else None
        )
        """v2: the session's prompts, spans of work and turn ownership (``core.SessionSpans``)."""
        self.cancellable: dict[str, bool] = {}
        """v2: tool calls and terminals by id, and whether they advertise ``capabilities.cancel``."""
        self.background_updates: collections.deque[Update] = collections.deque(maxlen=256)
        """v2: updates of no running turn (background work after an idle: normal in v2)."""
        self.closed = False
        self.title: str | None = None
        self.session_updates: collections.deque[Update] = collections.deque(maxlen=256)
        """Recent session-wide updates (commands, mode, config, title, usage), and the history a
        ``session/load`` replayed."""
        self.late_updates = 0
        """Turn updates that arrived when no turn was running (peer violations)."""
        self.loading = False
        """A ``session/load`` is in flight: every update is the history's replay (kept in
        ``session_updates``, never a late update of a turn)."""
        self.listeners: list[Any] = []
        """Callables ``f(update)`` called for every update of this session (turn or not)."""

    @property
    def current_turn(self) -> PromptTurn | None:
        """The oldest turn not resolved yet (None: idle)."""
        return self.turns[0] if self.turns else None

    def turn_of(self, entity_id: Any, default: PromptTurn | None) -> PromptTurn | None:
        """The turn an agent request about ``entity_id`` (a tool call, a terminal) is work of.
        v1: ``default`` (the running turn). v2: the live turn that entity was first seen in,
        else the turn working now; None for background work (listed by the last state update,
        or of a turn already over): a cancel leaves it alone."""
        spans = self.spans
        if spans is None:
            return default
        if isinstance(entity_id, str) and entity_id in spans.background:
            return None
        owner = spans.owner_of(entity_id) if isinstance(entity_id, str) else None
        if owner is not None:
            return owner
        return spans.live[-1] if spans.live else None

    def prompt(self, prompt: str | Sequence[dict[str, Any]]) -> PromptTurn:
        """Start a prompt turn. Iterate the result for updates; await it for the ``TurnResult``.

        v1: one turn at a time. v2: a prompt sent while the agent works is held by the agent
        and inserted after the work before it, in order; each is a turn of its own."""
        if self.closed:
            raise AcpError(f"session {self.id} is closed")
        if self.turns and self.spans is None:
            raise AcpError(f"session {self.id} already has a turn running")
        if not self.agent.connection.is_open:
            raise self.agent.closed_error()
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        turn = PromptTurn(self, blocks)
        self.turns.append(turn)
        if self.spans is not None:
            self.spans.sent(turn)
        return turn

    async def cancel(self, scope: Scope = "current_turn") -> CancelOutcome:
        """Cancel the running turn (``current_turn``), or the turn then the session (``session``)."""
        clock = self.agent.clock
        started = clock.now()
        if scope not in ("current_turn", "session"):
            raise ValueError("a session cancels with scope 'current_turn' or 'session'")
        if scope == "session" and self.agent.trace is not None:  # current_turn: the turn records it
            self.agent.trace.event("cancel", scope=scope, by="host", session=self.id)
        turn = self.current_turn
        if turn is not None:
            outcome = await turn.cancel()
        else:
            outcome = CancelOutcome(scope, None, "idle", 0.0)
        if scope == "session":
            await self.close()
            outcome = CancelOutcome(
                "session",
                outcome.resolution,
                outcome.resolved_by,
                clock.now() - started,
                outcome.stop_reason,
                (*outcome.steps, "close"),
            )
        return outcome

    async def close(self) -> None:
        """Close the session (``session/close`` when the agent supports it)."""
        if self.closed:
            return
        self.closed = True
        agent = self.agent
        if agent.supports("close") and agent.connection.is_open:
            for turn in self.turns:  # session/close cancels them: the host's cancel, not the agent's
                turn.closed_by_host()
            with contextlib.suppress(AcpError, asyncio.TimeoutError):
                await agent.connection.request(
                    p.SESSION_CLOSE, {"sessionId": self.id}, timeout=agent.request_timeout
                )
        if agent.services.terminals is not None:
            await agent.services.terminals.release_owner(self)
        agent.sessions.pop(self.id, None)

    async def set_mode(self, mode_id: str) -> dict[str, Any]:
        """``session/set_mode`` (v2 has no modes: the ``mode`` config option, as agents offer it)."""
        if self.spans is not None:
            return await self.set_config_option("mode", mode_id)
        result = await self.agent.request(p.SESSION_SET_MODE, {"sessionId": self.id, "modeId": mode_id})
        if self.modes is not None:
            self.modes["currentModeId"] = mode_id
        return result if isinstance(result, dict) else {}

    async def cancel_tool_call(self, tool_call_id: str) -> None:
        """v2 ``tool_call/cancel``, for a tool call that advertises it (the agent confirms with
        a final ``tool_call_update``). ``AcpError`` if it does not."""
        await self._cancel_entity(p.TOOL_CALL_CANCEL, "toolCallId", tool_call_id)

    async def cancel_terminal(self, terminal_id: str) -> None:
        """v2 ``terminal/cancel``, for a display terminal that advertises it."""
        await self._cancel_entity(p.TERMINAL_CANCEL, "terminalId", terminal_id)

    async def _cancel_entity(self, method: str, key: str, entity_id: str) -> None:
        if not self.cancellable.get(entity_id):
            raise AcpError(
                f"{entity_id!r} does not advertise cancel (capabilities.cancel): {method} not sent"
            )
        await self.agent.request(method, {"sessionId": self.id, key: entity_id})

    async def set_config_option(self, config_id: str, value: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"sessionId": self.id, "configId": config_id, "value": value}
        if self.spans is not None:  # v2 says which kind of value it is: a value id or a boolean
            params["type"] = "boolean" if isinstance(value, bool) else "id"
        result = await self.agent.request(p.SESSION_SET_CONFIG_OPTION, params)
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            self.config_options = result["configOptions"]
        return result if isinstance(result, dict) else {}

    def deliver(self, update: Update) -> None:
        """An update for this session: to the listeners, then to its turn (see the module docstring)."""
        self.deliver_all((update,))

    def deliver_all(self, updates: Sequence[Update]) -> None:
        """Updates for this session, in order, each as ``deliver`` (one call for a read's run)."""
        if self.spans is not None:
            self._deliver_spans(updates, self.spans)
            return
        turn_kinds = self.agent.profile.turn_updates
        for update in updates:
            for listener in self.listeners:
                try:
                    listener(update)
                except Exception:
                    logger.exception("session listener failed")
            turn = self.current_turn
            if self.loading and turn is None:
                self.session_updates.append(update)
                continue
            if update.kind not in turn_kinds:  # about the session (or unknown): valid any time
                self.session_updates.append(update)
                if update.kind == "session_info_update":
                    title = update.raw.get("title")
                    if isinstance(title, str):
                        self.title = title
                elif update.kind == "current_mode_update" and self.modes is not None:
                    self.modes["currentModeId"] = update.raw.get("currentModeId")
                if turn is not None:
                    turn.accept(update)
                continue
            last = self.last_turn
            late_of: PromptTurn | None = None
            if turn is None or turn.prompt_answer is None:
                late_of = last  # no turn running, or its prompt could not be sent
            elif turn.over():
                # The protocol ended the turn earlier in this read (v1: its prompt was answered;
                # the connection resolves request futures in message order, so this is exact).
                late_of = turn
            elif last is not None and last.tool_calls and last.owns(update) and not turn.owns(update):
                late_of = last  # names a tool call of the finished turn
            elif type(update) is AgentMessageChunk:
                # PromptTurn.accept, inlined for the update a stream is made of (no state to track).
                turn._buffer.append(update)
                waiter = turn._waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
                continue
            else:
                turn.accept(update)
                continue
            self.late_updates += 1
            if late_of is not None:
                late_of.late_updates.append(update)
            if worth_logging(self.late_updates):  # 1st, 10th, 100th...: never a flood
                logger.warning(
                    "session %s: %s arrived after its turn's response (peer violation, %d so far); "
                    "not attributed",
                    self.id,
                    update.kind,
                    self.late_updates,
                )

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r})"

    def _deliver_spans(self, updates: Sequence[Update], spans: SessionSpans[PromptTurn]) -> None:
        """v2: updates fenced by span (``core.SessionSpans``): a message belongs to the turn that
        inserted it or is working on it, anything of no running turn is the session's (background
        work after an idle is normal), and an idle ends the turns it ends."""
        profile = self.agent.profile
        turn_kinds = profile.turn_updates
        for update in updates:
            for listener in self.listeners:
                try:
                    listener(update)
                except Exception:
                    logger.exception("session listener failed")
            spans.resuming = self.loading
            routed = spans.update(update.raw)
            for turn in routed.inserted:
                turn.inserted_by_update(update)
            owner = routed.owner
            if "capabilities" in update.raw:  # v2: what the client may cancel (tool calls, terminals)
                entity = update.raw.get("toolCallId") or update.raw.get("terminalId")
                caps = update.raw.get("capabilities")
                if isinstance(entity, str):
                    self.cancellable[entity] = isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)
            if update.kind not in turn_kinds:
                self.session_updates.append(update)
                if update.kind == "session_info_update":
                    title = update.raw.get("title")
                    if isinstance(title, str):
                        self.title = title
            elif self.loading:
                self.session_updates.append(update)  # the replay of a resume
            elif owner is not None:
                owner.accept(update)
            else:
                self.background_updates.append(update)
            for turn, _raw_reason in routed.resolved:
                turn.idle(profile.idle_stop_reason(update.raw))
