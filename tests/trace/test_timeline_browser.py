"""The timeline page in a real headless Chromium (distribution package, driven over CDP).

The trace comes from real processes (``scenario.py``); the page from the CLI
(``acp-driver trace FILE --html OUT``). The browser must render it without a console error, an
exception or a network request, never run what the agent wrote, place every marker where the
trace's timestamps say (read from the DOM and, for the ladder's rungs and the agent's exit, from
the pixels of a screenshot), show a message on hover, zoom the time axis (a brush, the wheel, a
double click back) with every marker moved to its time, stack markers of one moment instead of
covering one with another, and show the legend's shapes and each turn's verdict. The screenshot is kept for inspection
(``ACP_TRACE_ARTIFACTS=DIR`` copies it there).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from .browser import Browser, chromium_or_skip, decode_png, pixel
from .scenario import record

WIDTH = 1400

POSITIONS = """
(() => {
  const svg = document.getElementById('timeline');
  const box = svg.getBoundingClientRect();
  const marks = [...document.querySelectorAll('#timeline .mark')].map(el => {
    const line = el.querySelector('line');
    const r = (line || el).getBoundingClientRect();
    const x = line ? r.left + r.width / 2 : r.left;
    return {id: el.id, kind: el.getAttribute('data-kind'), x: x - box.left, y: r.top + r.height / 2,
            top: r.top, bottom: r.bottom};
  });
  return {x0: +svg.dataset.x0, pxs: +svg.dataset.pxs, left: box.left, top: box.top,
          height: document.documentElement.scrollHeight, marks: marks,
          pwned: window.__pwned === undefined ? null : window.__pwned,
          text: document.body.innerText};
})()
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(trace, page) recorded and drawn once for the module's tests."""
    folder = tmp_path_factory.mktemp("timeline")
    trace = folder / "scenario.ndjson"
    asyncio.run(record(trace))
    html = folder / "timeline.html"
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "acp_driver", "trace", str(trace), "--html", str(html)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return trace, html


def times(trace: Path) -> dict[int, dict[str, Any]]:
    """Every event of the trace file by id, read here, independently of the page's code."""
    return {e["id"]: e for e in (orjson.loads(line) for line in trace.read_bytes().splitlines())}


async def opened(html: Path) -> tuple[Browser, dict[str, Any]]:
    browser = await Browser.start(chromium_or_skip())
    try:
        await browser.open(html, WIDTH, 900)
        found = await browser.evaluate(POSITIONS)
        await browser.open(html, WIDTH, int(found["height"]) + 20)  # the whole page in the viewport
        found = await browser.evaluate(POSITIONS)
    except BaseException:
        await browser.close()
        raise
    return browser, found


async def test_the_page_renders_without_errors_network_or_agent_code(page: tuple[Path, Path]) -> None:
    _trace, html = page
    browser, found = await opened(html)
    try:
        assert browser.console_errors == []
        assert all(url.startswith("file://") for url in browser.requests), browser.requests
        assert found["pwned"] is None  # the agent's <script> and onerror never ran
        assert "hello </script><script>window" in found["text"]  # the lane label: shown as text
        kinds = {m["kind"] for m in found["marks"]}
        assert {"prompt", "cancel", "rung", "resolved", "permission", "signal", "exit", "spawn"} <= kinds
    finally:
        await browser.close()


