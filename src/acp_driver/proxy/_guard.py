"""What the proxy adds to serve's relay: its guarantees to an editor that launched it.

The relay (``remote.ServedConnection``) forwards every message unchanged and keeps the ledger of
what is in flight both ways. The guard sits between it and the editor's stdio and adds:

- **one answer per request, both ways**: a request the editor withdrew (``$/cancel_request``)
  that the agent has not answered within ``answer_grace`` is answered ``-32800`` here, and the
  agent's late answer dropped; the same for the agent's withdrawn requests to the editor; when
  the agent is gone, every request of the editor still open is answered (``cancelled`` for a
  cancelled turn, else an error naming how the agent ended);
- **a cancel that lands**: the editor's ``session/cancel`` is forwarded and starts the ladder
  (``core.TurnMachine`` run by the one ``aio.LadderRunner``; its first rung is the editor's own
  ``session/cancel``): ``$/cancel_request`` for the prompt at half the budget, SIGTERM at 3/4,
  SIGKILL at the budget -- when the editor's turn is ended ``cancelled`` here at once (v1: the
  prompt's answer; v2: an idle ``state_update``). A turn the agent ends on its own after the
  cancel (``end_turn``, an error) still ends ``cancelled`` for the editor; the trace keeps what
  the agent said (event ``rewritten``);
- **permissions never left open**: ``permission_grace`` after the editor's ``session/cancel``,
  a ``session/request_permission`` of that session still open is answered ``cancelled`` to the
  agent and withdrawn from the editor (``$/cancel_request``), whose late answer is dropped;
- **late output fenced**: after a cancelled turn ended for the editor, that session's turn
  updates (the profile's ``turn_updates``) go to the trace (event ``fenced``) until the editor's
  next prompt; session-wide updates pass;
- **stalls bounded** (``silence_timeout``): a live turn from which nothing came for that long is
  cancelled through the same ladder.

When a turn ends is the session's lifecycle's (``core/_lifecycle.py``), asked through the relay
ledger (``RelayLedger.turn_live``). How a turn's end reads, and how the editor is told
``cancelled`` when the ladder ends a turn itself, is the profile's ``ending``
(``core/_endings.py``). Across a respawn the guard of the new agent shares the editor's
``SessionBook`` (``_book``) and counters; its own requests (the replayed ``initialize``, the
sessions' re-opening: ``request_own``) are answered to it, never to the editor, and a re-opened
session's replay is fenced.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..aio import LadderRunner
from ..core import (
    PROFILES,
    V1,
    LadderPolicy,
    Observation,
    ProtocolProfile,
    RequestId,
    Resolution,
    Rung,
    Seen,
    TurnMachine,
    encode_relayed,
)
from ..net import id_key, session_id_of
from ..remote import Pending, ServedConnection, answer_for_gone_client
from ._book import SessionBook, rpc_error

if TYPE_CHECKING:
    from ..aio import Timer

logger = logging.getLogger("acp_driver.proxy")

_OWN_PREFIX = "acp-driver-proxy/"
"""The ids of the proxy's own requests (never the editor's: its answers are not forwarded)."""

Write = Callable[[bytes], None]
"""One message to the editor (its JSON text, no newline)."""

_RUNG_SAID = {
    Rung.CANCEL_REQUEST: "the agent did not end the turn: $/cancel_request for its prompt",
    Rung.TERMINATE: "the agent did not end the turn: SIGTERM to its process group",
    Rung.KILL: "the agent did not end the turn: SIGKILL to its process group",
}


@dataclass(frozen=True)
class GuardSettings:
    """The proxy's deadlines, in seconds."""

    cancel_budget: float = 4.0
    """From the editor's ``session/cancel`` to SIGKILL (and the editor's ``cancelled``)."""
    permission_grace: float = 1.0
    """After the editor's ``session/cancel``, how long a permission request of it may stay open."""
    answer_grace: float = 2.0
    """After a ``$/cancel_request``, how long the other side has to answer the request itself."""
    silence_timeout: float | None = None
    """A live turn silent this long is cancelled (None: never)."""


@dataclass
class Stats:
    """What the summary line at exit counts."""

    to_agent: int = 0
    to_editor: int = 0
    cancels: int = 0
    escalated: dict[str, int] = field(default_factory=dict)
    rewritten: int = 0
    fenced: int = 0
    answered_here: int = 0
    late_dropped: int = 0
    silenced: int = 0
    respawns: int = 0
    resumed: int = 0


