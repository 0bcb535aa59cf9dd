"""``acp-driver trace FILE --html OUT``: the timeline page, one self-contained file.

No network, no CDN, no web font: the page is its HTML, an inline stylesheet, an SVG drawn here
and a few lines of script for hovering. Per peer (the agent, a server's connection, an audit's
check) a *process* lane (start, signals sent and received, turn timeout, exit, the connection's
end, stray replies) and a lane per turn, grouped by session:

- the turn as a bar from its prompt to its answer (or its resolution), coloured by resolution;
- above it, the density of its updates over time (bins of a few pixels);
- below it, each permission request as a span from the request to its answer;
- markers: the cancel, ``session/cancel`` and ``$/cancel_request`` sent, each rung taken, the
  resolution, late updates (after the answer); dashed ticks where the rungs were *due*;
- the exit of the agent as a line through its lanes.

Every marker is an element with ``id="e<event id>"``, ``data-e`` and ``data-t`` (its time in
the trace); the SVG carries its scale (``data-x0``: where t = 0 is, ``data-pxs``: pixels per
second), so a test or a reader can map positions back to times. Verdicts of ``check --trace``
are listed with links to the moments that prove them.

What the agent sent is data: every text goes through ``html.escape``; the messages shown on
hover are JSON in a ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped, and
the script puts them on the page with ``textContent`` only.
"""

from __future__ import annotations

import html
import math
from typing import Any

import orjson

from ._model import Moment, Peer, Trace, Turn

