"""A trace file read back: its turns, their cancels, permissions, updates, and the processes.

Everything is derived from the recorded messages and lifecycle events (docs/trace.md), in file
order, the way the host saw them:

- a turn is a ``session/prompt`` sent and what ends it, which update is whose, and which is
  late are the protocol version's lifecycle (``core/_lifecycle.py``), the one the driver asks:
  v1, the answer ends the turn, a turn-scoped update of the session once it was answered is
  *late* (after the fence) and kept on it, and so is one naming a tool call of an earlier turn;
  v2, the idle ends the span's turns, and an update of no running turn is background work;
- a permission request (``session/request_permission`` from the agent) is a span from the
  request to the host's answer; ``$/cancel_request`` for it from the agent is a withdrawal;
- ``session/cancel`` and ``$/cancel_request`` sent, and the ``cancel``, ``rung`` and ``resolved``
  events, are the turn's markers; signals, spawn, exit and the connection's end belong to the
  *peer* (one agent process or connection: the whole file, or one ``conn`` of a server's trace,
  or one ``check`` of an audit's);
- a ``verdict`` (``check --trace``) is linked to the moments of its check that prove it: the
  turns' starts and ends, cancels, rungs, permissions, late updates, stray replies, exits.

The events come from ``_read`` (the file read back: bounded, checked, redacted); a trace cut by
its size cap or by a crash is analysed up to where it ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import protocol as p
from ..core import (
    Decided,
    Decision,
    NegotiationError,
    ProtocolProfile,
    SessionLifecycle,
    lifecycle_for,
    profile_for,
    read_answer,
    read_prompt_answer,
    read_update,
)
from ._redact import wire_key

TURN_UPDATES = p.TURN_UPDATES
"""The driver's rule (the v1 profile's ``turn_updates``): only these kinds belong to a turn; any
other kind -- about the session, or unknown -- is valid at any time, never late."""


@dataclass
class Moment:
    """One point on the timeline: ``eid`` is the event's id in the file."""

    t: float
    eid: int
    kind: str
    """``cancel``, ``session_cancel``, ``cancel_request``, ``rung``, ``resolved``, ``signal``,
    ``timeout``, ``spawn``, ``exit``, ``connection_end``, ``late``, ``stray``, ``raw``..."""
    label: str
    event: dict[str, Any]


@dataclass
class Permission:
    t: float
    eid: int
    request_id: Any
    title: str
    end: float | None = None
    end_eid: int | None = None
    outcome: str | None = None
    """``cancelled``, ``selected`` (with ``option``), or ``error``; None: never answered."""
    option: str | None = None
    withdrawn: Moment | None = None


@dataclass(eq=False)
class Turn:
    """One prompt turn (compared and hashed by identity: a lifecycle's key)."""

    peer: str
    session: str
    index: int
    """1 for the session's first turn."""
    request_id: Any
    t: float
    eid: int
    prompt: str
    end: float | None = None
    end_eid: int | None = None
    stop_reason: str | None = None
    error: str | None = None
    resolution: str | None = None
    resolved_at: float | None = None
    """When the host's turn resolved (a ``resolved`` event): without an answer, when it was
    killed or its agent was gone."""
    resolved_by: str | None = None
    cancelled_by: str | None = None
    updates: list[Moment] = field(default_factory=list)
    late: list[Moment] = field(default_factory=list)
    permissions: list[Permission] = field(default_factory=list)
    markers: list[Moment] = field(default_factory=list)
    tool_calls: set[str] = field(default_factory=set)

    @property
    def running(self) -> bool:
        return self.end is None and self.resolved_at is None

    @property
    def finish(self) -> float | None:
        """When the turn was over: its answer, else its resolution."""
        return self.end if self.end is not None else self.resolved_at

    @property
    def cancel(self) -> Moment | None:
        """The first cancel of this turn (the host's ``cancel`` event, else ``session/cancel``)."""
        for kinds in (("cancel",), ("session_cancel", "cancel_request")):
            for marker in self.markers:
                if marker.kind in kinds:
                    return marker
        return None

    @property
    def rungs(self) -> list[Moment]:
        return [m for m in self.markers if m.kind == "rung"]

    def update_kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for update in self.updates:
            counts[update.label] = counts.get(update.label, 0) + 1
        return counts


