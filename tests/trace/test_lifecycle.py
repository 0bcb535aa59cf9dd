"""What a trace of real turns holds, and what the summary and the page make of it.

The reference agent runs in a subprocess (``scenario.py``); the trace is read back with the
library's reader and, independently, line by line here.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver.trace import read_trace, render_html, summarize
from acp_driver.trace._verdict import duration, verdict

from .scenario import BUDGET, MARKUP, record


def events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
async def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.ndjson"
    await record(path)
    return path


async def test_the_trace_records_every_message_and_the_lifecycle_of_the_cancels(scenario: Path) -> None:
    found = events(scenario)
    kinds = [e["kind"] for e in found]
    assert kinds[0] == "trace"
    assert [e["id"] for e in found] == list(range(len(found)))
    times = [e["t"] for e in found]
    assert times == sorted(times)
    wire = [e for e in found if e["kind"] == "wire"]
    methods = [e["msg"].get("method") for e in wire if e["dir"] == "out"]
    assert methods.count("session/prompt") == 3
    assert "session/cancel" in methods
    assert "$/cancel_request" in methods
    # the permission request was answered cancelled by the host (spec MUST), on the wire
    asked = next(e["msg"]["id"] for e in wire if e["msg"].get("method") == "session/request_permission")
    answer = next(
        e for e in wire if e["dir"] == "out" and e["msg"].get("id") == asked and "result" in e["msg"]
    )
    assert answer["msg"]["result"] == {"outcome": {"outcome": "cancelled"}}
    cancels = [e for e in found if e["kind"] == "cancel"]
    assert len(cancels) == 2
    assert all(c["scope"] == "current_turn" and c["by"] == "host" for c in cancels)
    assert cancels[0]["schedule"] == {
        "session_cancel": 0.0,
        "cancel_request": BUDGET / 2,
        "terminate": BUDGET * 0.75,
        "kill": BUDGET,
    }
    rungs = [(e["rung"], e["due"], e["next"]) for e in found if e["kind"] == "rung"]
    # turn 2: session/cancel only (the agent ended it); turn 3: up to SIGTERM, which killed it
    assert rungs == [
        ("session_cancel", 0.0, BUDGET / 2),
        ("session_cancel", 0.0, BUDGET / 2),
        ("cancel_request", BUDGET / 2, BUDGET * 0.75),
        ("terminate", BUDGET * 0.75, BUDGET),
    ]
    signals = [(e["name"], e["to"]) for e in found if e["kind"] == "signal"]
    assert signals[0] == ("SIGTERM", "agent")
    exit_event = next(e for e in found if e["kind"] == "exit")
    assert exit_event["status"] == -15
    assert exit_event["description"] == "killed by SIGTERM"
    resolved = [(e["resolution"], e["by"]) for e in found if e["kind"] == "resolved"]
    assert resolved == [("completed", None), ("completed", "ignored"), ("killed", "terminate")]
    assert any(e["kind"] == "connection_end" for e in found)
    assert kinds.index("spawn") < kinds.index("exit")


async def test_the_reader_finds_the_turns_their_permission_their_cancel_and_how_each_resolved(
    scenario: Path,
) -> None:
    trace = read_trace(scenario)
    assert trace.version == 1
    (peer,) = trace.peers.values()
    first, second, third = peer.turns
    assert (first.index, second.index, third.index) == (1, 2, 3)
    assert first.stop_reason == "end_turn"
    assert first.cancel is None
    assert len(first.updates) == len(MARKUP.split(" "))
    assert "</script>" in first.prompt
    (permission,) = second.permissions
    assert permission.outcome == "cancelled"
    assert second.cancel is not None
    assert second.cancel.t <= permission.end
    assert second.resolution == "completed"
    assert second.resolved_by == "ignored"
    assert third.resolution == "killed"
    assert third.resolved_by == "terminate"
    assert third.end is None
    assert third.finish is not None
    assert [m.event["rung"] for m in third.rungs] == ["session_cancel", "cancel_request", "terminate"]
    assert [m.kind for m in peer.markers if m.kind in ("spawn", "signal", "exit")][:1] == ["spawn"]


async def test_the_summary_tells_each_turn_and_which_rung_resolved_the_cancel(scenario: Path) -> None:
    text = summarize(read_trace(scenario))
    assert "turn 1" in text
    assert "turn 2" in text
    assert "turn 3" in text
    assert "permissions: 1:" in text
    assert "cancelled" in text
    assert "resolved killed by terminate in" in text
    assert "rungs: session_cancel at +" in text
    assert "terminate at +" in text
    assert "SIGTERM sent to the agent" in text
    assert "agent killed by SIGTERM" in text
    assert "\x1b" not in text


async def test_the_page_holds_agent_text_as_text(scenario: Path) -> None:
    page = render_html(read_trace(scenario))
    assert page.count("<script") == 2  # the data block and the page's own script; nothing of the agent's
    assert "</script><script>window.__pwned" not in page
    assert "<img src=x" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;/script&gt;" in page  # the lane label, escaped
    assert "\\u003c/script\\u003e" in page  # the hover data, escaped inside its JSON block
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


LATE_AGENT = Path(__file__).resolve().parents[1] / "driver" / "agents" / "late_updates.py"


async def test_updates_after_the_answer_are_late_on_the_turn_they_came_after(tmp_path: Path) -> None:
    import asyncio
    import os
    import sys

    path = tmp_path / "late.ndjson"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "chat",
        "--trace",
        str(path),
        "--agent",
        f"{sys.executable} {LATE_AGENT}",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "ACP_TEST_LATE_MODE": "same_write"},  # the late chunk in the answer's read
    )
    async with asyncio.timeout(60):
        _out, err = await proc.communicate(b"first\nsecond\n")
    assert proc.returncode == 0, err.decode()
    first, second = read_trace(path).turns
    # turn 1: a chunk written with its answer; turn 2: first of all an update of turn 1's tool call
    assert [m.label for m in first.late] == [
        "agent_message_chunk after the turn's answer",
        "tool_call_update of a tool call of turn 1",
    ]
    assert first.late[0].eid > first.end_eid  # type: ignore[operator]
    assert second.late == []
    assert second.update_kinds() == {"agent_message_chunk": 2}
    assert "late updates after the answer: 2" in summarize(read_trace(path))


def _updates_after_session_cancel(found: list[dict[str, Any]], turn_index: int) -> int:
    """Read from the file, independently of the reader: the ``session/update`` lines between the
    turn's ``session/cancel`` and the next prompt (or the end)."""
    prompts = [e["id"] for e in found if e["kind"] == "wire" and e["msg"].get("method") == "session/prompt"]
    start = prompts[turn_index - 1]
    stop = prompts[turn_index] if turn_index < len(prompts) else len(found)
    cancel = next(
        e["id"]
        for e in found[start:stop]
        if e["kind"] == "wire" and e["dir"] == "out" and e["msg"].get("method") == "session/cancel"
    )
    return sum(
        1
        for e in found[cancel:stop]
        if e["kind"] == "wire" and e["dir"] == "in" and e["msg"].get("method") == "session/update"
    )


