"""A turn's verdict in words: what happened to it, for someone debugging their first stuck cancel.

One sentence per turn, written once and shown twice: at the top of the turn's lane on the
timeline page and under the turn in ``acp-driver trace``'s summary. It names what ended the turn
and, when it was cancelled, what the agent did after ``session/cancel`` (how many updates it
still sent) and which rung of the ladder ended it, when::

    the agent ignored session/cancel and kept streaming (90 updates); SIGTERM at +4.5 s ended it
    cancelled: the agent stopped 12.3 ms after session/cancel
    completed (end_turn) in 1.31 s, 102 updates

Times of rungs are offsets from the cancel. Pure functions of a ``Turn``.
"""

from __future__ import annotations

from ._model import Moment, Turn

_RUNG_WORDS = {"cancel_request": "$/cancel_request", "terminate": "SIGTERM", "kill": "SIGKILL"}
_RESOLUTION_WORDS = {
    "killed": "the agent was killed",
    "agent_exited": "the agent exited",
    "disconnected": "the connection was lost",
    "error": "it failed",
}


def duration(seconds: float) -> str:
    """``12.3 ms`` under a second, ``1.31 s`` above."""
    return f"{seconds * 1000:.1f} ms" if abs(seconds) < 1 else f"{seconds:.3g} s"


def cancel_anchor(turn: Turn) -> Moment | None:
    """What "after the cancel" counts from: ``session/cancel`` sent, else the host's cancel."""
    for marker in turn.markers:
        if marker.kind == "session_cancel":
            return marker
    return turn.cancel


def updates_after_cancel(turn: Turn) -> int | None:
    """Updates of the turn after ``session/cancel`` went out (None: the turn was not cancelled)."""
    anchor = cancel_anchor(turn)
    if anchor is None:
        return None
    return sum(1 for update in turn.updates if update.eid > anchor.eid)


def verdict(turn: Turn) -> str:
    """The turn's verdict (see the module docstring)."""
    words = _ending(turn)
    if turn.late:
        words += f"; {len(turn.late)} update(s) after its answer (past the fence)"
    return words


def _ending(turn: Turn) -> str:
    finish = turn.finish
    cancel = turn.cancel
    if finish is None:
        if cancel is not None:
            return "cancelled, and still running when the trace ends: the cancel never landed"
        return f"still running when the trace ends ({len(turn.updates)} updates)"
    if cancel is None:
        return _uncancelled(turn, finish)
    after = updates_after_cancel(turn) or 0
    anchor = cancel_anchor(turn) or cancel
    took = duration(finish - anchor.t)
    by = turn.resolved_by
    if by in _RUNG_WORDS:
        rung = next((m for m in turn.rungs if m.event.get("rung") == by), None)
        when = f" at +{duration(rung.t - cancel.t)}" if rung is not None else ""
        kept = f" and kept streaming ({after} updates)" if after else ""
        return f"the agent ignored session/cancel{kept}; {_RUNG_WORDS[by]}{when} ended it"
    if turn.stop_reason == "cancelled":
        sent = f" ({after} update(s) after it)" if after else ""
        return f"cancelled: the agent stopped {took} after session/cancel{sent}"
    kept = f", sent {after} more update(s)" if after else ""
    if turn.error is not None:
        return f"the agent answered the cancel with an error {took} after it{kept}: {turn.error}"
    if turn.stop_reason is not None:
        return f"the agent ignored session/cancel{kept} and ended the turn {turn.stop_reason} {took} after it"
    what = _RESOLUTION_WORDS.get(turn.resolution or "", "it ended without an answer")
    return f"cancelled, never answered{kept}: {what} {took} after the cancel"


def _uncancelled(turn: Turn, finish: float) -> str:
    took = duration(finish - turn.t)
    if turn.error is not None:
        return f"failed after {took}: error {turn.error}"
    if turn.stop_reason is not None:
        return f"completed ({turn.stop_reason}) in {took}, {len(turn.updates)} updates"
    what = _RESOLUTION_WORDS.get(turn.resolution or "", "it ended without an answer")
    return f"never answered: {what} after {took}"
