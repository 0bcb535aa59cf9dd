"""What is in flight on one served connection, in both directions, and where each message goes.

The server sits between a remote client and an agent (a subprocess or an in-process runtime)
and forwards messages it does not otherwise touch. It still has to know three things, which it
learns by parsing each message once:

- the client's requests the agent has not answered (``session/prompt`` above all): when the
  connection ends, each live turn is cancelled through the ladder. Which turn is live is the
  version's lifecycle's (``core/_lifecycle.py``, the host's own; the version by the ``initialize``
  answer and the one negotiation rule): v1, a prompt unanswered; v2, a prompt held, a turn
  inserted and not ended at its idle, or work the agent says runs (``turn_live``);
- the agent's requests the client has not answered (``session/request_permission``, ``fs/*``,
  ``terminal/*``): when the connection ends, the server answers them for the client that is gone;
- the sessions of the connection, and for each message from the agent which Streamable HTTP
  stream carries it (the RFD's routing: answers to ``session/new``/``load``/``resume`` on the
  connection stream, session-scoped traffic on that session's stream, ``initialize``'s answer
  in the POST's body).

Pure: no I/O, no asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .. import protocol as p
from ..core import (
    PROFILES,
    V1,
    Decision,
    NegotiationError,
    ProtocolProfile,
    SessionLifecycle,
    lifecycle_for,
    read_answer,
    read_prompt_answer,
    read_update,
)
from ..net import SESSION_ATTACH_METHODS, SESSION_SCOPED_METHODS, id_key, session_id_of

_OVER = frozenset({Decision.ENDED, Decision.REFUSED, Decision.SPEAKS_V1})
"""Decisions after which a turn is over (the lifecycle forgets it)."""

INITIALIZE_REPLY: Final = "initialize"
"""Route of the answer to ``initialize`` (the POST's body on Streamable HTTP)."""
CONNECTION: Final = "connection"
"""Route of a message for the connection-scoped stream."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A request one side sent and the other has not answered."""

    id: Any
    method: str
    session_id: str | None


@dataclass
class RelayLedger:
    """The requests in flight both ways on one connection, and its sessions (module docstring)."""

    to_agent: dict[str, Pending] = field(default_factory=dict)
    """The client's requests, keyed by ``id_key``, until the agent answers."""
    to_client: dict[str, Pending] = field(default_factory=dict)
    """The agent's requests, keyed by ``id_key``, until the client (or we) answer."""
    sessions: set[str] = field(default_factory=set)
    """Sessions established (``session/new`` answered) or being attached (``load``/``resume``)."""
    _attaching: dict[str, str] = field(default_factory=dict)
    """``session/load``/``resume`` requests in flight: id key -> the session they attach."""
    version: int | None = None
    """The protocol version the connection speaks (from the ``initialize`` answer)."""
    lives: dict[str, SessionLifecycle[str]] = field(default_factory=dict)
    """Each session's prompts and turns, by the version's lifecycle (the host's): what ends a
    turn is decided there, not here. Keys: the prompts' id keys."""

    @property
    def profile(self) -> ProtocolProfile:
        return profile_or_v1(self.version)

    @property
    def working(self) -> set[str]:
        """Sessions with a live turn (v1: a prompt unanswered; v2: a turn inserted and not ended
        at its idle, or foreground work the agent says runs)."""
        return {sid for sid, life in self.lives.items() if life.works}

    def life(self, sid: str) -> SessionLifecycle[str]:
        found = self.lives.get(sid)
        if found is None:
            found = self.lives[sid] = lifecycle_for(self.profile)
        return found

    # ------------------------------------------------------------------ client -> agent

    def from_client(self, message: Any) -> None:
        """Record a message the client sent to the agent (already parsed; any JSON value)."""
        if not isinstance(message, dict):
            return
        method = message.get("method")
        key = id_key(message.get("id"))
        if isinstance(method, str):
            if key is None:
                return  # a notification
            sid = session_id_of(message)
            self.to_agent[key] = Pending(message["id"], method, sid)
            if method == p.SESSION_PROMPT and sid is not None:
                self.life(sid).sent(key, lambda: key not in self.to_agent)
            if method in SESSION_ATTACH_METHODS and sid is not None:
                self._attaching[key] = sid
                self.sessions.add(sid)  # its replay may come before the answer
        elif key is not None:
            self.to_client.pop(key, None)  # the client answered the agent's request

    # ------------------------------------------------------------------ agent -> client

    def from_agent(self, message: Any) -> str:
        """Record a message from the agent; returns its route: ``INITIALIZE_REPLY``,
        ``CONNECTION`` or the session id whose stream carries it."""
        if not isinstance(message, dict):
            return CONNECTION
        method = message.get("method")
        key = id_key(message.get("id"))
        if isinstance(method, str):
            sid = session_id_of(message)
            if key is not None:
                self.to_client[key] = Pending(message["id"], method, sid)
            elif method == p.SESSION_UPDATE and sid is not None:
                self._state(sid, message)
            if sid is not None and sid in self.sessions and sid not in self._attaching.values():
                return sid
            return CONNECTION  # replay of a load in progress stays in order with its answer
        if key is None:
            return CONNECTION
        request = self.to_agent.pop(key, None)
        if request is None:
            return CONNECTION
        attached = self._attaching.pop(key, None)
        if attached is not None:
            if "result" not in message and attached not in self._attaching.values():
                self.sessions.discard(attached)  # the load failed
            return CONNECTION
        if request.method == p.INITIALIZE:
            try:  # what the agent speaks, by the one rule (an echoed 2 in v1's shape is v1)
                self.version = read_answer("auto", message.get("result")).profile.version
            except NegotiationError:
                self.version = None
            return INITIALIZE_REPLY
        if request.method == p.SESSION_NEW:
            sid = session_id_of(message)
            if sid is not None:
                self.sessions.add(sid)
            return CONNECTION
        if request.method == p.SESSION_PROMPT and request.session_id is not None:
            life = self.life(request.session_id)
            # v1: the turn's end; v2: its insertion (live until its idle)
            for step in read_prompt_answer(life, key, message):
                if step.decision in _OVER:
                    life.forget(step.key)
        if request.method in SESSION_SCOPED_METHODS and request.session_id in self.sessions:
            assert request.session_id is not None
            return request.session_id
        return CONNECTION

    def _state(self, sid: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return
        life = self.lives.get(sid)
        if life is None and update.get("sessionUpdate") == "state_update":
            life = self.life(sid)  # work the relay saw no prompt for (a resumed session's)
        if life is None:
            return
        _owner, effects = read_update(life, update)
        for step in effects.ended if effects is not None else ():
            life.forget(step.key)

    # ------------------------------------------------------------------ questions

    def prompts(self) -> list[Pending]:
        """The ``session/prompt`` requests the agent has not answered (v1: the live turns; v2:
        the prompts still held, not inserted yet)."""
        return [r for r in self.to_agent.values() if r.method == p.SESSION_PROMPT]

    def live_sessions(self) -> list[str]:
        """The sessions a cancel must stop: those with a prompt unanswered, and (v2) those
        whose foreground work runs."""
        sids = [r.session_id for r in self.prompts() if r.session_id is not None]
        return list(dict.fromkeys([*sids, *sorted(self.working)]))

    def turn_live(self, sid: str) -> bool:
        """Whether ``sid`` has a live turn: its prompt unanswered, or (v2) its foreground work
        running. The one reading of "what ends a turn" a relay needs (the proxy asks it)."""
        return sid in self.working or any(
            r.session_id == sid and r.method == p.SESSION_PROMPT for r in self.to_agent.values()
        )

    @property
    def in_flight(self) -> bool:
        """Whether any turn is live (a prompt unanswered, or v2 work running)."""
        return bool(self.working) or any(r.method == p.SESSION_PROMPT for r in self.to_agent.values())

    @property
    def initializing(self) -> bool:
        """Whether the agent has not answered ``initialize`` yet (it may still be starting up)."""
        return any(r.method == p.INITIALIZE for r in self.to_agent.values())

    @property
    def busy(self) -> bool:
        """Whether a request is in flight either way."""
        return bool(self.to_agent or self.to_client)


def answer_for_gone_client(request: Pending, reason: str) -> dict[str, Any]:
    """What the server answers the agent for a client that is gone.

    Spec: "the Client MUST respond to all pending session/request_permission requests with the
    cancelled outcome"; any other request gets an error (nothing can answer it any more).
    """
    if request.method == p.SESSION_REQUEST_PERMISSION:
        return {"jsonrpc": "2.0", "id": request.id, "result": {"outcome": {"outcome": "cancelled"}}}
    return {
        "jsonrpc": "2.0",
        "id": request.id,
        "error": {"code": -32800, "message": f"request cancelled: {reason}"},
    }


def profile_or_v1(version: int | None) -> ProtocolProfile:
    """The profile of ``version`` (v1 until ``initialize`` was answered)."""
    return PROFILES.get(version, V1) if version is not None else V1
