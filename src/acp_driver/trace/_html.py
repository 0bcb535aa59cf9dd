"""``acp-driver trace FILE --html OUT``: the timeline page, one self-contained file.

No network, no CDN, no web font: the page is its HTML, an inline stylesheet, an SVG drawn here
and a short script (``trace._html_assets``: hover, links to moments, zoom). Per peer (the agent,
a server's connection, an audit's check) a *process* lane (start, signals sent and received,
turn timeout, exit, the connection's end, stray replies) and a lane per turn, grouped by
session:

- at the top of the lane, the turn's verdict in words (``trace._verdict``);
- the turn as a bar from its prompt to its answer (or its resolution), coloured by resolution;
- above it, the density of its updates over time (bins of a few pixels, binned again by the
  script at each zoom level);
- below it, each permission request as a span from the request to its answer, named by its
  title;
- markers: the cancel, ``session/cancel`` and ``$/cancel_request`` sent, each rung taken, the
  resolution, late updates (after the answer; one tick per few pixels, saying how many); dashed ticks where the rungs were *due* (only
  those due before the turn was over); markers closer than a few pixels stack downwards;
- a bracket from ``session/cancel`` to the turn's end, labelled with its milliseconds;
- the exit of the agent as a line through its lanes.

Every marker is an element with ``id="e<event id>"``, ``data-e`` and ``data-t`` (its time in
the trace; a span also ``data-t2``); the SVG carries its scale (``data-x0``: where t = 0 is,
``data-pxs``: pixels per second; after a zoom, ``data-view0``/``data-view1``), so a test or a
reader can map positions back to times. Verdicts of ``check --trace`` are listed with links to
the moments that prove them.

What the agent sent is data: every text goes through ``html.escape``, with bidirectional
controls and other invisible format characters shown as ``\\u202e`` rather than obeyed; the
messages shown on hover are JSON in a ``<script type="application/json">`` with ``<``, ``>``
and ``&`` escaped, and the script puts them on the page with ``textContent`` only.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

import orjson

from ._html_assets import SCRIPT, STYLE
from ._model import Moment, Peer, Trace, Turn
from ._verdict import cancel_anchor, verdict

LABEL_W = 280
PLOT_W = 1000
RIGHT = 40
AXIS_H = 34
VERDICT_H = 18
LANE_H = 94
PROC_H = 40
HEAD_H = 26
BIN_PX = 5
STACK_PX = 12
"""Markers whose heads are closer than this stack (each level 11 px lower)."""
MAX_SHOWN = 4000
"""Characters of a message shown on hover (longer ones are cut, saying so)."""

RESOLUTION_COLOURS = {
    "completed": "#3d8b3d",
    "cancelled": "#2e6fd0",
    "killed": "#c0392b",
    "agent_exited": "#d9822b",
    "error": "#8e2c2c",
    "disconnected": "#7f8c8d",
}
PERMISSION_COLOURS = {"cancelled": "#e67e22", "selected": "#27ae60", "error": "#8e2c2c"}

_INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)
"""Controls and format characters that would act on the page (bidi overrides and isolates,
zero-width marks): shown as ``\\uXXXX``."""


def _visible(text: str) -> str:
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _e(text: Any) -> str:
    return html.escape(_visible(str(text)), quote=True)


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``</script>``, no
    ``<!--``, whatever the strings hold."""
    data = orjson.dumps(value)
    data = data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return data.decode("utf-8")


class _Lane:
    """Where the marker heads of one lane are, per stacking level."""

    def __init__(self) -> None:
        self.levels: list[list[float]] = []

    def level(self, x: float) -> int:
        for index, taken in enumerate(self.levels):
            if all(abs(x - other) >= STACK_PX for other in taken):
                taken.append(x)
                return index
        self.levels.append([x])
        return len(self.levels) - 1


