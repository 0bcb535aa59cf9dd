"""``acp-driver trace FILE``: a trace in a few lines per turn, for a terminal.

Per turn: when it ran and how long, its verdict in words (``trace._verdict``: the same sentence
as at the top of its lane on the page), its updates by kind (and how many came after
``session/cancel``), its permission requests and how each was answered, the cancel (what asked for it, and what it followed: a signal the command got, its
turn timeout) and which rung resolved it in how many milliseconds, and the updates that came
after the turn's answer (past the fence). Per peer: the agent's start, the signals sent to it,
its exit, the connection's end. Then the verdicts of ``check --trace``.

Plain text: whatever the agent wrote is quoted with its control characters escaped, never
written raw to the terminal.
"""

from __future__ import annotations

from ._model import Moment, Peer, Trace, Turn
from ._verdict import updates_after_cancel, verdict

_CAUSE_WINDOW = 0.5
"""A signal or a turn timeout this soon before a cancel is what the cancel answered."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _safe(text: str) -> str:
    """Agent text for a terminal: control characters (escape sequences) shown, not sent."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def summarize(trace: Trace) -> str:
    """The summary of ``trace`` (see the module docstring), as lines of text."""
    header = trace.header
    lines = [
        f"trace of {header.get('role', '?')} {_safe(' '.join(map(str, header.get('agent') or [])))}".rstrip(),
        f"  recorded {header.get('started', '?')} by {header.get('tool', '?')}, schema v{trace.version}; "
        f"{len(trace.events)} events over {trace.end:.3f} s",
    ]
    if trace.truncated:
        lines.append("  the trace reached its size cap: it ends early")
    if trace.bad_lines:
        lines.append(f"  {trace.bad_lines} line(s) that are not trace events were skipped")
    for key, peer in trace.peers.items():
        if key:
            lines.append("")
            lines.append(f"{'check' if any(v.check == key for v in trace.verdicts) else 'connection'} {key}")
        lines.extend(_peer(peer))
    if trace.verdicts:
        lines.append("")
        lines.append("verdicts")
        for verdict in trace.verdicts:
            moments = ", ".join(f"#{eid}" for eid in verdict.refs[:12])
            more = " ..." if len(verdict.refs) > 12 else ""
            lines.append(
                f"  {verdict.result.upper():<5} {verdict.level:<6} {_safe(verdict.rule)} [event #{verdict.eid}; "
                f"moments {moments or 'none'}{more}]"
            )
    # every line once more: what the agent sent reaches a line through many fields
    return "\n".join(_safe(line) for line in lines) + "\n"


def _peer(peer: Peer) -> list[str]:
    lines: list[str] = []
    for turn in peer.turns:
        lines.extend(_turn(turn, peer))
    for marker in peer.markers:
        if marker.kind in (
            "spawn",
            "exit",
            "signal",
            "timeout",
            "connection_end",
            "stray",
            "raw",
            "cancel",
            "rung",
        ):
            lines.append(f"  {marker.t:9.3f} s  {_safe(marker.label)}  [#{marker.eid}]")
    return lines


def _turn(turn: Turn, peer: Peer) -> list[str]:
    finish = turn.finish
    end = f"{finish:.3f} s" if finish is not None else "still running at the end of the trace"
    length = f" ({_ms(finish - turn.t)})" if finish is not None else ""
    said = [f"stopReason {turn.stop_reason}"] if turn.stop_reason else []
    said += [f"error {turn.error}"] if turn.error else []
    said += [] if turn.end is not None or finish is None else ["never answered"]
    said += [f"resolution {turn.resolution}"] if turn.resolution else []
    how = ", ".join(said)
    lines = [
        f"  session {_safe(turn.session)} turn {turn.index}: {_safe(repr(turn.prompt))}",
        f"    {turn.t:.3f} s -> {end}{length}  {_safe(how)}".rstrip(),
        f"    verdict: {_safe(verdict(turn))}",
    ]
    kinds = turn.update_kinds()
    listed = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    after = updates_after_cancel(turn)
    lines.append(
        f"    updates: {len(turn.updates)}"
        + (f" ({_safe(listed)})" if listed else "")
        + (f"; {after} after session/cancel" if after is not None else "")
    )
    if turn.permissions:
        asked = []
        for permission in turn.permissions:
            outcome = permission.outcome or "never answered"
            if permission.option:
                outcome += f" {permission.option}"
            took = f" after {_ms(permission.end - permission.t)}" if permission.end is not None else ""
            withdrawn = " (withdrawn by the agent)" if permission.withdrawn else ""
            asked.append(f"{_safe(permission.title) or 'a tool call'}: {outcome}{took}{withdrawn}")
        lines.append(f"    permissions: {len(turn.permissions)}: " + "; ".join(asked))
    cancel = turn.cancel
    if cancel is not None:
        cause = _cause(peer, cancel)
        line = f"    cancel at {cancel.t:.3f} s ({_safe(cancel.label)}{cause}) [#{cancel.eid}]"
        if finish is not None:
            by = turn.resolved_by or "the agent's answer"
            line += f" -> resolved {turn.resolution or turn.stop_reason} by {by} in {_ms(finish - cancel.t)}"
        else:
            line += " -> never resolved in this trace"
        lines.append(line)
        rungs = ", ".join(f"{m.event.get('rung')} at +{_ms(m.t - cancel.t)}" for m in turn.rungs)
        if rungs:
            lines.append(f"    rungs: {rungs}")
    lines.append(
        f"    late updates after the answer: {len(turn.late)}"
        + (
            f" (first {_ms(turn.late[0].t - turn.end)} after it)"
            if turn.late and turn.end is not None
            else ""
        )
    )
    return lines


def _cause(peer: Peer, cancel: Moment) -> str:
    """What the cancel answered: a signal the command got or its turn timeout, just before."""
    for marker in reversed(peer.markers):
        if marker.t > cancel.t or cancel.t - marker.t > _CAUSE_WINDOW:
            continue
        if marker.kind == "signal" and marker.event.get("to") == "host":
            return f", after {marker.event.get('name')} received"
        if marker.kind == "timeout":
            return f", after the turn timeout of {marker.event.get('after')} s"
    return ""