@dataclass
class Peer:
    """One agent process or connection (a server's ``conn``, an audit's ``check``)."""

    key: str
    sessions: dict[str, list[Turn]] = field(default_factory=dict)
    markers: list[Moment] = field(default_factory=list)
    first: float = 0.0
    last: float = 0.0
    prompts: dict[Any, Turn] = field(default_factory=dict)
    """Our ``session/prompt`` ids -> their turn."""
    asked: dict[Any, tuple[str, Permission | None]] = field(default_factory=dict)
    """The agent's request ids not yet answered -> (method, its permission span)."""
    sent: dict[Any, str] = field(default_factory=dict)
    """Our other request ids not yet answered -> method."""
    profile: ProtocolProfile = field(default_factory=lambda: profile_for(1))
    """The ACP version spoken, by the ``initialize`` answer (``core``'s negotiation rule)."""
    lives: dict[str, SessionLifecycle[Turn]] = field(default_factory=dict)
    """Each session's lifecycle (the version's): which update is whose, what ends a turn."""

    @property
    def version(self) -> int:
        return self.profile.version

    def life(self, session: Any) -> SessionLifecycle[Turn]:
        key = str(session)
        found = self.lives.get(key)
        if found is None:
            found = self.lives[key] = lifecycle_for(self.profile)
        return found

    @property
    def turns(self) -> list[Turn]:
        return [turn for turns in self.sessions.values() for turn in turns]

    def running(self, session: Any) -> Turn | None:
        turns = self.sessions.get(session) if isinstance(session, str) else None
        return turns[-1] if turns and turns[-1].running else None

    def last_turn(self, session: Any) -> Turn | None:
        turns = self.sessions.get(session) if isinstance(session, str) else None
        return turns[-1] if turns else None


@dataclass
class Verdict:
    eid: int
    t: float
    check: str
    rule: str
    level: str
    result: str
    evidence: str
    start: float
    refs: list[int] = field(default_factory=list)
    """Ids of the moments of its check that prove it."""


@dataclass
class Trace:
    header: dict[str, Any]
    events: list[dict[str, Any]]
    peers: dict[str, Peer]
    verdicts: list[Verdict]
    truncated: bool
    bad_lines: int
    end: float

    @property
    def version(self) -> Any:
        return self.header.get("v")

    @property
    def turns(self) -> list[Turn]:
        return [turn for peer in self.peers.values() for turn in peer.turns]

    def event(self, eid: int) -> dict[str, Any] | None:
        """The event with id ``eid`` (ids are the file's order, from 0)."""
        if 0 <= eid < len(self.events) and self.events[eid].get("id") == eid:
            return self.events[eid]
        return next((e for e in self.events if e.get("id") == eid), None)


def analyse(events: list[dict[str, Any]], bad: int) -> Trace:
    """The trace of ``events`` (the file's, in order, the header first; ``bad``: the lines that
    were not events)."""
    return _Analysis(events, bad).run()