async def test_every_marker_is_where_the_trace_says(page: tuple[Path, Path]) -> None:
    trace, html = page
    events = times(trace)
    browser, found = await opened(html)
    try:
        x0, pxs = found["x0"], found["pxs"]
        checked = 0
        for mark in found["marks"]:
            eid = int(mark["id"].removeprefix("e"))
            expected = x0 + events[eid]["t"] * pxs
            assert abs(mark["x"] - expected) <= 1.5, (mark, events[eid])
            checked += 1
        assert checked >= 20
        # the ladder of turn 3, in order, at the offsets it was taken
        rungs = sorted(
            (m["x"], events[int(m["id"][1:])]["rung"]) for m in found["marks"] if m["kind"] == "rung"
        )
        assert [r for _x, r in rungs][-3:] == ["session_cancel", "cancel_request", "terminate"]
        assert rungs[-1][0] - rungs[-2][0] == pytest.approx(
            (events_of(events, "rung")[-1]["t"] - events_of(events, "rung")[-2]["t"]) * pxs, abs=1.5
        )
        # the screenshot: each rung's purple triangle is centred on the trace's time for it, and
        # the agent's exit (a dashed line through its lanes) is drawn at the exit's time
        png = await browser.screenshot()
        shot = decode_png(png)
        artifact = trace.parent / "timeline.png"
        artifact.write_bytes(png)
        keep = os.environ.get("ACP_TRACE_ARTIFACTS")
        if keep:
            shutil.copy(artifact, Path(keep) / "timeline.png")
        print(f"screenshot: {artifact}")
        for mark in (m for m in found["marks"] if m["kind"] == "rung"):
            expected = found["left"] + x0 + events[int(mark["id"][1:])]["t"] * pxs
            row = round(mark["top"]) - 5  # across the triangle, above the rung's line
            run = _run(shot, round(expected), row, (0x8E, 0x44, 0xAD))
            assert run, (mark, expected, row)
            centre = (run[0] + run[-1] + 1) / 2  # column c covers [c, c + 1)
            assert abs(centre - expected) <= 1.5, (mark, expected, run)
        (exit_event,) = events_of(events, "exit")
        column = round(found["left"] + x0 + exit_event["t"] * pxs)
        first_turn = next(m for m in found["marks"] if m["kind"] == "prompt")
        rows = range(round(first_turn["top"]) - 20, round(first_turn["top"]) + 20)
        dark = [
            y
            for y in rows
            if any(_close(pixel(shot, x, y), (0x55, 0x55, 0x55)) for x in (column - 1, column, column + 1))
        ]
        assert len(dark) >= 10, (column, dark)
    finally:
        await browser.close()


