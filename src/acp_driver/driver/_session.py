"""A session on the agent, host side: its turns, and which turn each update belongs to.

Which turn an update belongs to, when a turn starts and when it ends are the protocol
lifecycle's (``core.SessionLifecycle``, one per version: ``core/_lifecycle.py``); the session
feeds it every update in the order read and hands each to the turn it names (``deliver_all``,
the one delivery path). v1: an update is the running turn's while that turn's prompt is
unanswered at that point of the input (the connection resolves request futures in event order
while it dispatches a chunk, and hands updates over in runs that end at any other message);
after the answer it is late -- a peer violation, counted and kept on the turn it came after
(``late_updates``), never attributed to the next turn. v2: a message belongs to the live turn
that inserted it or works on it (a message id seen in an ended turn means nothing: agents reuse
them), a tool call to the live turn it was first seen in, anything of no live turn is
background work (``background_updates``). Session-wide updates (commands, mode, config, title,
usage) belong to no turn and are accepted at any time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from .. import protocol as p
from ..core import AcpError, ProtocolProfile, SessionLifecycle, lifecycle_for, worth_logging
from ._prompt_turn import PromptTurn
from ._results import CancelOutcome
from ._updates import Update, make_update

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
        self.life: SessionLifecycle[PromptTurn] = lifecycle_for(agent.profile)
        """The session's prompts, turns and update ownership, by the protocol version spoken."""
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

    def speak(self, profile: ProtocolProfile) -> None:
        """Go on in ``profile``'s version (the agent showed it speaks another than agreed)."""
        self.life = lifecycle_for(profile)
        for turn in self.turns:
            if turn.result is None and turn.prompt_answer is not None:
                self.life.sent(turn, turn.prompt_answer.done)

    def take_background(self) -> list[Update]:
        """The background updates kept so far, removed."""
        updates = list(self.background_updates)
        self.background_updates.clear()
        return updates

    @property
    def current_turn(self) -> PromptTurn | None:
        """The oldest turn not resolved yet (None: idle)."""
        return self.turns[0] if self.turns else None

    def turn_of(self, entity_id: Any) -> PromptTurn | None:
        """The turn an agent request about ``entity_id`` (a tool call, a terminal; None: none
        named) is work of: v1 the running turn; v2 the live turn that entity was first seen in,
        else the turn working now; None for background work (listed by the last state update,
        or of a turn already over): a cancel leaves it alone."""
        return self.life.owner_of(entity_id if isinstance(entity_id, str) else "")

    def prompt(self, prompt: str | Sequence[dict[str, Any]]) -> PromptTurn:
        """Start a prompt turn. Iterate the result for updates; await it for the ``TurnResult``.

        v1: one turn at a time. v2: a prompt sent while the agent works is held by the agent
        and inserted after the work before it, in order; each is a turn of its own."""
        if self.closed:
            raise AcpError(f"session {self.id} is closed")
        if self.turns and not self.life.profile.holds_prompts:
            raise AcpError(f"session {self.id} already has a turn running")
        if not self.agent.connection.is_open:
            raise self.agent.closed_error()
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        turn = PromptTurn(self, blocks)
        self.turns.append(turn)
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
        if self.life.profile.modes_are_options:
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
        if self.life.profile.typed_option_values:  # a value id or a boolean
            params["type"] = "boolean" if isinstance(value, bool) else "id"
        result = await self.agent.request(p.SESSION_SET_CONFIG_OPTION, params)
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            self.config_options = result["configOptions"]
        return result if isinstance(result, dict) else {}

    def deliver_all(self, raws: Sequence[dict[str, Any]]) -> None:
        """This session's ``update`` objects, in order (one call for a read's run): each to the
        listeners, then to the turn the lifecycle names (see the module docstring). A text chunk
        for a turn goes to it as it came (its typed view is made when read)."""
        life = self.life
        turn_kinds = life.profile.turn_updates
        listeners = self.listeners
        loading = life.resuming = self.loading
        sid = self.id
        for raw in raws:
            kind = raw.get("sessionUpdate")
            if type(kind) is not str:
                kind = "unknown"  # a discriminator that is no string: an update of no known kind
            update: Update | None = None
            if listeners:
                update = make_update(sid, raw)
                for listener in listeners:
                    try:
                        listener(update)
                    except Exception:
                        logger.exception("session listener failed")
            owner = life.route(raw, kind)
            effects = life.effects
            if effects is None:
                if owner is not None and kind == "agent_message_chunk" and not loading:
                    # The update a stream is made of, to its turn: ``PromptTurn.accept``
                    # inlined (a text chunk has no tool call, plan or capability to track).
                    owner._buffer.append(raw)
                    waiter = owner._waiter
                    if waiter is not None:  # _wake, inlined
                        owner._waiter = None
                        if not waiter.done():
                            waiter.set_result(None)
                    continue
            else:
                life.effects = None
                for step in effects.inserted:
                    step.key.decided(step)
            if update is None:
                update = make_update(sid, raw)
            if kind in turn_kinds:
                if "capabilities" in raw:
                    self._cancellable(raw)
                if loading:
                    self.session_updates.append(update)  # the history a load or a resume replays
                elif owner is None:
                    self._stray(update)
                else:
                    owner.accept(update)
            else:  # about the session (or unknown): valid any time
                self.session_updates.append(update)
                if kind == "session_info_update":
                    title = raw.get("title")
                    if isinstance(title, str):
                        self.title = title
                elif kind == "current_mode_update" and self.modes is not None:
                    self.modes["currentModeId"] = raw.get("currentModeId")
                if owner is not None:
                    owner.accept(update)  # v1: the running turn sees them too
            if effects is not None:
                for step in effects.ended:
                    step.key.decided(step)

    def _cancellable(self, raw: dict[str, Any]) -> None:
        """v2: what the client may cancel (tool calls, terminals that advertise it)."""
        entity = raw.get("toolCallId") or raw.get("terminalId")
        caps = raw.get("capabilities")
        if isinstance(entity, str):
            self.cancellable[entity] = isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)

    def _stray(self, update: Update) -> None:
        """A turn update of no turn: late (v1, a peer violation) or background work (v2)."""
        late, late_of = self.life.late_of(update.raw)
        if not late:
            self.background_updates.append(update)
            return
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
