"""``acp-driver trace FILE --chrome OUT.json``: the Trace Event Format, checked against its rules.

The trace comes from real processes (``scenario.py``). The export must follow the format's
rules (the phases it defines, timestamps in microseconds, every begin matched by its end, slices
on one thread nested, never crossing, metadata naming every lane) and hold the turns, the
ladder and the requests where the file says they were.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import orjson
import pytest

from .scenario import record

PHASES = {"B", "E", "X", "i", "I", "b", "n", "e", "C", "M", "s", "t", "f", "N", "O", "D"}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index", "process_labels"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the file's events, the export) of the scenario."""
    import asyncio

    folder = tmp_path_factory.mktemp("chrome")
    trace = folder / "scenario.ndjson"
    asyncio.run(record(trace))
    out = folder / "scenario.json"
    done = subprocess.run(
        [sys.executable, "-m", "acp_driver", "trace", str(trace), "--chrome", str(out), "-q"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Trace Event Format written to" in done.stderr
    events = [orjson.loads(line) for line in trace.read_bytes().splitlines()]
    return events, orjson.loads(out.read_bytes())


def test_the_export_follows_the_trace_event_formats_rules(
    exported: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    events, export = exported
    assert isinstance(export["traceEvents"], list)
    assert export["displayTimeUnit"] in ("ms", "ns")
    found = export["traceEvents"]
    by_id = {e["id"]: e for e in events}
    named_threads = {(e["pid"], e["tid"]) for e in found if e["ph"] == "M" and e["name"] == "thread_name"}
    named_processes = {e["pid"] for e in found if e["ph"] == "M" and e["name"] == "process_name"}
    stacks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    asyncs: dict[tuple[str, str], dict[str, Any]] = {}
    slices: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for event in found:
        assert event["ph"] in PHASES, event
        assert isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        assert isinstance(event["name"], str)
        if event["ph"] == "M":
            assert event["name"] in METADATA, event
            continue
        assert event["pid"] in named_processes, event
        assert (event["pid"], event["tid"]) in named_threads, event
        assert isinstance(event["ts"], int)
        assert event["ts"] >= 0
        # microseconds: an event made from a line of the file is at that line's t * 1e6
        eid = event.get("args", {}).get("event")
        if eid is not None and event["ph"] in ("X", "i", "b"):
            assert event["ts"] == round(by_id[eid]["t"] * 1_000_000), (event, by_id[eid])
        if event["ph"] == "X":
            assert isinstance(event["dur"], int)
            assert event["dur"] >= 0
            slices.setdefault((event["pid"], event["tid"]), []).append(
                (event["ts"], event["ts"] + event["dur"])
            )
        elif event["ph"] == "i":
            assert event["s"] in ("g", "p", "t")
        elif event["ph"] == "B":
            stacks.setdefault((event["pid"], event["tid"]), []).append(event)
        elif event["ph"] == "E":
            begun = stacks[(event["pid"], event["tid"])].pop()
            assert begun["ts"] <= event["ts"]
        elif event["ph"] == "b":
            key = (event["cat"], event["id"])
            assert key not in asyncs
            asyncs[key] = event
        elif event["ph"] == "e":
            begun = asyncs.pop((event["cat"], event["id"]))
            assert begun["name"] == event["name"]
            assert begun["ts"] <= event["ts"]
    assert all(not stack for stack in stacks.values())  # every B has its E
    assert asyncs == {}  # every b has its e
    for spans in slices.values():  # complete events on a thread nest, never cross
        open_: list[tuple[int, int]] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ and open_[-1][1] <= start:
                open_.pop()
            if open_:
                assert end <= open_[-1][1], (start, end, open_[-1])
            open_.append((start, end))


def test_the_export_has_a_lane_per_session_and_turn_the_ladder_and_the_requests(
    exported: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    events, export = exported
    found = export["traceEvents"]
    sessions = {
        e["msg"]["params"]["sessionId"]
        for e in events
        if e["kind"] == "wire" and e["msg"].get("method") == "session/prompt"
    }
    (session,) = sessions
    processes = {e["args"]["name"]: e["pid"] for e in found if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(processes) == {"agent process", f"session {session}"}
    spid = processes[f"session {session}"]
    threads = {
        e["tid"]: e["args"]["name"]
        for e in found
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == spid
    }
    turns = [e for e in found if e["ph"] == "X" and e["cat"] == "turn"]
    assert [e["name"] for e in turns] == ["turn 1", "turn 2", "turn 3"]
    for turn in turns:
        assert turn["pid"] == spid
        assert threads[turn["tid"]].startswith(turn["name"] + ": ")  # its own lane, named by its prompt
    assert len({e["tid"] for e in turns}) == 3
    # the ladder: each rung taken, as instant events on its turn's lane
    rungs = [e for e in found if e["ph"] == "i" and e["cat"] == "rung"]
    assert [by_rung(events, e) for e in rungs] == [
        "session_cancel",
        "session_cancel",
        "cancel_request",
        "terminate",
    ]
    assert {e["tid"] for e in rungs[1:]} == {turns[2]["tid"]}
    assert Counter(e["cat"] for e in found if e["ph"] == "i") >= Counter(
        {"cancel": 2, "resolved": 3, "session_cancel": 2}
    )
    (exited,) = [e for e in found if e["ph"] == "i" and e["cat"] == "exit"]
    assert exited["pid"] == processes["agent process"]
    # the cancel to the turn's end, as an async slice, on turns 2 and 3
    assert len([e for e in found if e["ph"] == "b"]) == 2
    # the requests as complete events: the turns' on their turn's threads, the others on the agent's
    requests = Counter((e["name"], e["pid"]) for e in found if e["ph"] == "X" and e["cat"] == "request")
    agent = processes["agent process"]
    assert requests[("initialize", agent)] == 1
    assert requests[("session/new", agent)] == 1
    assert requests[("session/prompt", spid)] == 3
    assert requests[("session/request_permission", spid)] == 1
    (permission,) = [e for e in found if e["ph"] == "X" and e["name"] == "session/request_permission"]
    assert threads[permission["tid"]] == "turn 2 requests"
    assert permission["args"]["direction"] == "received"


def by_rung(events: list[dict[str, Any]], instant: dict[str, Any]) -> str:
    return str(next(e for e in events if e["id"] == instant["args"]["event"])["rung"])