def events_of(events: dict[int, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for _i, e in sorted(events.items()) if e["kind"] == kind]


def _run(shot: tuple[int, int, list[bytes], int], x: int, y: int, colour: tuple[int, int, int]) -> list[int]:
    """The columns of the run of ``colour`` on row ``y`` that holds, or is next to, column ``x``."""
    start = next((c for c in (x, x - 1, x + 1, x - 2, x + 2) if _close(pixel(shot, c, y), colour)), None)
    if start is None:
        return []
    left = right = start
    while _close(pixel(shot, left - 1, y), colour):
        left -= 1
    while _close(pixel(shot, right + 1, y), colour):
        right += 1
    return list(range(left, right + 1))


def _close(found: tuple[int, int, int], wanted: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 40 for a, b in zip(found, wanted, strict=True))


async def test_hovering_a_marker_shows_its_message(page: tuple[Path, Path]) -> None:
    trace, html = page
    browser, found = await opened(html)
    try:
        tip = (
            "({shown: getComputedStyle(document.getElementById('tip')).display, "
            "text: document.getElementById('tip').textContent})"
        )
        # the cancel's diamond, left of the lines drawn at the same moment
        cancel = [m for m in found["marks"] if m["kind"] == "cancel"][-1]
        await browser.hover(found["left"] + cancel["x"] - 3, cancel["top"])
        shown = await browser.evaluate(tip)
        assert shown["shown"] == "block"
        assert '"kind": "cancel"' in shown["text"]
        assert '"scope": "current_turn"' in shown["text"]
        # a rung's triangle (the $/cancel_request it sent is a line drawn below it)
        rung = next(m for m in found["marks"] if m["id"] == f"e{events_of(times(trace), 'rung')[2]['id']}")
        await browser.hover(found["left"] + rung["x"], rung["top"] - 3)
        shown = await browser.evaluate(tip)
        assert '"rung": "cancel_request"' in shown["text"]
        # a density bin of the first turn (a point of it no marker line covers): the agent's
        # text, shown as text
        first = await browser.evaluate(
            "(() => { const bins = [...document.querySelectorAll('rect.density')]"
            ".sort((a, b) => +a.dataset.t - +b.dataset.t);"
            " for (const r of bins) { const b = r.getBoundingClientRect();"
            "  for (let x = b.left + 0.5; x < b.right; x += 0.5) for (let y = b.top + 0.5; y < b.bottom; y += 1)"
            "   if (document.elementFromPoint(x, y) === r) return {x: x, y: y, t: +r.dataset.t}; }"
            " return null; })()"
        )
        assert first is not None, "every density bin is covered by markers"
        await browser.hover(first["x"], first["y"])
        text = await browser.evaluate("document.getElementById('tip').textContent")
        assert "update(s): agent_message_chunk" in text
        assert '"sessionUpdate": "agent_message_chunk"' in text
        # the first turn's label: its prompt message, markup shown as text, never run
        label = await browser.evaluate(
            "(() => { const b = document.querySelector('.lane-head').getBoundingClientRect();"
            " return {x: b.left + 10, y: b.top + b.height / 2}; })()"
        )
        await browser.hover(label["x"], label["y"])
        text = await browser.evaluate("document.getElementById('tip').textContent")
        assert '"method": "session/prompt"' in text
        assert "</script><script>window.__pwned = 1</script> <img src=x onerror=" in text
        assert await browser.evaluate("window.__pwned === undefined")
        assert browser.console_errors == []
    finally:
        await browser.close()


FRAMES = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"

VIEW = """
(() => {
  const svg = document.getElementById('timeline');
  const box = svg.getBoundingClientRect();
  return {view0: +(svg.dataset.view0 || 0), view1: +(svg.dataset.view1 || svg.dataset.end),
          pxs: +svg.dataset.pxs, left: box.left, top: box.top,
          ticks: [...document.querySelectorAll('#axis-ticks text')].map(t => t.textContent),
          marks: [...document.querySelectorAll('#timeline .mark')].filter(el => el.querySelector('line')).map(el => {
            const r = el.querySelector('line').getBoundingClientRect();
            return {id: el.id, x: r.left + r.width / 2 - box.left};
          })};
})()
"""


async def settle(browser: Browser) -> dict[str, Any]:
    await browser.send("Runtime.evaluate", {"expression": FRAMES, "awaitPromise": True})
    found: dict[str, Any] = await browser.evaluate(VIEW)
    return found


def assert_placed(found: dict[str, Any], events: dict[int, dict[str, Any]], x0: float) -> int:
    """Every marker in view is at x0 + (t - view0) * pxs: the zoom moved each one."""
    placed = 0
    for mark in found["marks"]:
        t = events[int(mark["id"][1:])]["t"]
        if found["view0"] <= t <= found["view1"]:
            assert abs(mark["x"] - (x0 + (t - found["view0"]) * found["pxs"])) <= 1.5, (
                mark,
                t,
                found["view0"],
            )
            placed += 1
    return placed


async def test_the_time_axis_zooms_by_brush_and_wheel_down_to_milliseconds(page: tuple[Path, Path]) -> None:
    trace, html = page
    events = times(trace)
    browser, found = await opened(html)
    try:
        x0, top = found["x0"], found["top"]
        cancel = [m for m in found["marks"] if m["kind"] == "cancel"][-1]
        t_cancel = events[int(cancel["id"][1:])]["t"]
        # a brush across 40 px around the last cancel: the view is what it spans
        a, b = x0 + t_cancel * found["pxs"] - 20, x0 + t_cancel * found["pxs"] + 20
        y = top + 60
        await browser.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": found["left"] + a, "y": y, "button": "left", "clickCount": 1})  # fmt: skip
        await browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": found["left"] + b, "y": y, "button": "left"})  # fmt: skip
        await browser.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": found["left"] + b, "y": y, "button": "left", "clickCount": 1})  # fmt: skip
        zoomed = await settle(browser)
        assert zoomed["view0"] == pytest.approx((a - x0) / found["pxs"], abs=2 / found["pxs"])
        assert zoomed["view1"] == pytest.approx((b - x0) / found["pxs"], abs=2 / found["pxs"])
        assert zoomed["pxs"] == pytest.approx(1000 / (zoomed["view1"] - zoomed["view0"]))
        assert assert_placed(zoomed, events, x0) >= 1
        assert zoomed["ticks"]
        assert all(tick.endswith(" ms") for tick in zoomed["ticks"]), zoomed["ticks"]  # ~100 ms shown
        # the updates' density, binned again for the view from the updates' own times
        bins = await browser.evaluate(
            "[...document.querySelectorAll('.density-lane rect')].map(r => ({x: +r.getAttribute('x'),"
            " n: +r.dataset.n}))"
        )
        updates = [
            e["t"]
            for e in events.values()
            if e["kind"] == "wire" and e["dir"] == "in" and e["msg"].get("method") == "session/update"
        ]
        inside = [t for t in updates if zoomed["view0"] <= t <= zoomed["view1"]]
        assert inside
        assert sum(b["n"] for b in bins) >= len(inside)
        for found_bin in bins:  # each bin holds an update of the file
            assert any(
                abs(x0 + (t - zoomed["view0"]) * zoomed["pxs"] - found_bin["x"] - 2.5) <= 3 for t in updates
            )
        # the wheel over the time axis zooms in around the pointer: the time under it stays put
        at = x0 + 300
        t_at = zoomed["view0"] + 300 / zoomed["pxs"]
        await browser.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": found["left"] + at, "y": top + 10, "deltaX": 0, "deltaY": -100})  # fmt: skip
        wheeled = await settle(browser)
        assert wheeled["view1"] - wheeled["view0"] == pytest.approx((zoomed["view1"] - zoomed["view0"]) / 1.5)
        assert wheeled["view0"] + 300 / wheeled["pxs"] == pytest.approx(t_at)
        assert_placed(wheeled, events, x0)
        # a double click: the whole trace again, in seconds
        await browser.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": found["left"] + x0 + 5, "y": y, "button": "left", "clickCount": 2})  # fmt: skip
        await browser.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": found["left"] + x0 + 5, "y": y, "button": "left", "clickCount": 2})  # fmt: skip
        whole = await settle(browser)
        assert (whole["view0"], whole["pxs"]) == (0, pytest.approx(found["pxs"]))
        assert any(tick.endswith(" s") for tick in whole["ticks"])
        assert assert_placed(whole, events, x0) >= 15
        assert browser.console_errors == []
    finally:
        await browser.close()


async def test_markers_at_the_same_moment_stack_and_the_legend_shows_each_shape(
    page: tuple[Path, Path],
) -> None:
    _trace, html = page
    browser, _found = await opened(html)
    try:
        heads = await browser.evaluate(
            "[...document.querySelectorAll('#timeline .mark')].flatMap(el => [...el.querySelectorAll('path, circle')]"
            ".map(h => { const r = h.getBoundingClientRect();"
            " return {id: el.id, kind: el.dataset.kind, l: r.left, r: r.right, t: r.top, b: r.bottom}; }))"
        )
        assert len(heads) >= 8
        for i, one in enumerate(heads):  # no marker's head covers another's
            for other in heads[i + 1 :]:
                overlap_x = min(one["r"], other["r"]) - max(one["l"], other["l"])
                overlap_y = min(one["b"], other["b"]) - max(one["t"], other["t"])
                assert overlap_x <= 0.5 or overlap_y <= 0.5, (one, other)
        legend = await browser.evaluate(
            "[...document.querySelectorAll('.legend span')].map(s => ({text: s.textContent,"
            " shapes: [...s.querySelectorAll('svg *')].map(e => e.tagName)}))"
        )
        words = {item["text"]: item["shapes"] for item in legend}
        assert "path" in words["the host's cancel"]  # a diamond
        assert "path" in words["ladder rung taken"]  # a triangle
        assert "circle" in words["turn resolved"]
        assert words["when a rung was due"] == ["line"]
        assert "rect" in words["killed"]
        verdicts = await browser.evaluate(
            "[...document.querySelectorAll('text.verdict')].map(t => t.textContent)"
        )
        assert len(verdicts) == 3
        assert verdicts[2].startswith("the agent ignored session/cancel and kept streaming (")
    finally:
        await browser.close()
