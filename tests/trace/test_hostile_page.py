"""Hostile text in every field of a trace stays text: on the page, in the summary, in the export.

The trace is a real recording (``scenario.py``) in which every string value -- session ids,
prompts, agent text, permission titles, stop reasons, rung names, resolutions, error messages,
the agent's command line, a check's name and its verdict -- gets markup, script, a
``javascript:`` URL and bidirectional overrides appended (the same text everywhere, so the
recording's relations hold). Headless Chromium loads its page: no script of it runs, no element
of it exists, nothing is fetched, no override reorders the page, and the text is there to read.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from .browser import Browser, chromium_or_skip
from .scenario import record

PAYLOAD = (
    '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    '<a href="javascript:window.__pwned=3">link</a><svg onload="window.__pwned=4"></svg>'
    '<iframe src="javascript:parent.__pwned=5"></iframe>\u202e\u2067evil\u2069\u200f'
)
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
STRUCTURE = frozenset({"kind", "dir", "method", "jsonrpc", "role"})
"""Keys that say what a line is: kept, so that the reader still sees turns and cancels."""


def hostile(value: Any, key: str = "") -> Any:
    if isinstance(value, str):
        return value if key in STRUCTURE else value + PAYLOAD
    if isinstance(value, list):
        return [hostile(item, key) for item in value]
    if isinstance(value, dict):
        return {k: hostile(v, k) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, str]:
    """(hostile trace, its page, its Trace Event Format export, its summary)."""
    folder = tmp_path_factory.mktemp("hostile")
    clean = folder / "clean.ndjson"
    asyncio.run(record(clean))
    lines = [hostile(orjson.loads(line)) for line in clean.read_bytes().splitlines()]
    last = lines[-1]["id"]
    lines.append({"id": last + 1, "t": lines[-1]["t"], "kind": "check_start", "check": "audit" + PAYLOAD})
    lines.append(
        {"id": last + 2, "t": lines[-1]["t"], "kind": "verdict", "check": "audit" + PAYLOAD, "rule": "rule" + PAYLOAD,
         "level": "MUST" + PAYLOAD, "result": "fail" + PAYLOAD, "evidence": "evidence" + PAYLOAD}
    )  # fmt: skip
    trace = folder / "hostile.ndjson"
    trace.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    page, export = folder / "hostile.html", folder / "hostile.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "acp_driver",
            "trace",
            str(trace),
            "--html",
            str(page),
            "--chrome",
            str(export),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return trace, page, export, done.stdout


def test_the_summary_and_the_export_keep_it_as_data(drawn: tuple[Path, Path, Path, str]) -> None:
    _trace, _page, export, summary = drawn
    assert "verdict: " in summary
    assert "<img src=x onerror=" in summary  # shown as text...
    assert not any(c in summary for c in BIDI)  # ...with the overrides shown, not obeyed
    assert "\\u202e" in summary
    assert "\x1b" not in summary
    found = orjson.loads(export.read_bytes())  # still JSON: the text is in strings
    assert any(PAYLOAD in str(e.get("name", "")) for e in found["traceEvents"])


async def test_no_script_of_it_runs_and_every_field_shows_it_as_text(
    drawn: tuple[Path, Path, Path, str],
) -> None:
    trace, page, _export, _summary = drawn
    browser = await Browser.start(chromium_or_skip())
    try:
        await browser.open(page, 1400, 900)
        found = await browser.evaluate(
            "(() => ({"
            " pwned: [window.__pwned, window.parent.__pwned].filter(v => v !== undefined),"
            " scripts: document.scripts.length,"
            ' foreign: [...document.querySelectorAll(\'img, iframe, object, embed, a[href^="javascript"], foreignObject,'
            " svg:not(#timeline):not(.legend svg)')].map(e => e.outerHTML.slice(0, 80)),"
            " handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))"
            "   .filter(n => n.startsWith('on')),"
            " links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href')),"
            " text: document.body.innerText,"
            " notes: [...document.querySelectorAll('[data-note]')].map(e => e.dataset.note),"
            " verdicts: [...document.querySelectorAll('text.verdict')].map(e => e.textContent)"
            "}))()"
        )
        assert found["pwned"] == []
        assert browser.console_errors == []  # not even a script the page's CSP had to block
        assert all(url.startswith("file://") for url in browser.requests), browser.requests
        assert found["scripts"] == 2  # the data block and the page's own script
        assert found["foreign"] == []
        assert found["handlers"] == []
        assert all(href.startswith("#") for href in found["links"]), found["links"]
        # shown as text, everywhere it is drawn: the title, the lanes, the verdicts, the table
        visible = PAYLOAD[: PAYLOAD.index("\u202e")]
        text = found["text"]
        fields = await browser.evaluate(
            "(() => ({title: document.querySelector('h1').textContent,"
            " heads: [...document.querySelectorAll('text.peer-head')].map(e => e.textContent),"
            " lanes: [...document.querySelectorAll('text.lane-label')].map(e => e.textContent),"
            " cells: [...document.querySelectorAll('.verdicts td')].map(e => e.textContent).slice(1, 4)}))()"
        )
        assert visible in fields["title"]  # the agent's command line
        assert [visible in head for head in fields["heads"]] == [True]  # the check's name
        sessions = [lane for lane in fields["lanes"] if "turn" in lane]
        assert len(sessions) == 3
        assert all(lane.startswith("sess_") for lane in sessions)  # the sessions' ids (cut to fit)
        assert all(visible in cell for cell in fields["cells"])  # the level, rule and evidence
        assert text.count(visible) >= 5
        assert all(visible in v or "…" in v for v in found["verdicts"] if "update" not in v)
        # and no override reorders anything: shown as \u202e, never obeyed
        for shown in (text, *found["notes"]):
            assert not any(c in shown for c in BIDI), shown[:200]
        assert "\\u202e\\u2067evil\\u2069\\u200f" in text
        # the hover: the recorded message, as text
        mark = await browser.evaluate(
            "(() => { const el = document.querySelector('.mark-cancel'); const r = el.querySelector('path')"
            ".getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        await browser.hover(mark["x"], mark["y"])
        tip = await browser.evaluate("document.getElementById('tip').textContent")
        assert "</script><script>window.__pwned=1</script>" in tip
        assert not any(c in tip for c in BIDI)
        assert await browser.evaluate("window.__pwned === undefined")
        # the file it came from did hold the overrides (the test's own premise)
        assert "\u202e".encode() in trace.read_bytes()
    finally:
        await browser.close()