LABEL_W = 280
PLOT_W = 1000
RIGHT = 40
AXIS_H = 34
LANE_H = 64
PROC_H = 40
HEAD_H = 26
BIN_PX = 5
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

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; background: #fff; }
h1 { font-size: 17px; margin: 0 0 4px; }
.meta { color: #555; margin-bottom: 10px; }
svg { display: block; background: #fcfcfc; border: 1px solid #ddd; }
.lane-bg { fill: #f4f6f8; }
.lane-label { font-size: 12px; fill: #222; }
.lane-sub { font-size: 11px; fill: #666; }
.peer-head { font-size: 12px; font-weight: 600; fill: #333; }
.axis line { stroke: #bbb; }
.axis text { font-size: 10px; fill: #666; }
.density { fill: #7fa7d9; }
.turn-bar { opacity: 0.85; }
.mark { cursor: pointer; }
.mark:hover, .mark.hl { filter: drop-shadow(0 0 3px #f1c40f); }
.mark.hl line, .mark.hl path { stroke-width: 3; }
.due { stroke: #8e44ad; stroke-dasharray: 3 3; stroke-width: 1; }
.rung-label { font-size: 10px; fill: #6c3483; }
.exit-line { stroke: #555; stroke-dasharray: 6 3; stroke-width: 1.5; }
#tip { position: fixed; display: none; max-width: 640px; max-height: 60vh; overflow: auto; background: #fffef0;
       border: 1px solid #bbb; padding: 6px 8px; font: 11px/1.3 ui-monospace, monospace; white-space: pre-wrap;
       pointer-events: none; box-shadow: 0 2px 6px rgba(0,0,0,.2); }
.verdicts { margin-top: 14px; border-collapse: collapse; }
.verdicts td, .verdicts th { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left; vertical-align: top; }
.pass { color: #27ae60; font-weight: 600; } .fail { color: #c0392b; font-weight: 600; }
.skip { color: #b7950b; font-weight: 600; } .na { color: #888; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; }
"""

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('trace-data').textContent);
  var tip = document.getElementById('tip');
  function show(ev, el) {
    var id = el.getAttribute('data-e');
    var text = el.getAttribute('data-note') || '';
    var shown = data.events[id];
    if (shown !== undefined) { text = (text ? text + '\\n\\n' : '') + shown; }
    tip.textContent = text;
    tip.style.display = 'block';
    move(ev);
  }
  function move(ev) {
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth) { x = Math.max(0, ev.clientX - tip.offsetWidth - 14); }
    if (y + tip.offsetHeight > window.innerHeight) { y = Math.max(0, ev.clientY - tip.offsetHeight - 14); }
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  document.querySelectorAll('[data-e]').forEach(function (el) {
    el.addEventListener('mouseenter', function (ev) { show(ev, el); });
    el.addEventListener('mousemove', move);
    el.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  });
  function highlight() {
    document.querySelectorAll('.hl').forEach(function (el) { el.classList.remove('hl'); });
    var ids = (location.hash || '').replace(/^#/, '').split(',');
    ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.classList.add('hl'); }
    });
    var first = ids.length ? document.getElementById(ids[0]) : null;
    if (first && first.scrollIntoView) { first.scrollIntoView({block: 'center'}); }
  }
  window.addEventListener('hashchange', highlight);
  highlight();
})();
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``</script>``, no
    ``<!--``, whatever the strings hold."""
    data = orjson.dumps(value)
    data = data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return data.decode("utf-8")


class _Page:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.end = max(trace.end, 1e-3)
        self.pxs = PLOT_W / self.end
        self.x0 = LABEL_W
        self.parts: list[str] = []
        self.shown: dict[str, str] = {}
        """Event id -> its JSON, for the hover (only events drawn)."""

    def x(self, t: float) -> float:
        return round(self.x0 + max(0.0, t) * self.pxs, 2)

    def remember(self, eid: int) -> None:
        key = str(eid)
        if key in self.shown:
            return
        event = self.trace.event(eid)
        if event is None:
            return
        text = orjson.dumps(event, option=orjson.OPT_INDENT_2).decode("utf-8")
        if len(text) > MAX_SHOWN:
            text = text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters)"
        self.shown[key] = text

    # ------------------------------------------------------------------ drawing

    def mark(self, moment: Moment, y: float, h: float, shape: str, colour: str, note: str = "") -> None:
        self.remember(moment.eid)
        x = self.x(moment.t)
        attrs = (
            f'class="mark mark-{_e(moment.kind)}" id="e{moment.eid}" data-e="{moment.eid}" '
            f'data-t="{moment.t}" data-kind="{_e(moment.kind)}" data-note="{_e(note or moment.label)}"'
        )
        if shape == "diamond":
            body = (
                f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
                f'<path d="M{x} {y - 5} L{x + 5} {y} L{x} {y + 5} L{x - 5} {y} Z" fill="{colour}" stroke="{colour}"/>'
            )
        elif shape == "triangle":
            body = (
                f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
                f'<path d="M{x - 5} {y - 6} L{x + 5} {y - 6} L{x} {y} Z" fill="{colour}" stroke="{colour}"/>'
            )
        elif shape == "tick":
            body = f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + h}" stroke="{colour}" stroke-width="2"/>'
        else:  # circle
            body = (
                f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + h}" stroke="{colour}" stroke-width="1.5"/>'
                f'<circle cx="{x}" cy="{y + h / 2}" r="4.5" fill="{colour}" stroke="#fff"/>'
            )
        self.parts.append(f"<g {attrs}>{body}</g>")

    def axis(self, height: float) -> None:
        step = _nice_step(self.end)
        self.parts.append('<g class="axis">')
        t = 0.0
        while t <= self.end + 1e-9:
            x = self.x(t)
            self.parts.append(
                f'<line x1="{x}" y1="{AXIS_H - 6}" x2="{x}" y2="{height}" stroke-opacity="0.35"/>'
            )
            self.parts.append(f'<text x="{x}" y="{AXIS_H - 10}" text-anchor="middle">{_e(_fmt_t(t))}</text>')
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
        for marker in peer.markers:
            colour, shape = _PEER_MARKS.get(marker.kind, ("#555", "circle"))
            self.mark(marker, y + 6, PROC_H - 12, shape, colour)
            if marker.kind == "exit":
                exits.append(marker)
        y += PROC_H
        for session, turns in peer.sessions.items():
            for turn in turns:
                self.turn_lane(turn, session, y)
                y += LANE_H
        for marker in exits:
            x = self.x(marker.t)
            self.parts.append(f'<line class="exit-line" x1="{x}" y1="{top}" x2="{x}" y2="{y}"/>')
        return y + 6

    def turn_lane(self, turn: Turn, session: str, y: float) -> None:
        self.parts.append(
            f'<rect class="lane-bg" x="0" y="{y + 2}" width="{LABEL_W + PLOT_W + RIGHT}" height="{LANE_H - 4}" '
            f'fill-opacity="0.6"/>'
        )
        short = session if len(session) <= 22 else session[:21] + "…"
        outcome = turn.resolution or turn.stop_reason or ("error" if turn.error else "running")
        self.remember(turn.eid)
        self.parts.append(
            f'<g class="lane-head" data-e="{turn.eid}" data-note="session/prompt sent">'
            f'<text class="lane-label" x="8" y="{y + 20}">{_e(short)} · turn {turn.index}</text>'
            f'<text class="lane-sub" x="8" y="{y + 36}">{_e(_cut(turn.prompt, 38))}</text>'
            f'<text class="lane-sub" x="8" y="{y + 51}">{_e(outcome)}</text></g>'
        )
        finish = turn.finish if turn.finish is not None else self.trace.end
        colour = RESOLUTION_COLOURS.get(turn.resolution or "", "#95a5a6")
        if turn.resolution is None and turn.stop_reason == "cancelled":
            colour = RESOLUTION_COLOURS["cancelled"]
        elif turn.resolution is None and turn.stop_reason:
            colour = RESOLUTION_COLOURS["completed"]
        x1, x2 = self.x(turn.t), self.x(finish)
        start = Moment(turn.t, turn.eid, "prompt", f"session/prompt sent: {turn.prompt}", {})
        self.remember(turn.eid)
        self.parts.append(
            f'<rect class="turn-bar mark" id="e{turn.eid}" data-e="{turn.eid}" data-t="{turn.t}" data-kind="prompt" '
            f'data-note="{_e(start.label)}" x="{x1}" y="{y + 30}" width="{max(x2 - x1, 1.5)}" height="10" '
            f'fill="{colour}"/>'
        )
        if turn.end_eid is not None and turn.end is not None:
            answer = Moment(turn.end, turn.end_eid, "answer", f"answer: {outcome}", {})
            self.mark(answer, y + 26, 18, "tick", "#222")
        self.density(turn, y + 4, 22)
        for permission in turn.permissions:
            px1 = self.x(permission.t)
            pend = permission.end if permission.end is not None else finish
            fill = PERMISSION_COLOURS.get(permission.outcome or "", "#95a5a6")
            note = (
                f"permission: {permission.title or 'a tool call'} -> {permission.outcome or 'never answered'}"
            )
            self.remember(permission.eid)
            self.parts.append(
                f'<rect class="mark mark-permission" id="e{permission.eid}" data-e="{permission.eid}" '
                f'data-t="{permission.t}" data-kind="permission" data-note="{_e(note)}" x="{px1}" y="{y + 46}" '
                f'width="{max(self.x(pend) - px1, 2)}" height="8" fill="{fill}"/>'
            )
            if permission.end_eid is not None and permission.end is not None:
                self.mark(
                    Moment(permission.end, permission.end_eid, "permission_answer", note, {}),
                    y + 44,
                    12,
                    "tick",
                    fill,
                )
            if permission.withdrawn is not None:
                self.mark(permission.withdrawn, y + 44, 12, "tick", "#6c3483")
        cancel = turn.cancel
        schedule = cancel.event.get("schedule") if cancel is not None else None
        if cancel is not None and isinstance(schedule, dict):
            for rung, offset in schedule.items():
                if isinstance(offset, (int, float)) and offset > 0:
                    xd = self.x(cancel.t + offset)
                    self.parts.append(
                        f'<line class="due" data-rung="{_e(rung)}" data-due="{cancel.t + offset}" '
                        f'x1="{xd}" y1="{y + 6}" x2="{xd}" y2="{y + LANE_H - 6}"/>'
                    )
        for marker in turn.markers:
            colour, shape = _TURN_MARKS.get(marker.kind, ("#555", "circle"))
            self.mark(marker, y + 8, LANE_H - 16, shape, colour)
            if marker.kind == "rung":
                self.parts.append(
                    f'<text class="rung-label" x="{self.x(marker.t) + 4}" y="{y + 12}">'
                    f"{_e(marker.event.get('rung', ''))}</text>"
                )
        for late in turn.late:
            self.mark(late, y + 26, 18, "tick", "#e74c3c")

    def density(self, turn: Turn, y: float, h: float) -> None:
        bins: dict[int, list[Moment]] = {}
        for update in turn.updates:
            bins.setdefault(int((self.x(update.t) - self.x0) // BIN_PX), []).append(update)
        if not bins:
            return
        peak = max(len(b) for b in bins.values())
        for index, updates in sorted(bins.items()):
            height = max(1.5, h * len(updates) / peak)
            first = updates[0]
            self.remember(first.eid)
            kinds = sorted({u.label for u in updates})
            note = f"{len(updates)} update(s): {', '.join(kinds)}; the first:"
            self.parts.append(
                f'<rect class="density" data-e="{first.eid}" data-t="{first.t}" data-n="{len(updates)}" '
                f'data-note="{_e(note)}" x="{self.x0 + index * BIN_PX}" y="{round(y + h - height, 2)}" '
                f'width="{BIN_PX - 1}" height="{round(height, 2)}"/>'
            )

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
        self.axis(height)
        self.parts.extend(lanes)
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
            f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" data-x0="{self.x0}" data-pxs="{self.pxs}" data-end="{trace.end}">'
            + "".join(self.parts)
            + "</svg>"
        )
        if trace.verdicts:
            body.append(self.verdicts())
        data = {"events": self.shown}
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
        for verdict in self.trace.verdicts:
            drawn = [eid for eid in verdict.refs if str(eid) in self.shown]
            links = " ".join(f'<a href="#e{eid}">#{eid}</a>' for eid in drawn[:20])
            every = ",".join(f"e{eid}" for eid in drawn)
            css = {"pass": "pass", "fail": "fail", "skip": "skip"}.get(verdict.result, "na")
            rows.append(
                f'<tr id="v{verdict.eid}"><td class="{css}">{_e(verdict.result.upper())}</td><td>{_e(verdict.level)}</td>'
                f"<td>{_e(verdict.rule)}</td><td>{_e(verdict.evidence)}</td>"
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

_LEGEND = (
    '<div class="legend">'
    + "".join(
        f'<span><i style="background:{colour}"></i>{_e(name)}</span>'
        for name, colour in (
            ("completed", RESOLUTION_COLOURS["completed"]),
            ("cancelled", RESOLUTION_COLOURS["cancelled"]),
            ("killed", RESOLUTION_COLOURS["killed"]),
            ("updates", "#7fa7d9"),
            ("permission answered cancelled", PERMISSION_COLOURS["cancelled"]),
            ("permission granted", PERMISSION_COLOURS["selected"]),
            ("cancel / session/cancel", "#e74c3c"),
            ("ladder rung (dashed: when due)", "#8e44ad"),
            ("late update", "#e74c3c"),
        )
    )
    + "</div>"
)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nice_step(span: float) -> float:
    """An axis step of 1, 2 or 5 times a power of ten: about ten ticks over ``span``."""
    raw = span / 10
    base = 10.0 ** math.floor(math.log10(raw))
    return next(base * f for f in (1, 2, 5, 10) if raw <= base * f * (1 + 1e-9))


def _fmt_t(t: float) -> str:
    return f"{t:.3g} s" if t else "0"


def render_html(trace: Trace) -> str:
    """The timeline page of ``trace`` (see the module docstring)."""
    return _Page(trace).render()