async def test_each_turn_gets_its_verdict_in_words_in_the_summary_and_on_its_lane(scenario: Path) -> None:
    found = events(scenario)
    trace = read_trace(scenario)
    first, second, third = trace.turns
    text = summarize(trace)
    page = render_html(trace)
    # turn 1: nothing to explain
    assert verdict(first).startswith("completed (end_turn) in ")
    assert f"{len(first.updates)} updates" in verdict(first)
    # turn 2: the agent ignored the cancel and ended the turn itself (the ladder never climbed)
    assert verdict(second).startswith("the agent ignored session/cancel")
    assert "ended the turn end_turn" in verdict(second)
    # turn 3: it kept streaming until SIGTERM, whose time after the cancel is the file's
    after = _updates_after_session_cancel(found, 3)
    assert after > 0
    cancel = next(e for e in found if e["kind"] == "cancel" and e["id"] > third.eid)
    terminate = next(e for e in found if e["kind"] == "rung" and e["rung"] == "terminate")
    assert verdict(third) == (
        f"the agent ignored session/cancel and kept streaming ({after} updates); "
        f"SIGTERM at +{duration(terminate['t'] - cancel['t'])} ended it"
    )
    assert (
        f"updates: {len(third.updates)} (agent_message_chunk {len(third.updates)}); {after} after session/cancel"
        in text
    )
    for turn in (first, second, third):
        assert f"    verdict: {verdict(turn)}\n" in text
        assert f">{html.escape(verdict(turn))}</text>" in page  # at the top of its lane