def _text(value: Any, limit: int = 80) -> str:
    if isinstance(value, list):
        value = " ".join(str(b.get("text", "")) for b in value if isinstance(b, dict))
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Analysis:
    """One pass over the events, in order (see the module docstring)."""

    def __init__(self, events: list[dict[str, Any]], bad: int) -> None:
        self.events = events
        self.bad = bad
        self.header = events[0]
        self.flip = self.header.get("role") == "agent"
        self.peers: dict[str, Peer] = {}
        self.verdicts: list[Verdict] = []
        self.check_start: dict[str, float] = {}
        self.truncated = False

    def peer(self, event: dict[str, Any]) -> Peer:
        key = str(event.get("conn") or event.get("check") or "")
        found = self.peers.get(key)
        if found is None:
            found = self.peers[key] = Peer(key, first=float(event["t"]))
        found.last = float(event["t"])
        return found

    def run(self) -> Trace:
        for event in self.events[1:]:
            kind = event["kind"]
            if kind == "wire":
                self.wire(event)
            elif kind == "truncated":
                self.truncated = True
            elif kind == "verdict":
                self.verdict(event)
            else:
                self.lifecycle(kind, event)
        end = float(self.events[-1]["t"])
        return Trace(self.header, self.events, self.peers, self.verdicts, self.truncated, self.bad, end)

    # ------------------------------------------------------------------ messages

    def wire(self, event: dict[str, Any]) -> None:
        peer = self.peer(event)
        direction = event.get("dir")
        if self.flip:
            direction = "in" if direction == "out" else "out"
        message = event.get("msg")
        if message is None:
            if "raw" in event:
                label = "line that is not JSON" + (" sent" if direction == "out" else " received")
                peer.markers.append(self.moment(event, "raw", label))
            return
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict):
                item = _keyed(item)
                if direction == "out":
                    self.sent_message(peer, event, item)
                else:
                    self.received_message(peer, event, item)

    def moment(self, event: dict[str, Any], kind: str, label: str) -> Moment:
        return Moment(float(event["t"]), int(event["id"]), kind, label, event)

    def sent_message(self, peer: Peer, event: dict[str, Any], message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        if isinstance(method, str) and "id" in message:
            if method == p.SESSION_PROMPT:
                sid = params.get("sessionId")
                turns = peer.sessions.setdefault(str(sid), [])
                turn = Turn(
                    peer.key,
                    str(sid),
                    len(turns) + 1,
                    message["id"],
                    float(event["t"]),
                    int(event["id"]),
                    _text(params.get("prompt", "")),
                )
                turns.append(turn)
                peer.prompts[message["id"]] = turn
                peer.life(sid).sent(turn, lambda: turn.end is not None)
            else:
                peer.sent[message["id"]] = method
        elif method == p.SESSION_CANCEL:
            running = peer.running(params.get("sessionId"))
            by = " (by the server)" if event.get("by") == "server" else ""
            moment = self.moment(event, "session_cancel", "session/cancel sent" + by)
            (running.markers if running is not None else peer.markers).append(moment)
        elif method == p.CANCEL_REQUEST:
            target = peer.prompts.get(params.get("requestId"))
            moment = self.moment(event, "cancel_request", "$/cancel_request sent for the prompt")
            if target is not None and target.running:
                target.markers.append(moment)
            else:
                moment.label = "$/cancel_request sent"
                peer.markers.append(moment)
        elif method is None and "id" in message:
            self.answer_sent(peer, event, message)

    def answer_sent(self, peer: Peer, event: dict[str, Any], message: dict[str, Any]) -> None:
        found = peer.asked.pop(message.get("id"), None)
        if found is None or found[1] is None:
            return
        permission = found[1]
        permission.end = float(event["t"])
        permission.end_eid = int(event["id"])
        result = message.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if isinstance(outcome, dict):
            permission.outcome = str(outcome.get("outcome"))
            if isinstance(outcome.get("optionId"), str):
                permission.option = outcome["optionId"]
        else:
            permission.outcome = "error"

    def received_message(self, peer: Peer, event: dict[str, Any], message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        if method == p.SESSION_UPDATE:
            self.update(peer, event, params)
        elif isinstance(method, str) and "id" in message:
            permission = None
            if method == p.SESSION_REQUEST_PERMISSION:
                turn = peer.running(params.get("sessionId"))
                # v2 asks with its own top-level ``title``; v1 with the tool call's
                call = params.get("toolCall")
                title = params.get("title")
                if not isinstance(title, str) or not title:
                    title = call.get("title", "") if isinstance(call, dict) else ""
                title = _text(title, 60)
                permission = Permission(float(event["t"]), int(event["id"]), message["id"], title)
                if turn is not None:
                    turn.permissions.append(permission)
            peer.asked[message["id"]] = (method, permission)
        elif method == p.CANCEL_REQUEST:
            rid = params.get("requestId")
            asked = peer.asked.get(rid)
            moment = self.moment(event, "withdrawn", "$/cancel_request from the agent")
            if asked is not None and asked[1] is not None:
                asked[1].withdrawn = moment
            else:
                peer.markers.append(moment)
        elif method is None:
            self.answer_received(peer, event, message)

    def answer_received(self, peer: Peer, event: dict[str, Any], message: dict[str, Any]) -> None:
        rid = message.get("id")
        turn = peer.prompts.pop(rid, None) if isinstance(rid, (int, str)) else None
        if turn is not None:
            error = message.get("error")
            for step in read_prompt_answer(peer.life(turn.session), turn, message):
                self.decided(peer, event, step, error)
            return
        method = peer.sent.pop(rid, None)
        if method == p.INITIALIZE:
            try:
                peer.profile = read_answer("auto", message.get("result")).profile
            except NegotiationError:
                pass
        if method is None:
            # An answer to nothing we asked: a reply to a notification, or an id-less error.
            error = message.get("error")
            what = f"error {error.get('code')}" if isinstance(error, dict) else "result"
            peer.markers.append(self.moment(event, "stray", f"reply to no request ({what}, id {rid!r})"))

    def decided(self, peer: Peer, event: dict[str, Any], step: Decided[Turn], error: Any = None) -> None:
        """A decision of the session's lifecycle about one of its turns."""
        turn = step.key
        if step.decision in (Decision.ENDED, Decision.SPEAKS_V1, Decision.REFUSED):
            turn.end = float(event["t"])
            turn.end_eid = int(event["id"])
            if step.decision is not Decision.REFUSED:
                turn.stop_reason = step.stop_reason
            elif step.error is not None:
                turn.error = _text(step.error, 60)
            elif isinstance(error, dict):
                turn.error = f"{error.get('code')} {_text(error.get('message', ''), 60)}"
            peer.life(turn.session).forget(turn)

    def update(self, peer: Peer, event: dict[str, Any], params: dict[str, Any]) -> None:
        update = params.get("update")
        kind = str(update.get("sessionUpdate")) if isinstance(update, dict) else "?"
        session = params.get("sessionId")
        if not isinstance(update, dict):
            return
        life = peer.life(session)
        owner, effects = read_update(life, update)
        if owner is not None:
            call = update.get("toolCallId")
            if isinstance(call, str):
                owner.tool_calls.add(call)
            owner.updates.append(self.moment(event, "update", kind))
        elif kind in life.profile.turn_updates:
            late, late_of = life.late_of(update)
            if late and late_of is not None:
                running = peer.running(session)
                label = (
                    f"{kind} of a tool call of turn {late_of.index}"
                    if running is not None and running is not late_of
                    else f"{kind} after the turn's answer"
                )
                late_of.late.append(self.moment(event, "late", label))
        if effects is not None:
            for step in effects.ended:
                self.decided(peer, event, step)

    # ------------------------------------------------------------------ lifecycle

    def lifecycle(self, kind: str, event: dict[str, Any]) -> None:
        peer = self.peer(event)
        session = event.get("session")
        turn = peer.running(session) or (
            peer.last_turn(session) if kind in ("resolved", "rung", "cancel") else None
        )
        if kind == "check_start":
            self.check_start[peer.key] = float(event["t"])
            return
        if kind == "resolved" and turn is not None:
            turn.resolved_at = float(event["t"])
            turn.resolution = _opt(event.get("resolution"))
            turn.resolved_by = _opt(event.get("by"))
            turn.cancelled_by = _opt(event.get("cancelled_by"))
        moment = self.moment(event, kind, _label(kind, event))
        if turn is not None and kind in ("cancel", "rung", "resolved"):
            turn.markers.append(moment)
            return
        if event.get("scope") == "connection":  # a server's ladder: every prompt in flight
            for running in peer.turns:
                if running.running:
                    running.markers.append(moment)
        peer.markers.append(moment)

    def verdict(self, event: dict[str, Any]) -> None:
        key = str(event.get("check") or "")
        start = self.check_start.get(key, 0.0)
        end = float(event["t"])
        peer = self.peers.get(key)
        refs: list[int] = []
        if peer is not None:
            for turn in peer.turns:
                refs.append(turn.eid)
                if turn.end_eid is not None:
                    refs.append(turn.end_eid)
                refs.extend(m.eid for m in (*turn.markers, *turn.late))
                for permission in turn.permissions:
                    refs.append(permission.eid)
                    if permission.end_eid is not None:
                        refs.append(permission.end_eid)
                    if permission.withdrawn is not None:
                        refs.append(permission.withdrawn.eid)
            refs.extend(m.eid for m in peer.markers if m.kind not in ("spawn", "connection_end"))
        self.verdicts.append(
            Verdict(
                int(event["id"]),
                end,
                key,
                str(event.get("rule", "")),
                str(event.get("level", "")),
                str(event.get("result", "")),
                str(event.get("evidence", "")),
                start,
                sorted(set(refs)),
            )
        )


def _keyed(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its ``id`` (and a ``$/cancel_request``'s ``requestId``) usable as a key:
    an object or an array, a peer's mistake, is keyed by its JSON text (``wire_key``)."""
    rid = message.get("id")
    params = message.get("params")
    target = params.get("requestId") if isinstance(params, dict) else None
    if not isinstance(rid, (dict, list)) and not isinstance(target, (dict, list)):
        return message
    out = {**message, "id": wire_key(rid)} if "id" in message else dict(message)
    if isinstance(params, dict) and "requestId" in params:
        out["params"] = {**params, "requestId": wire_key(target)}
    return out


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _label(kind: str, event: dict[str, Any]) -> str:
    """A moment's words on the timeline and in the summary."""
    if kind == "cancel":
        why = f": {event['reason']}" if event.get("reason") else ""
        return f"cancel ({event.get('scope', '?')}) by {event.get('by', '?')}{why}"
    if kind == "rung":
        due = event.get("due")
        return f"rung {event.get('rung')}" + (
            f" (due +{float(due):.3g} s)" if isinstance(due, (int, float)) else ""
        )
    if kind == "resolved":
        return f"resolved {event.get('resolution')}" + (f" by {event['by']}" if event.get("by") else "")
    if kind == "signal":
        return f"{event.get('name')} " + ("received" if event.get("to") == "host" else "sent to the agent")
    if kind == "exit":
        return f"agent {event.get('description') or event.get('status')}"
    if kind == "spawn":
        return f"agent started (pid {event.get('pid')})"
    if kind == "connection_end":
        return f"connection ended: {_text(event.get('reason', ''), 60)}"
    if kind == "connection_start":
        return f"connection opened ({event.get('profile')})"
    if kind == "timeout":
        return f"turn timeout ({event.get('after')} s)"
    return kind