class _Page:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.end = max(trace.end, 1e-3)
        self.pxs = PLOT_W / self.end
        self.x0 = LABEL_W
        self.parts: list[str] = []
        self.shown: dict[str, str] = {}
        """Event id -> its JSON, for the hover (only events drawn)."""
        self.updates: dict[str, list[float]] = {}
        """A turn's event id -> the times of its updates."""

    def x(self, t: float) -> float:
        return round(self.x0 + max(0.0, t) * self.pxs, 2)

    def remember(self, eid: int) -> None:
        key = str(eid)
        if key in self.shown:
            return
        event = self.trace.event(eid)
        if event is None:
            return
        text = _visible(orjson.dumps(event, option=orjson.OPT_INDENT_2).decode("utf-8"))
        if len(text) > MAX_SHOWN:
            text = text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters)"
        self.shown[key] = text

    # ------------------------------------------------------------------ drawing

    def at(self, t: float, body: str, attrs: str = "") -> None:
        """``body`` (drawn around x = 0) placed at time ``t``."""
        self.parts.append(f'<g {attrs} data-t="{t}" transform="translate({self.x(t)} 0)">{body}</g>')

    def span(self, t: float, t2: float, y: float, h: float, attrs: str, minw: float = 0.0) -> None:
        """A rectangle from ``t`` to ``t2``."""
        x1 = self.x(t)
        width = round(max(self.x(t2) - x1, minw), 2)
        self.parts.append(
            f'<rect {attrs} data-t="{t}" data-t2="{t2}" data-minw="{minw}" x="{x1}" y="{y}" '
            f'width="{width}" height="{h}"/>'
        )

    def mark(
        self,
        moment: Moment,
        y: float,
        h: float,
        shape: str,
        colour: str,
        note: str = "",
        lane: _Lane | None = None,
        label: str = "",
    ) -> None:
        self.remember(moment.eid)
        if lane is not None and shape != "tick":
            step: float = 11 * lane.level(self.x(moment.t))
            step = min(step, max(0.0, h - 12))
            y, h = y + step, h - step
        attrs = (
            f'class="mark mark-{_e(moment.kind)}" id="e{moment.eid}" data-e="{moment.eid}" '
            f'data-kind="{_e(moment.kind)}" data-note="{_e(note or moment.label)}"'
        )
        if shape == "diamond":
            body = (
                f'<line x1="0" y1="{y}" x2="0" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
                f'<path d="M0 {y - 5} L5 {y} L0 {y + 5} L-5 {y} Z" fill="{colour}" stroke="{colour}"/>'
            )
        elif shape == "triangle":
            body = (
                f'<line x1="0" y1="{y}" x2="0" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
                f'<path d="M-5 {y - 6} L5 {y - 6} L0 {y} Z" fill="{colour}" stroke="{colour}"/>'
            )
        elif shape == "tick":
            body = f'<line x1="0" y1="{y}" x2="0" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
        else:  # circle
            body = (
                f'<line x1="0" y1="{y}" x2="0" y2="{y + h}" stroke="{colour}" stroke-width="1.5"/>'
                f'<circle cx="0" cy="{y + h / 2}" r="4.5" fill="{colour}" stroke="#fff"/>'
            )
        if label:  # beside the marker, on its left near the plot's right edge
            side = 'x="-7" text-anchor="end"' if self.x(moment.t) > self.x0 + PLOT_W - 70 else 'x="6"'
            body += f'<text class="rung-label" {side} y="{y - 1}">{_e(label)}</text>'
        self.at(moment.t, body, attrs)

    def axis(self, height: float) -> None:
        step = _nice_step(self.end)
        self.parts.append(
            f'<rect class="axis-strip" x="{self.x0}" y="0" width="{PLOT_W}" height="{AXIS_H - 4}"/>'
            '<g class="axis" id="axis-ticks">'
        )
        t = 0.0
        while t <= self.end + 1e-9:
            x = self.x(t)
            self.parts.append(
                f'<line x1="{x}" y1="{AXIS_H - 6}" x2="{x}" y2="{height}" stroke-opacity="0.35"/>'
            )
            self.parts.append(
                f'<text x="{x}" y="{AXIS_H - 10}" text-anchor="middle">{_e(_fmt_t(t, step))}</text>'
            )
            t = round(t + step, 9)
        self.parts.append("</g>")

    def peer_lanes(self, peer: Peer, y: float) -> float:
        label = (
            f"{'check' if any(v.check == peer.key for v in self.trace.verdicts) else 'connection'} {peer.key}"
        )
        if peer.key:
            self.parts.append(f'<text class="peer-head" x="8" y="{y + 17}">{_e(label)}</text>')
            y += HEAD_H
        top = y
        self.parts.append(
            f'<rect class="lane-bg" x="0" y="{y + 2}" width="{LABEL_W + PLOT_W + RIGHT}" height="{PROC_H - 4}"/>'
        )
        self.parts.append(f'<text class="lane-label" x="8" y="{y + 24}">agent process / connection</text>')
        exits: list[Moment] = []
        lane = _Lane()
        self.parts.append('<g class="plot" clip-path="url(#plot-clip)">')
        # a peer's replies to nothing and lines that are not JSON may be many: one tick per bin
        many = [m for m in peer.markers if m.kind in _BINNED]
        for marker, count in self.binned(many):
            colour, _shape = _PEER_MARKS[marker.kind]
            note = marker.label if count == 1 else f"{count} of these; the first: {marker.label}"
            self.mark(marker, y + 6, PROC_H - 12, "tick", colour, note=note)
        for marker in (m for m in peer.markers if m.kind not in _BINNED):
            colour, shape = _PEER_MARKS.get(marker.kind, ("#555", "circle"))
            self.mark(marker, y + 6, PROC_H - 12, shape, colour, lane=lane)
            if marker.kind == "exit":
                exits.append(marker)
        self.parts.append("</g>")
        y += PROC_H
        for session, turns in peer.sessions.items():
            for turn in turns:
                self.turn_lane(turn, session, y)
                y += LANE_H
        self.parts.append('<g class="plot" clip-path="url(#plot-clip)">')
        for marker in exits:
            self.at(marker.t, f'<line class="exit-line" x1="0" y1="{top}" x2="0" y2="{y}"/>')
        self.parts.append("</g>")
        return y + 6

    def turn_lane(self, turn: Turn, session: str, y: float) -> None:
        self.parts.append(
            f'<rect class="lane-bg" x="0" y="{y + 2}" width="{LABEL_W + PLOT_W + RIGHT}" height="{LANE_H - 4}" '
            f'fill-opacity="0.6"/>'
        )
        words = verdict(turn)
        self.parts.append(
            f'<text class="verdict" x="8" y="{y + 15}" data-verdict="{_e(words)}">'
            f"{_e(_cut(words, 190))}</text>"
        )
        y += VERDICT_H
        short = session if len(session) <= 22 else session[:21] + "…"
        outcome = turn.resolution or turn.stop_reason or ("error" if turn.error else "running")
        self.remember(turn.eid)
        self.parts.append(
            f'<g class="lane-head" data-e="{turn.eid}" data-note="session/prompt sent">'
            f'<text class="lane-label" x="8" y="{y + 20}">{_e(short)} · turn {turn.index}</text>'
            f'<text class="lane-sub" x="8" y="{y + 36}">{_e(_cut(turn.prompt, 38))}</text>'
            f'<text class="lane-sub" x="8" y="{y + 51}">{_e(outcome)}</text></g>'
        )
        self.parts.append('<g class="plot" clip-path="url(#plot-clip)">')
        finish = turn.finish if turn.finish is not None else self.trace.end
        colour = RESOLUTION_COLOURS.get(turn.resolution or "", "#95a5a6")
        if turn.resolution is None and turn.stop_reason == "cancelled":
            colour = RESOLUTION_COLOURS["cancelled"]
        elif turn.resolution is None and turn.stop_reason:
            colour = RESOLUTION_COLOURS["completed"]
        self.span(
            turn.t,
            finish,
            y + 30,
            10,
            f'class="turn-bar mark" id="e{turn.eid}" data-e="{turn.eid}" data-kind="prompt" '
            f'data-note="{_e("session/prompt sent: " + turn.prompt)}" fill="{colour}"',
            minw=1.5,
        )
        lane = _Lane()
        if turn.end_eid is not None and turn.end is not None:
            answer = Moment(turn.end, turn.end_eid, "answer", f"answer: {outcome}", {})
            self.mark(answer, y + 26, 18, "tick", "#222")
        self.density(turn, y + 4, 22)
        for permission in turn.permissions:
            pend = permission.end if permission.end is not None else finish
            fill = PERMISSION_COLOURS.get(permission.outcome or "", "#95a5a6")
            note = (
                f"permission: {permission.title or 'a tool call'} -> {permission.outcome or 'never answered'}"
            )
            self.remember(permission.eid)
            self.span(
                permission.t,
                pend,
                y + 46,
                8,
                f'class="mark mark-permission" id="e{permission.eid}" data-e="{permission.eid}" '
                f'data-kind="permission" data-note="{_e(note)}" fill="{fill}"',
                minw=2,
            )
            if permission.end_eid is not None and permission.end is not None:
                answered = Moment(permission.end, permission.end_eid, "permission_answer", note, {})
                self.mark(answered, y + 44, 12, "tick", fill)
            if permission.withdrawn is not None:
                self.mark(permission.withdrawn, y + 44, 12, "tick", "#6c3483")
        cancel = turn.cancel
        schedule = cancel.event.get("schedule") if cancel is not None else None
        if cancel is not None and isinstance(schedule, dict):
            for rung, offset in schedule.items():
                due = cancel.t + offset if isinstance(offset, (int, float)) else None
                if due is not None and offset > 0 and due <= finish:  # none after the turn was over
                    self.at(
                        due,
                        f'<line class="due" x1="0" y1="{y + 6}" x2="0" y2="{y + LANE_H - VERDICT_H - 18}"/>',
                        f'class="due-at" data-rung="{_e(rung)}" data-due="{due}"',
                    )
        # lines first: the heads (diamonds, triangles, circles) are drawn over them
        for marker in sorted(turn.markers, key=lambda m: _TURN_MARKS.get(m.kind, ("", ""))[1] != "tick"):
            colour, shape = _TURN_MARKS.get(marker.kind, ("#555", "circle"))
            label = str(marker.event.get("rung", "")) if marker.kind == "rung" else ""
            self.mark(marker, y + 8, 48, shape, colour, lane=lane, label=label)
        for late, count in self.binned(turn.late):
            note = late.label if count == 1 else f"{count} late updates; the first: {late.label}"
            self.mark(late, y + 26, 18, "tick", "#e74c3c", note=note)
        anchor = cancel_anchor(turn)
        if anchor is not None and turn.finish is not None:
            self.bracket(
                anchor.t, turn.finish, y + 62, f"cancel → end: {(turn.finish - anchor.t) * 1000:.1f} ms"
            )
        self.parts.append("</g>")

    def bracket(self, t: float, t2: float, y: float, words: str) -> None:
        """A bracket from ``t`` to ``t2`` on line ``y``, labelled under its middle."""
        ms = round((t2 - t) * 1000, 1)
        self.parts.append(f'<g class="bracket" data-ms="{ms}" data-from="{t}" data-to="{t2}">')
        self.span(t, t2, y - 0.75, 1.5, 'class="bracket-line"', minw=1)
        for end in (t, t2):
            self.at(end, f'<line x1="0" y1="{y - 4}" x2="0" y2="{y + 4}" stroke-width="1.5"/>')
        self.at((t + t2) / 2, f'<text x="0" y="{y + 12}" text-anchor="middle">{_e(words)}</text>')
        self.parts.append("</g>")

    def binned(self, moments: list[Moment]) -> list[tuple[Moment, int]]:
        """The first moment of each bin of ``BIN_PX`` pixels, and how many the bin holds: a
        hundred thousand late updates are a few hundred ticks, not a page the browser chokes on."""
        bins: dict[int, list[Moment]] = {}
        for moment in moments:
            bins.setdefault(int((self.x(moment.t) - self.x0) // BIN_PX), []).append(moment)
        return [(found[0], len(found)) for _index, found in sorted(bins.items())]

    def density(self, turn: Turn, y: float, h: float) -> None:
        bins: dict[int, list[Moment]] = {}
        for update in turn.updates:
            bins.setdefault(int((self.x(update.t) - self.x0) // BIN_PX), []).append(update)
        if not bins:
            return
        # the updates' times, for the script to bin them again at each zoom level
        self.updates[str(turn.eid)] = [round(u.t, 6) for u in turn.updates]
        self.parts.append(f'<g class="density-lane" data-turn="{turn.eid}" data-y="{y}" data-h="{h}">')
        peak = max(len(b) for b in bins.values())
        for index, updates in sorted(bins.items()):
            height = max(1.5, h * len(updates) / peak)
            first = updates[0]
            self.remember(first.eid)
            kinds = sorted({u.label for u in updates})
            note = f"{len(updates)} update(s): {', '.join(kinds)}; the first:"
            t0 = index * BIN_PX / self.pxs
            self.span(
                t0,
                t0 + (BIN_PX - 1) / self.pxs,
                round(y + h - height, 2),
                round(height, 2),
                f'class="density" data-e="{first.eid}" data-first="{first.t}" data-n="{len(updates)}" '
                f'data-note="{_e(note)}"',
            )
        self.parts.append("</g>")

    # ------------------------------------------------------------------ the page

    def render(self) -> str:
        trace = self.trace
        body: list[str] = []
        y: float = AXIS_H + 4
        lanes_start = len(self.parts)
        for peer in trace.peers.values():
            y = self.peer_lanes(peer, y)
        height = y + 10
        lanes = self.parts[lanes_start:]
        self.parts = self.parts[:lanes_start]
        self.parts.append(
            f'<defs><clipPath id="plot-clip"><rect x="{self.x0 - 8}" y="0" width="{PLOT_W + RIGHT}" '
            f'height="{height}"/></clipPath></defs>'
        )
        self.axis(height)
        self.parts.extend(lanes)
        self.parts.append(f'<rect id="brush" x="{self.x0}" y="0" width="0" height="{height}"/>')
        width = LABEL_W + PLOT_W + RIGHT
        header = trace.header
        agent = " ".join(map(str, header.get("agent") or []))
        body.append(f"<h1>acp-driver trace: {_e(agent or header.get('role', ''))}</h1>")
        body.append(
            f'<div class="meta">recorded {_e(header.get("started", "?"))} by {_e(header.get("tool", "?"))}, '
            f"schema v{_e(trace.version)}, role {_e(header.get('role', '?'))}; {len(trace.events)} events over "
            f"{trace.end:.3f} s" + ("; <b>cut at its size cap</b>" if trace.truncated else "") + "</div>"
        )
        body.append(_LEGEND)
        body.append(
            '<div class="help">Zoom: drag across the timeline, or the wheel over the time axis (Ctrl+wheel '
            "anywhere); double-click for the whole trace. Hover anything for its message.</div>"
        )
        body.append(
            f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" data-x0="{self.x0}" data-pxs="{self.pxs}" data-end="{self.end}" '
            f'data-plotw="{PLOT_W}" data-axish="{AXIS_H}">' + "".join(self.parts) + "</svg>"
        )
        if trace.verdicts:
            body.append(self.verdicts())
        data = {"events": self.shown, "updates": self.updates}
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>acp-driver trace</title><style>{STYLE}</style></head><body>"
            + "".join(body)
            + '<div id="tip"></div>'
            + f'<script type="application/json" id="trace-data">{_json_for_script(data)}</script>'
            + f"<script>{SCRIPT}</script></body></html>\n"
        )

    def verdicts(self) -> str:
        rows = []
        for verdict_ in self.trace.verdicts:
            drawn = [eid for eid in verdict_.refs if str(eid) in self.shown]
            links = " ".join(f'<a href="#e{eid}">#{eid}</a>' for eid in drawn[:20])
            every = ",".join(f"e{eid}" for eid in drawn)
            css = {"pass": "pass", "fail": "fail", "skip": "skip"}.get(verdict_.result, "na")
            rows.append(
                f'<tr id="v{verdict_.eid}"><td class="{css}">{_e(verdict_.result.upper())}</td>'
                f"<td>{_e(verdict_.level)}</td><td>{_e(verdict_.rule)}</td><td>{_e(verdict_.evidence)}</td>"
                f'<td><a href="#{_e(every)}">all</a> {links}</td></tr>'
            )
        return (
            '<table class="verdicts"><tr><th>result</th><th>level</th><th>rule</th><th>evidence</th>'
            "<th>moments on the timeline</th></tr>" + "".join(rows) + "</table>"
        )


_TURN_MARKS = {
    "cancel": ("#c0392b", "diamond"),
    "session_cancel": ("#e74c3c", "tick"),
    "cancel_request": ("#e74c3c", "tick"),
    "rung": ("#8e44ad", "triangle"),
    "resolved": ("#222", "circle"),
}
_PEER_MARKS = {
    "spawn": ("#3d8b3d", "circle"),
    "exit": ("#222", "diamond"),
    "signal": ("#c0392b", "triangle"),
    "timeout": ("#d35400", "diamond"),
    "connection_end": ("#7f8c8d", "circle"),
    "cancel": ("#c0392b", "diamond"),
    "rung": ("#8e44ad", "triangle"),
    "stray": ("#e67e22", "tick"),
    "raw": ("#e67e22", "tick"),
}


def _icon(shape: str, colour: str) -> str:
    """A legend's sample of a shape, as drawn on the timeline."""
    inner = {
        "bar": f'<rect x="1" y="4" width="20" height="7" fill="{colour}"/>',
        "density": f'<rect x="2" y="6" width="3" height="8" fill="{colour}"/><rect x="7" y="2" width="3" '
        f'height="12" fill="{colour}"/><rect x="12" y="8" width="3" height="6" fill="{colour}"/>',
        "diamond": f'<line x1="11" y1="7" x2="11" y2="15" stroke="{colour}" stroke-width="2"/>'
        f'<path d="M11 2 L16 7 L11 12 L6 7 Z" fill="{colour}"/>',
        "triangle": f'<line x1="11" y1="7" x2="11" y2="15" stroke="{colour}" stroke-width="2"/>'
        f'<path d="M6 1 L16 1 L11 7 Z" fill="{colour}"/>',
        "tick": f'<line x1="11" y1="1" x2="11" y2="15" stroke="{colour}" stroke-width="2"/>',
        "circle": f'<line x1="11" y1="1" x2="11" y2="15" stroke="{colour}" stroke-width="1.5"/>'
        f'<circle cx="11" cy="8" r="4.5" fill="{colour}" stroke="#fff"/>',
        "dashed": f'<line x1="11" y1="1" x2="11" y2="15" stroke="{colour}" stroke-dasharray="3 2"/>',
        "bracket": f'<line x1="2" y1="8" x2="20" y2="8" stroke="{colour}" stroke-width="1.5"/><line x1="2" '
        f'y1="4" x2="2" y2="12" stroke="{colour}"/><line x1="20" y1="4" x2="20" y2="12" stroke="{colour}"/>',
    }[shape]
    return f'<svg width="22" height="16" viewBox="0 0 22 16" aria-hidden="true">{inner}</svg>'


_BINNED = frozenset({"stray", "raw"})
"""Peer markers drawn as ticks, one per bin (``_Page.binned``)."""

_LEGEND_ITEMS = (
    ("bar", RESOLUTION_COLOURS["completed"], "turn, prompt to answer: completed"),
    ("bar", RESOLUTION_COLOURS["cancelled"], "cancelled"),
    ("bar", RESOLUTION_COLOURS["killed"], "killed"),
    ("bar", RESOLUTION_COLOURS["agent_exited"], "agent exited"),
    ("density", "#7fa7d9", "updates (height: how many)"),
    ("bar", PERMISSION_COLOURS["selected"], "permission request, answered with an option"),
    ("bar", PERMISSION_COLOURS["cancelled"], "answered cancelled"),
    ("tick", "#222", "the prompt's answer"),
    ("diamond", "#c0392b", "the host's cancel"),
    ("tick", "#e74c3c", "session/cancel or $/cancel_request sent"),
    ("triangle", "#8e44ad", "ladder rung taken"),
    ("dashed", "#8e44ad", "when a rung was due"),
    ("circle", "#222", "turn resolved"),
    ("bracket", "#c0392b", "cancel to the turn's end (ms)"),
    ("tick", "#e74c3c", "late update (after the answer)"),
    ("circle", "#3d8b3d", "agent started"),
    ("triangle", "#c0392b", "signal"),
    ("diamond", "#d35400", "turn timeout"),
    ("diamond", "#222", "agent exited"),
    ("dashed", "#555", "exit, through its lanes"),
    ("circle", "#7f8c8d", "connection ended"),
)

_LEGEND = (
    '<div class="legend">'
    + "".join(f"<span>{_icon(shape, colour)}{_e(words)}</span>" for shape, colour, words in _LEGEND_ITEMS)
    + "</div>"
)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nice_step(span: float) -> float:
    """An axis step of 1, 2 or 5 times a power of ten: about ten ticks over ``span``."""
    raw = span / 10
    base = 10.0 ** math.floor(math.log10(raw))
    return next(base * f for f in (1, 2, 5, 10) if raw <= base * f * (1 + 1e-9))


def _fmt_t(t: float, step: float) -> str:
    """An axis label: milliseconds once ticks are under 100 ms apart."""
    if not t:
        return "0"
    if step < 0.1:
        digits = max(0, -math.floor(math.log10(step * 1000)))
        return f"{t * 1000:.{digits}f} ms"
    return f"{t:.6g} s"


def render_html(trace: Trace) -> str:
    """The timeline page of ``trace`` (see the module docstring)."""
    return _Page(trace).render()
