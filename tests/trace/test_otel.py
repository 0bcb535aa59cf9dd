"""OpenTelemetry spans (the ``otel`` extra), collected with the SDK's in-memory exporter.

The host's spans come from ``OtelSink`` given to ``launch``; the agent's from the reference
agent run with its own ``OtelSink`` in a subprocess (``agents/otel_agent.py``), which writes its
spans to a file at exit. Both sides are real processes over real pipes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_driver.driver import ClientServices, LadderPolicy, PermissionRequest, launch
from acp_driver.trace import OtelSink, Tee, TraceRecorder, read_trace

from .scenario import record

OTEL_AGENT = Path(__file__).with_name("agents") / "otel_agent.py"


@pytest.fixture
def spans() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_a_turn_its_requests_its_cancel_and_each_rung_become_spans(
    tmp_path: Path, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    sink = OtelSink(provider)
    path = tmp_path / "t.ndjson"
    await record(path, trace=Tee(TraceRecorder(path), sink))  # the same run as a file and as spans
    sink.close()
    finished = list(exporter.get_finished_spans())
    turns = named(finished, "acp.turn")
    assert len(turns) == 3
    first, second, third = sorted(turns, key=lambda s: s.start_time or 0)
    assert first.attributes is not None
    assert first.attributes["acp.stop_reason"] == "end_turn"
    assert first.attributes["acp.resolution"] == "completed"
    assert first.attributes["acp.protocol_version"] == 1
    assert first.attributes["acp.updates"] > 0
    # turn 2: cancelled while its permission request was pending, answered cancelled by the host
    events = [e.name for e in second.events]
    assert events[:3] == ["cancel requested", "ladder rung", "cancel sent"]
    assert "permission answered cancelled" in events
    assert second.attributes is not None
    assert second.attributes["acp.resolved_by"] == "ignored"
    # turn 3: the ladder climbed to SIGTERM; the agent died of it
    assert third.attributes is not None
    assert third.attributes["acp.resolution"] == "killed"
    assert third.attributes["acp.resolved_by"] == "terminate"
    rungs = [dict(e.attributes or {})["acp.rung"] for e in third.events if e.name == "ladder rung"]
    assert rungs == ["session_cancel", "cancel_request", "terminate"]
    assert "cancel_request sent" in [e.name for e in third.events]
    assert "signal" in [e.name for e in third.events]
    # a span per request, children of their turn when they are its work
    prompts = named(finished, "session/prompt")
    assert len(prompts) == 3
    assert {s.parent.span_id for s in prompts if s.parent} == {t.context.span_id for t in turns}
    (permission,) = named(finished, "session/request_permission")
    assert permission.kind.name == "SERVER"
    assert permission.parent is not None
    assert permission.parent.span_id == second.context.span_id
    assert permission.attributes is not None
    assert permission.attributes["acp.permission.outcome"] == "cancelled"
    assert [s.kind.name for s in named(finished, "initialize")] == ["CLIENT"]
    # the file recorded the same run
    assert len(read_trace(path).turns) == 3


async def test_the_trace_context_crosses_the_wire_in_meta(
    tmp_path: Path, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    out = tmp_path / "agent-spans.json"
    sink = OtelSink(provider)
    asked = asyncio.Event()

    async def hold(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # until the turn's cancel answers it cancelled
        raise AssertionError("unreachable")

    agent = await launch(
        [sys.executable, str(OTEL_AGENT), str(out)],
        trace=sink,
        services=ClientServices(permission=hold),
        ladder=LadderPolicy(budget=2.0),
        protocol=1,
    )
    try:
        session = await agent.new_session(".")
        turn = session.prompt("/permission")
        async with asyncio.timeout(30):
            await asked.wait()
        outcome = await turn.cancel()
        assert outcome.stop_reason == "cancelled"
        turn = session.prompt("/stream 300 20")
        async for _update in turn:
            break
        outcome = await turn.cancel()
        assert outcome.stop_reason == "cancelled"
    finally:
        await agent.aclose()
    sink.close()
    host_turns = sorted(
        named(list(exporter.get_finished_spans()), "acp.turn"), key=lambda s: s.start_time or 0
    )
    agent_spans = json.loads(out.read_text())
    agent_turns = [s for s in agent_spans if s["name"] == "acp.turn"]
    assert len(host_turns) == len(agent_turns) == 2
    for host, theirs in zip(host_turns, agent_turns, strict=True):
        assert theirs["trace_id"] == host.context.trace_id  # one trace across the two processes
        assert theirs["parent"] == host.context.span_id
        assert theirs["kind"] == "SERVER"
    # the host answers the pending permission request cancelled (the agent may also withdraw it
    # with $/cancel_request first: which comes first is a race)
    assert agent_turns[0]["events"][0] == "cancel received"
    assert "permission answered cancelled" in agent_turns[0]["events"]
    assert "cancel received" in agent_turns[1]["events"]
    assert agent_turns[1]["attributes"]["acp.stop_reason"] == "cancelled"
    (agent_prompt,) = [
        s for s in agent_spans if s["name"] == "session/prompt" and s["parent"] == agent_turns[1]["span_id"]
    ]
    assert agent_prompt["kind"] == "SERVER"
    (permission,) = [s for s in agent_spans if s["name"] == "session/request_permission"]
    assert permission["kind"] == "CLIENT"  # the agent's own request
    assert permission["parent"] == agent_turns[0]["span_id"]


def test_nothing_of_opentelemetry_loads_unless_a_sink_is_made(tmp_path: Path) -> None:
    code = (
        "import sys, asyncio\n"
        "from acp_driver.driver import launch\n"
        "import acp_driver.trace\n"
        "async def main():\n"
        f"    agent = await launch([sys.executable, '-m', 'acp_driver', 'agent'], trace={str(tmp_path / 't.ndjson')!r}, protocol=1)\n"
        "    s = await agent.new_session('.')\n"
        "    await s.prompt('hi')\n"
        "    await agent.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
