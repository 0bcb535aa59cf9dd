"""``acp-driver trace FILE --chrome OUT.json``: a trace in the Trace Event Format.

The JSON that Perfetto (ui.perfetto.dev) and ``chrome://tracing`` open. Times are microseconds
since the recording started (``ts``, ``dur``). Lanes:

- per peer (the agent's process, a server's connection, an audit's check) a *process* with a
  thread ``process`` (its start, signals, turn timeout, exit, the connection's end, stray
  replies, verdicts: instant events) and a thread ``requests`` (the requests of no turn, such
  as ``initialize`` and ``session/new``: complete events);
- per session a process, and in it per turn a thread: the turn as a complete event (``X``)
  from its prompt to its end, the moments of its cancel (the host's cancel, ``session/cancel``
  and ``$/cancel_request`` sent, each rung taken, the resolution) and its updates as instant
  events (``i``), the cancel to the turn's end as an async slice (``b``/``e``); the requests
  made during the turn (its ``session/prompt``, permission requests, file and terminal
  requests...) as complete events on the turn's ``requests`` threads, packed so that slices on
  one thread never overlap.

Every event made from one line of the file carries ``args.event``, the line's id (``#57``).
"""

from __future__ import annotations

from typing import Any

from ._model import Moment, Peer, Trace, Turn
from ._verdict import cancel_anchor, verdict

_PEER_KINDS = frozenset(
    {"spawn", "exit", "signal", "timeout", "connection_end", "stray", "raw", "cancel", "rung"}
)
_PROCESS_SCOPED = frozenset({"exit", "signal", "spawn"})


def _us(t: float) -> int:
    return round(t * 1_000_000)


class _Request:
    __slots__ = ("eid", "end", "end_eid", "error", "method", "out", "session", "t")

    def __init__(self, t: float, eid: int, method: str, session: Any, out: bool) -> None:
        self.t = t
        self.eid = eid
        self.method = method
        self.session = session
        self.out = out
        self.end: float | None = None
        self.end_eid: int | None = None
        self.error: Any = None


def _requests(trace: Trace) -> dict[str, list[_Request]]:
    """Every request of the file, per peer, with its answer (a direction's ids are its own)."""
    flip = trace.header.get("role") == "agent"
    found: dict[str, list[_Request]] = {}
    open_: dict[tuple[str, bool, Any], _Request] = {}
    for event in trace.events:
        if event.get("kind") != "wire" or not isinstance(event.get("msg"), (dict, list)):
            continue
        key = str(event.get("conn") or event.get("check") or "")
        out = (event.get("dir") == "out") != flip
        message = event["msg"]
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict) or "id" not in item:
                continue
            rid = item["id"]
            hashable = rid if isinstance(rid, (str, int, float, type(None))) else repr(rid)
            method = item.get("method")
            if isinstance(method, str):
                params = item.get("params")
                session = params.get("sessionId") if isinstance(params, dict) else None
                request = _Request(float(event["t"]), int(event["id"]), method, session, out)
                found.setdefault(key, []).append(request)
                open_[(key, out, hashable)] = request
            else:
                asked = open_.pop((key, not out, hashable), None)
                if asked is not None:
                    asked.end = float(event["t"])
                    asked.end_eid = int(event["id"])
                    error = item.get("error")
                    asked.error = error.get("code") if isinstance(error, dict) else None
    return found