class _Turn:
    """A turn the editor (or the silence timeout) cancelled, and its ladder."""

    def __init__(self, sid: str, forwarded: bool) -> None:
        self.sid = sid
        self.forwarded = forwarded
        """The editor's own ``session/cancel`` went out: the ladder's first rung sends none."""
        self.ended_for_editor = False
        self.runner: LadderRunner | None = None
        self.machine: TurnMachine | None = None


class _TurnPeer:
    """The ladder's ``PeerControl`` for one turn: the relay's, minus the cancel already sent."""

    def __init__(self, served: ServedConnection, turn: _Turn) -> None:
        self._served = served
        self._turn = turn

    def cancel_session(self, session_id: str) -> None:
        if self._turn.forwarded:
            self._turn.forwarded = False  # the editor's own session/cancel was this rung
            return
        self._served.cancel_session(session_id)

    def cancel_request(self, request_id: RequestId) -> None:
        self._served.cancel_request(request_id)

    def close_input(self) -> None:
        self._served.close_input()

    def terminate(self) -> None:
        self._served.terminate()

    def kill(self) -> None:
        self._served.kill()


class ProxyGuard:
    """The editor's side of one proxied connection (see the module docstring)."""

    def __init__(
        self,
        served: ServedConnection,
        write: Write,
        settings: GuardSettings,
        *,
        book: SessionBook | None = None,
        stats: Stats | None = None,
        before: ProxyGuard | None = None,
    ) -> None:
        self.served = served
        self.settings = settings
        self.policy = LadderPolicy(settings.cancel_budget)
        self.book = book if book is not None else SessionBook()
        """The editor's sessions, kept across the agent's respawns."""
        self.stats = stats if stats is not None else Stats()
        self.editor_gone = False
        self.reopening: set[str] = set()
        """Sessions being re-opened on a respawned agent: their replay is not the editor's."""
        self._own: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        """The proxy's own requests to the agent (a respawn's replay): id key -> the answer."""
        self._own_ids = itertools.count(1)
        self._write = write
        self._clock = served.clock
        self._turns: dict[str, _Turn] = {}
        self._prompts: dict[str, str] = {}
        """The editor's prompts the agent has not answered: id key -> session."""
        self._answered_editor: set[str] = set()
        """The editor's requests answered here: the agent's late answer is dropped."""
        self._answered_agent: set[str] = set() if before is None else before._answered_agent
        """The agent's requests answered here: the editor's late answer is dropped."""
        self._fenced: set[str] = set()
        self._idled_here: set[str] = set()
        """v2 sessions whose turn's idle was sent here: the agent's own idle is dropped."""
        self._heard: dict[str, float] = {}
        self._silence_timer: Timer | None = None
        self._timers: set[Timer] = set()
        served.on_relayed = self._from_agent_guarded
        served.on_end.append(self._ended)

    @property
    def profile(self) -> ProtocolProfile:
        version = self.served.inflight.version
        return PROFILES.get(version, V1) if version is not None else V1

    # ------------------------------------------------------------------ editor -> agent

    def from_editor(self, text: bytes, message: Any) -> None:
        """A message the editor wrote (``text``, parsed as ``message``)."""
        if not isinstance(message, dict):
            self._forward(text, message)
            return
        method = message.get("method")
        key = id_key(message.get("id"))
        if self.served.ending:
            if isinstance(method, str) and key is not None:
                self._answer_editor(key, self._gone_answer(message["id"], method, None))
            return
        if not isinstance(method, str):
            if key is not None and key in self._answered_agent:
                self._answered_agent.discard(key)
                self._late("editor", message)
                return
            self._forward(text, message)
            return
        sid = session_id_of(message)
        if sid is not None and sid in self.book.lost:
            if key is not None:
                why = f"acp-driver proxy: session {sid} was lost: {self.book.lost[sid]}"
                self._answer_editor(key, rpc_error(message["id"], -32603, why))
            return
        self.book.from_editor(message)
        if method == p.SESSION_PROMPT and key is not None and sid is not None:
            self._prompts[key] = sid
            self._fenced.discard(sid)
            self._idled_here.discard(sid)
            self._heard[sid] = self._clock.now()
            self._forward(text, message)
            self._arm_silence()
            return
        self._forward(text, message)
        if method == p.SESSION_CANCEL and sid is not None:
            self.stats.cancels += 1
            self._cancel(sid, forwarded=True, why="the editor cancelled")
        elif method == p.CANCEL_REQUEST:
            target = _target(message)
            if target is not None and target in self.served.inflight.to_agent:
                self._after(self.settings.answer_grace, lambda: self._withdrawn_by_editor(target))

    def _forward(self, text: bytes, message: Any) -> None:
        self.stats.to_agent += 1
        self.served.from_client(text, message)

    def _withdrawn_by_editor(self, key: str) -> None:
        request = self.served.inflight.to_agent.get(key)
        if request is None or key in self._answered_editor:
            return
        logger.info(
            "the agent did not answer withdrawn request %s (%s): answered -32800", request.id, request.method
        )
        self._answer_editor(
            key, rpc_error(request.id, -32800, "request cancelled (the agent did not answer)")
        )

    # ------------------------------------------------------------------ agent -> editor

    def _from_agent_guarded(self, item: bytes, message: Any, route: str) -> None:
        try:
            self.from_agent(item, message, route)
        except Exception:
            # A fault of ours must not stop the relay's read loop: the message goes on as it came.
            logger.exception("the guard failed on a message from the agent; forwarded unchanged")
            self._to_editor(item)

    def from_agent(self, item: bytes, message: Any, route: str) -> None:
        """A message from the agent, after the relay's ledger read it."""
        if not isinstance(message, dict):
            self._to_editor(item)
            return
        method = message.get("method")
        if isinstance(method, str):
            sid = session_id_of(message)
            if sid is not None and self.settings.silence_timeout is not None:
                self._heard[sid] = self._clock.now()
            if method == p.SESSION_UPDATE and sid is not None:
                if self._update(item, message, sid):
                    self._to_editor(item)
                return
            if method == p.CANCEL_REQUEST:
                target = _target(message)
                if target is not None and target in self.served.inflight.to_client:
                    self._after(self.settings.answer_grace, lambda: self._withdrawn_by_agent(target))
            elif method == p.SESSION_REQUEST_PERMISSION and sid is not None and sid in self._turns:
                asked = sid
                self._after(self.settings.permission_grace, lambda: self._close_permissions(asked))
            self._to_editor(item)
            return
        key = id_key(message.get("id"))
        if key is None:
            self._to_editor(item)
            return
        own = self._own.pop(key, None)
        if own is not None:
            if not own.done():
                own.set_result(message)
            return
        self.book.answered(key, message)
        sid = self._prompts.pop(key, None)
        if key in self._answered_editor:
            self._answered_editor.discard(key)
            self._late("agent", message)
            if sid is not None:
                self._maybe_ended(sid, message)
            return
        out = self._maybe_ended(sid, message) if sid is not None and sid in self._turns else None
        self._to_editor(item if out is None else out)

    def _update(self, item: bytes, message: dict[str, Any], sid: str) -> bool:
        """Whether the update goes on to the editor (it may end a cancelled turn)."""
        update = message["params"].get("update") if isinstance(message.get("params"), dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if sid in self.reopening:
            self._trace("fenced", session=sid, update=kind, reason="replay of a re-opened session")
            return False
        if sid in self._fenced and kind in self.profile.turn_updates:
            self.stats.fenced += 1
            self._trace("fenced", session=sid, update=kind)
            return False
        if sid in self._idled_here and kind == "state_update":
            self._trace("fenced", session=sid, update=kind)  # the editor got its idle from us
            if not self.served.inflight.turn_live(sid):
                self._idled_here.discard(sid)
            return False
        if sid in self._turns:
            rewritten = self._maybe_ended(sid, message)
            if rewritten is not None:
                self._to_editor(rewritten)
                return False
        return True

    def _withdrawn_by_agent(self, key: str) -> None:
        request = self.served.inflight.to_client.get(key)
        if request is None:
            return
        logger.info(
            "the editor did not answer withdrawn request %s (%s): answered for it", request.id, request.method
        )
        self._answer_agent(key, request, "withdrawn by the agent and not answered by the editor")

    def _answer_agent(self, key: str, request: Pending, reason: str) -> None:
        if self.served.answer_agent(key, answer_for_gone_client(request, reason)):
            self._answered_agent.add(key)
            self.stats.answered_here += 1

    # ------------------------------------------------------------------ cancelling a turn

    def _cancel(self, sid: str, *, forwarded: bool, why: str) -> None:
        self._after(self.settings.permission_grace, lambda: self._close_permissions(sid))
        if sid in self._turns or not self.served.inflight.turn_live(sid):
            return
        turn = self._turns[sid] = _Turn(sid, forwarded)
        turn.machine = TurnMachine(self.policy, profile=self.profile)
        inflight = self.served.inflight

        def prompts() -> list[RequestId]:
            return [r.id for r in inflight.prompts() if r.session_id == sid]

        turn.runner = LadderRunner(
            turn.machine,
            _TurnPeer(self.served, turn),
            self._clock,
            sessions=lambda: [sid],
            requests=prompts,
            on_rung=lambda rung: self._rung(turn, rung),
            on_resolved=lambda resolution, now: self._resolved(turn, resolution),
            name=f"proxy {sid}",
        )
        logger.debug("session %s: %s: ladder started (budget %g s)", sid, why, self.policy.budget)
        self._trace("cancel", scope="turn", session=sid, reason=why, budget=self.policy.budget)
        turn.runner.observe(Observation(Seen.CANCEL))

    def _rung(self, turn: _Turn, rung: Rung) -> None:
        self._trace("rung", scope="turn", session=turn.sid, rung=rung.value)
        said = _RUNG_SAID.get(rung)
        if said is None:
            return
        self.stats.escalated[rung.value] = self.stats.escalated.get(rung.value, 0) + 1
        logger.warning("session %s: %s", turn.sid, said)
        if rung is Rung.KILL:
            self._end_for_editor(turn)  # never later than the budget

    def _resolved(self, turn: _Turn, resolution: Resolution) -> None:
        machine = turn.machine
        self._trace(
            "resolved",
            scope="turn",
            session=turn.sid,
            resolution=resolution.value,
            effect=machine.resolved_by if machine is not None else None,
        )
        if self._turns.get(turn.sid) is turn:
            del self._turns[turn.sid]
        self._end_for_editor(turn)

    def _maybe_ended(self, sid: str, message: dict[str, Any]) -> bytes | None:
        """``message`` came from the agent for cancelled ``sid``: if it ended the turn, the
        ladder hears it and the text the editor gets instead (None: the message as it is)."""
        turn = self._turns.get(sid)
        if turn is None or self.served.inflight.turn_live(sid):
            return None
        ending = self.profile.ending
        observation, rewritten = ending.read(self.profile, message)
        if turn.ended_for_editor:
            rewritten = None
        elif rewritten is not None:
            self.stats.rewritten += 1
            self._trace(
                "rewritten", session=sid, agent_said=observation.stop_reason or observation.seen.value
            )
            logger.info(
                "session %s: the agent ended the cancelled turn with %s; the editor is told cancelled",
                sid,
                observation.stop_reason or "an error",
            )
        was_ended = turn.ended_for_editor
        turn.ended_for_editor = True
        self._fenced.add(sid)
        assert turn.runner is not None
        turn.runner.observe(observation)
        if was_ended:
            return b""  # the editor had its end already: nothing goes out
        return None if rewritten is None else encode_relayed(rewritten)

    def _end_for_editor(self, turn: _Turn) -> None:
        """End ``turn`` for the editor now, ``cancelled``, if it was not yet."""
        if turn.ended_for_editor or self.editor_gone:
            return
        turn.ended_for_editor = True
        self._fenced.add(turn.sid)
        ending = self.profile.ending
        for key, request in list(self.served.inflight.to_agent.items()):
            if request.method == p.SESSION_PROMPT and request.session_id == turn.sid:
                self._answer_editor(key, ending.prompt_answer(request.id))
        if turn.sid in self.served.inflight.working:
            update = ending.idle(turn.sid)
            if update is not None:
                self._idled_here.add(turn.sid)
                self._send_editor(update)

    def _close_permissions(self, sid: str) -> None:
        for key, request in list(self.served.inflight.to_client.items()):
            if request.method == p.SESSION_REQUEST_PERMISSION and request.session_id == sid:
                logger.warning(
                    "session %s: the editor left permission request %s open after its cancel: "
                    "answered cancelled and withdrawn",
                    sid,
                    request.id,
                )
                self._answer_agent(key, request, "the turn was cancelled")
                self._send_editor(
                    {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": request.id}}
                )

    # ------------------------------------------------------------------ the proxy's own requests

    def request_own(self, method: str, params: dict[str, Any]) -> asyncio.Future[dict[str, Any] | None]:
        """Send the agent a request of the proxy's (a respawn's replay); its answer is not the
        editor's. The future gets the answer, or None if the agent ended first."""
        request_id = f"{_OWN_PREFIX}{next(self._own_ids)}"
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        key = id_key(request_id)
        assert key is not None
        self._own[key] = future
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.served.from_client(encode_relayed(message), message)
        return future

    # ------------------------------------------------------------------ silence

    def _arm_silence(self) -> None:
        timeout = self.settings.silence_timeout
        if timeout is None or self._silence_timer is not None:
            return
        live = [sid for sid in self.served.inflight.live_sessions() if sid not in self._turns]
        if not live:
            return
        due = min(self._heard.get(sid, self._clock.now()) for sid in live) + timeout
        self._silence_timer = self._clock.call_at(due, self._silence_due)

    def _silence_due(self) -> None:
        self._silence_timer = None
        timeout = self.settings.silence_timeout
        if timeout is None or self.served.ending:
            return
        now = self._clock.now()
        waiting = {r.session_id for r in self.served.inflight.to_client.values()}
        for sid in self.served.inflight.live_sessions():
            if sid in self._turns or sid in waiting:
                continue  # a question the editor has not answered is not the agent's silence
            if self._heard.get(sid, now) + timeout <= now:
                self.stats.silenced += 1
                logger.warning(
                    "session %s: nothing from the agent for %g s: cancelling the turn", sid, timeout
                )
                self._cancel(sid, forwarded=False, why=f"silent for {timeout:g} s")
        self._arm_silence()

    # ------------------------------------------------------------------ the agent gone

    def _ended(self, reason: str, code: int) -> None:
        """The relay ended (the agent is gone, or the editor): what the editor still waits for
        is answered."""
        for own in self._own.values():
            if not own.done():
                own.set_result(None)
        self._own.clear()
        if self.editor_gone:
            return
        ending = self.profile.ending
        for key, request in list(self.served.inflight.to_client.items()):
            # Nobody can take the editor's answer any more: the question is withdrawn.
            self._answered_agent.add(key)
            self._send_editor(
                {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": request.id}}
            )
        for key, request in list(self.served.inflight.to_agent.items()):
            if isinstance(request.id, str) and request.id.startswith(_OWN_PREFIX):
                continue
            self._answer_editor(
                key, self._gone_answer(request.id, request.method, request.session_id, reason)
            )
        for sid in sorted(self.served.inflight.working):
            turn = self._turns.get(sid)
            if turn is not None and turn.ended_for_editor:
                continue
            update = ending.idle(sid)
            if update is not None:
                self._send_editor(update)
        for turn in list(self._turns.values()):
            turn.ended_for_editor = True
            if turn.runner is not None:
                turn.runner.observe(Observation(Seen.GONE))

    def _gone_answer(
        self, request_id: Any, method: str, sid: str | None, reason: str | None = None
    ) -> dict[str, Any]:
        turn = self._turns.get(sid) if sid is not None else None
        if method == p.SESSION_PROMPT and turn is not None and not turn.ended_for_editor:
            return self.profile.ending.prompt_answer(request_id)
        why = reason or self.served.end_reason or "the agent is gone"
        return rpc_error(request_id, -32603, f"acp-driver proxy: {why}")

    # ------------------------------------------------------------------ writing

    def _answer_editor(self, key: str, answer: dict[str, Any]) -> None:
        if key in self._answered_editor:
            return
        self._answered_editor.add(key)
        self.stats.answered_here += 1
        self._send_editor(answer)

    def _send_editor(self, message: dict[str, Any]) -> None:
        text = encode_relayed(message)
        trace = self.served.trace
        if trace is not None:
            trace.wire("in", text, by="proxy")
        self._to_editor(text)

    def _to_editor(self, text: bytes) -> None:
        if text and not self.editor_gone:
            self.stats.to_editor += 1
            self._write(text)

    def _late(self, side: str, message: dict[str, Any]) -> None:
        self.stats.late_dropped += 1
        self._trace("late_answer", side=side, id=message.get("id"))

    def _trace(self, kind: str, **fields: Any) -> None:
        trace = self.served.trace
        if trace is not None:
            trace.event(kind, **{"by": "proxy", **fields})

    def _after(self, delay: float, callback: Callable[[], None]) -> None:
        def fire() -> None:
            self._timers.discard(timer)
            if not self.served.ending:
                callback()

        timer = self._clock.call_at(self._clock.now() + delay, fire)
        self._timers.add(timer)

    def close(self) -> None:
        """Forget every timer (the connection ended)."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._silence_timer is not None:
            self._silence_timer.cancel()
            self._silence_timer = None
        for turn in self._turns.values():
            if turn.runner is not None:
                turn.runner.stop()


def _target(message: dict[str, Any]) -> str | None:
    """The id key a ``$/cancel_request`` names."""
    params = message.get("params")
    return id_key(params.get("requestId")) if isinstance(params, dict) else None