async def test_the_page_brackets_each_cancel_and_draws_no_due_line_after_the_turn_was_over(
    scenario: Path,
) -> None:
    found = events(scenario)
    trace = read_trace(scenario)
    page = render_html(trace)
    brackets = {
        (float(a), float(b)): float(ms)
        for ms, a, b in re.findall(
            r'class="bracket" data-ms="([\d.]+)" data-from="([\d.]+)" data-to="([\d.]+)"', page
        )
    }
    sent = [
        e
        for e in found
        if e["kind"] == "wire" and e["dir"] == "out" and e["msg"].get("method") == "session/cancel"
    ]
    _first, second, third = trace.turns
    assert second.finish is not None
    assert third.finish is not None
    for start, end in brackets:
        assert f"cancel → end: {(end - start) * 1000:.1f} ms" in page
    assert brackets == {
        (sent[0]["t"], second.finish): round((second.finish - sent[0]["t"]) * 1000, 1),
        (sent[1]["t"], third.finish): round((third.finish - sent[1]["t"]) * 1000, 1),
    }
    # the ladder's schedule: each rung due at the cancel + its offset, drawn only when that is
    # before the turn was over (turn 3 was killed by SIGTERM: its SIGKILL was never due)
    dues = [(rung, float(due)) for rung, due in re.findall(r'data-rung="(\w+)" data-due="([\d.]+)"', page)]
    cancels = [e for e in found if e["kind"] == "cancel"]
    expected = [
        (rung, cancel["t"] + offset)
        for cancel, turn in zip(cancels, (second, third), strict=True)
        for rung, offset in cancel["schedule"].items()
        if offset > 0 and cancel["t"] + offset <= turn.finish
    ]
    assert dues == [(rung, pytest.approx(due)) for rung, due in expected]
    assert ("cancel_request", pytest.approx(cancels[1]["t"] + BUDGET / 2)) in dues
    assert "kill" not in [rung for rung, _due in dues]


async def test_a_v2_permission_request_is_named_by_its_title(tmp_path: Path) -> None:
    import sys

    from acp_driver.driver import ClientServices, PermissionRequest, launch

    path = tmp_path / "v2.ndjson"

    async def allow(request: PermissionRequest) -> dict[str, Any]:
        return request.allow()

    agent = await launch(
        [sys.executable, "-m", "acp_driver", "agent"],
        services=ClientServices(permission=allow),
        trace=path,
        protocol=2,
    )
    try:
        session = await agent.new_session(".")
        done = await session.prompt("/permission")
        assert done.stop_reason == "end_turn"
    finally:
        await agent.aclose()
    asked = next(
        e["msg"]["params"]
        for e in events(path)
        if e["kind"] == "wire" and e["msg"].get("method") == "session/request_permission"
    )
    assert "toolCall" not in asked  # v2: a subject, and the question's own title
    (turn,) = read_trace(path).turns
    (permission,) = turn.permissions
    assert permission.title == asked["title"]
    assert f"permissions: 1: {asked['title']}: selected" in summarize(read_trace(path))
    assert f"permission: {html.escape(asked['title'])} -&gt; selected" in render_html(read_trace(path))


async def test_a_v2_trace_credits_each_held_prompts_work_to_its_own_turn(tmp_path: Path) -> None:
    """The reader asks the same lifecycle as the host: while a v2 turn works, a prompt held
    behind it is a turn of its own, and the running work's chunks are the running turn's (not
    the newest prompt's); each turn ends at its own idle."""
    import asyncio

    from acp_driver.driver import launch, reference_agent_argv

    path = tmp_path / "held.ndjson"
    async with asyncio.timeout(60):
        agent = await launch(reference_agent_argv(), protocol=2, trace=str(path))
        async with agent:
            session = await agent.new_session(tmp_path)
            first = session.prompt("/stream 5 40")
            async for _update in first:
                break  # it works: the next prompt is held
            held = session.prompt("held")
            assert (await first).stop_reason == "end_turn"
            assert (await held).stop_reason == "end_turn"
    one, two = read_trace(path).turns
    assert one.update_kinds().get("agent_message_chunk") == 5
    assert two.update_kinds().get("agent_message_chunk") == 1
    assert (one.stop_reason, two.stop_reason) == ("end_turn", "end_turn")
    assert one.end_eid is not None
    assert two.end_eid is not None
    assert one.end_eid < two.end_eid