class _Export:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.events: list[dict[str, Any]] = []
        self.next_pid = 1

    def process(self, pid: int, name: str, sort: int) -> None:
        self.events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
        self.events.append(
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": sort}}
        )

    def thread(self, pid: int, tid: int, name: str, sort: int) -> None:
        self.events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
        self.events.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": sort}}
        )

    def instant(self, pid: int, tid: int, moment: Moment, cat: str, scope: str = "t") -> None:
        self.events.append(
            {
                "ph": "i",
                "s": scope,
                "pid": pid,
                "tid": tid,
                "ts": _us(moment.t),
                "name": moment.label,
                "cat": cat,
                "args": {"event": moment.eid},
            }
        )

    def complete(
        self, pid: int, tid: int, name: str, t: float, end: float, cat: str, args: dict[str, Any]
    ) -> None:
        ts = _us(t)
        self.events.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": max(0, _us(end) - ts),
                "name": name,
                "cat": cat,
                "args": args,
            }
        )

    def requests(self, pid: int, base_tid: int, label: str, requests: list[_Request], sort: int) -> None:
        """``requests`` as complete events on threads ``base_tid``, ``base_tid + 1``...: on each
        thread a slice either nests in the one open before it or starts after it ended."""
        rows: list[list[int]] = []  # per thread: the ends of the slices still open
        for request in sorted(requests, key=lambda r: (r.t, -(r.end or self.trace.end))):
            end = request.end if request.end is not None else self.trace.end
            start_us, end_us = _us(request.t), _us(end)
            row = None
            for index, stack in enumerate(rows):
                while stack and stack[-1] <= start_us:
                    stack.pop()
                if not stack or end_us <= stack[-1]:
                    row = index
                    break
            if row is None:
                row = len(rows)
                rows.append([])
                self.thread(
                    pid, base_tid + row, f"{label} requests" + (f" ({row + 1})" if row else ""), sort + row
                )
            rows[row].append(end_us)
            args: dict[str, Any] = {
                "event": request.eid,
                "direction": "sent" if request.out else "received",
                "answer_event": request.end_eid,
            }
            if request.end is None:
                args["unanswered"] = True
            if request.error is not None:
                args["error_code"] = request.error
            self.complete(pid, base_tid + row, request.method, request.t, end, "request", args)

    def peer(self, peer: Peer, requests: list[_Request]) -> None:
        pid = self.next_pid
        self.next_pid += 1
        checks = {v.check for v in self.trace.verdicts}
        name = ("check " if peer.key in checks else "connection ") + peer.key if peer.key else "agent process"
        self.process(pid, name, pid)
        self.thread(pid, 0, "process", 0)
        for marker in peer.markers:
            if marker.kind in _PEER_KINDS:
                self.instant(pid, 0, marker, marker.kind, "p" if marker.kind in _PROCESS_SCOPED else "t")
        for found in self.trace.verdicts:
            if found.check == peer.key:
                moment = Moment(found.t, found.eid, "verdict", f"{found.result.upper()} {found.rule}", {})
                self.instant(pid, 0, moment, "verdict")
        rest: list[_Request] = []
        by_turn: dict[int, list[_Request]] = {}
        for request in requests:
            owner = next(
                (
                    turn
                    for turn in peer.turns
                    if turn.session == str(request.session)
                    and turn.t <= request.t <= (turn.finish if turn.finish is not None else self.trace.end)
                ),
                None,
            )
            if owner is None:
                rest.append(request)
            else:
                by_turn.setdefault(id(owner), []).append(request)
        self.requests(pid, 1, "connection", rest, 1)
        for session, turns in peer.sessions.items():
            spid = self.next_pid
            self.next_pid += 1
            self.process(spid, f"session {session}" + (f" ({name})" if peer.key else ""), spid)
            for turn in turns:
                self.turn(spid, turn, by_turn.get(id(turn), []))

    def turn(self, pid: int, turn: Turn, requests: list[_Request]) -> None:
        tid = turn.index * 100
        self.thread(pid, tid, f"turn {turn.index}: {turn.prompt}", tid)
        finish = turn.finish if turn.finish is not None else self.trace.end
        args: dict[str, Any] = {
            "event": turn.eid,
            "verdict": verdict(turn),
            "stop_reason": turn.stop_reason,
            "resolution": turn.resolution,
            "resolved_by": turn.resolved_by,
            "updates": len(turn.updates),
        }
        self.complete(pid, tid, f"turn {turn.index}", turn.t, finish, "turn", args)
        for marker in turn.markers:
            self.instant(pid, tid, marker, marker.kind)
        for update in turn.updates:
            self.instant(pid, tid, update, "update")
        for late in turn.late:
            self.instant(pid, tid, late, "late")
        for permission in turn.permissions:
            if permission.withdrawn is not None:
                self.instant(pid, tid, permission.withdrawn, "withdrawn")
        anchor = cancel_anchor(turn)
        if anchor is not None and turn.finish is not None:
            ident = f"cancel-{anchor.eid}"
            common = {"pid": pid, "tid": tid, "cat": "cancel", "id": ident, "name": "cancel → end"}
            self.events.append({"ph": "b", "ts": _us(anchor.t), "args": {"event": anchor.eid}, **common})
            self.events.append(
                {"ph": "e", "ts": _us(turn.finish), "args": {"resolved_by": turn.resolved_by}, **common}
            )
        self.requests(pid, tid + 1, f"turn {turn.index}", requests, tid + 1)

    def run(self) -> dict[str, Any]:
        requests = _requests(self.trace)
        for key, peer in self.trace.peers.items():
            self.peer(peer, requests.get(key, []))
        header = self.trace.header
        return {
            "traceEvents": self.events,
            "displayTimeUnit": "ms",
            "otherData": {
                "source": "acp-driver trace",
                "tool": str(header.get("tool", "")),
                "started": str(header.get("started", "")),
                "role": str(header.get("role", "")),
            },
        }


def chrome_trace(trace: Trace) -> dict[str, Any]:
    """``trace`` in the Trace Event Format (see the module docstring), as a JSON object."""
    return _Export(trace).run()
