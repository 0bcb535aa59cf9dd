"""OpenTelemetry spans and the cancel metric (the ``otel`` extra), collected with the SDK's
in-memory exporter and metric reader.

The host's spans come from ``OtelSink`` given to ``launch``; the agent's from the reference
agent run with its own ``OtelSink`` in a subprocess (``agents/otel_agent.py``), which writes its
spans and metric points to a file at exit. Both sides are real processes over real pipes, in
both protocol versions.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_driver.driver import ClientServices, LadderPolicy, PermissionRequest, launch
from acp_driver.trace import OtelSink, Tee, TraceRecorder, read_trace

from .scenario import record

OTEL_AGENT = Path(__file__).with_name("agents") / "otel_agent.py"


class Collected:
    """A tracer provider and a meter provider whose output a test reads."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def sink(self, **kwargs: Any) -> OtelSink:
        return OtelSink(self.tracer_provider, meter_provider=self.meter_provider, **kwargs)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], int, float]]:
        """(attributes, count, sum) of each point of the histogram ``name``."""
        data = self.reader.get_metrics_data()
        return [
            (dict(point.attributes or {}), point.count, point.sum)
            for resource in (data.resource_metrics if data is not None else [])
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def collected() -> Collected:
    return Collected()


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def turns_of(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith("invoke_agent")), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_run_is_one_trace_whose_turns_follow_the_genai_agent_conventions(
    tmp_path: Path, collected: Collected
) -> None:
    sink = collected.sink()
    path = tmp_path / "t.ndjson"
    await record(path, trace=Tee(TraceRecorder(path), sink))  # the same run as a file and as spans
    sink.close()
    finished = collected.spans()
    # one root span for the agent's lifetime; everything else is in its trace
    (root,) = named(finished, "acp.connection")
    assert root.parent is None
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}
    for method in ("initialize", "session/new"):
        (span,) = named(finished, method)
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id
        assert attrs(span)["rpc.jsonrpc.version"] == "2.0"
    turns = turns_of(finished)
    assert len(turns) == 3
    assert all(t.parent is not None and t.parent.span_id == root.context.span_id for t in turns)
    first, second, third = turns
    trace = read_trace(path)
    (initialized,) = [
        e for e in trace.events if e["kind"] == "wire" and "agentInfo" in (e["msg"].get("result") or {})
    ]
    info = initialized["msg"]["result"]["agentInfo"]
    session_id = trace.turns[0].session
    for turn in turns:
        a = attrs(turn)
        assert turn.name == f"invoke_agent {a['gen_ai.agent.name']}"
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.agent.id"] == info["name"]
        assert a["gen_ai.agent.name"] == info.get("title", info["name"])
        assert a["gen_ai.conversation.id"] == session_id
        assert a["acp.protocol_version"] == 1
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs(first)["acp.resolution"] == "completed"
    assert attrs(first)["acp.updates"] > 0
    # turn 2: cancelled while its permission request was pending, answered cancelled by the host
    events = [e.name for e in second.events]
    assert events[:3] == ["acp.cancel.requested", "acp.ladder.rung", "acp.cancel.sent"]
    assert "acp.permission.cancelled" in events
    assert attrs(second)["acp.resolved_by"] == "ignored"
    # turn 3: the ladder climbed to SIGTERM; the agent died of it
    assert attrs(third)["acp.resolution"] == "killed"
    assert attrs(third)["acp.resolved_by"] == "terminate"
    rungs = [dict(e.attributes or {})["acp.rung"] for e in third.events if e.name == "acp.ladder.rung"]
    assert rungs == ["session_cancel", "cancel_request", "terminate"]
    assert "acp.cancel_request.sent" in [e.name for e in third.events]
    (signal,) = [e for e in third.events if e.name == "acp.process.signal"]
    (spawn,) = [e for e in trace.events if e["kind"] == "spawn"]
    (exited,) = [e for e in trace.events if e["kind"] == "exit"]
    assert dict(signal.attributes or {})["acp.signal"] == "SIGTERM"
    assert attrs(root)["process.pid"] == spawn["pid"]
    assert attrs(root)["process.exit.code"] == exited["status"] == -15
    assert "acp.process.exit" in [e.name for e in root.events]
    # a span per request, children of their turn when they are its work
    prompts = named(finished, "session/prompt")
    assert len(prompts) == 3
    assert {s.parent.span_id for s in prompts if s.parent} == {t.context.span_id for t in turns}
    (permission,) = named(finished, "session/request_permission")
    assert permission.kind.name == "SERVER"
    assert permission.parent is not None
    assert permission.parent.span_id == second.context.span_id
    assert attrs(permission)["acp.permission.outcome"] == "cancelled"
    assert [s.kind.name for s in named(finished, "initialize")] == ["CLIENT"]
    # the histogram: one point per cancelled turn, by the rung that resolved it, as long as the
    # file says (the sink's clock and the recorder's are read in the same calls)
    points = {
        a["acp.resolved_by"]: (count, total) for a, count, total in collected.points("acp.cancel.duration")
    }
    assert set(points) == {"ignored", "terminate"}
    cancels = [e for e in trace.events if e["kind"] == "cancel"]
    resolved = [e for e in trace.events if e["kind"] == "resolved"][1:]
    for (cancel, end), by in zip(zip(cancels, resolved, strict=True), ("ignored", "terminate"), strict=True):
        count, total = points[by]
        assert count == 1
        assert total == pytest.approx(end["t"] - cancel["t"], abs=0.05)
    assert points["terminate"][1] > 1.0  # the ladder's SIGTERM is due 1.5 s after the cancel
    assert len(trace.turns) == 3


@pytest.mark.parametrize("version", [1, 2])
async def test_both_sides_of_a_cancelled_turn_in_one_trace(
    tmp_path: Path, collected: Collected, version: int
) -> None:
    out = tmp_path / "agent-spans.json"
    sink = collected.sink()
    asked = asyncio.Event()

    async def hold(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # until the turn's cancel answers it cancelled
        raise AssertionError("unreachable")

    agent = await launch(
        [sys.executable, str(OTEL_AGENT), str(out)],
        trace=sink,
        services=ClientServices(permission=hold),
        ladder=LadderPolicy(budget=5.0),
        protocol=version,
    )
    try:
        session = await agent.new_session(".")
        done = await session.prompt("/usage 1200 200000")
        assert done.stop_reason == "end_turn"
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
    finished = collected.spans()
    host_turns = turns_of(finished)
    (host_root,) = named(finished, "acp.connection")
    dumped = json.loads(out.read_text())
    agent_spans = dumped["spans"]
    agent_turns = sorted(
        (s for s in agent_spans if s["name"].startswith("invoke_agent")), key=lambda s: s["start"]
    )
    (agent_root,) = [s for s in agent_spans if s["name"] == "acp.connection"]
    assert len(host_turns) == len(agent_turns) == 3
    # one process seen from both sides: the host's root names the agent it started, the agent's itself
    assert agent_root["attributes"]["process.pid"] == attrs(host_root)["process.pid"]
    assert attrs(host_root)["process.exit.code"] == 0
    for host, theirs in zip(host_turns, agent_turns, strict=True):
        assert theirs["trace_id"] == host.context.trace_id == host_root.context.trace_id  # one trace
        assert theirs["parent"] == host.context.span_id
        assert theirs["links"] == [agent_root["span_id"]]  # and the agent's lifetime, linked
        assert theirs["kind"] == "SERVER"
        assert theirs["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert theirs["attributes"]["gen_ai.conversation.id"] == session.id
        assert theirs["attributes"]["acp.protocol_version"] == version
        assert theirs["name"] == f"invoke_agent {theirs['attributes']['gen_ai.agent.name']}"
        assert host.name == theirs["name"]  # both sides name the agent from initialize
    usage, permission_turn, streaming = agent_turns
    # usage_update -> gen_ai.usage.*, on both sides
    assert usage["attributes"]["gen_ai.usage.input_tokens"] == 1200
    assert usage["attributes"]["acp.usage.context_size"] == 200000
    assert attrs(host_turns[0])["gen_ai.usage.input_tokens"] == 1200
    assert usage["attributes"]["gen_ai.response.finish_reasons"] == ["end_turn"]
    # the agent's turn spans its work: the cancel is received in it, it ends with the stop reason,
    # after its session/prompt span (in v2 that answer is the insertion, long before the idle)
    for theirs in (permission_turn, streaming):
        assert "acp.cancel.received" in theirs["events"]
        assert theirs["attributes"]["gen_ai.response.finish_reasons"] == ["cancelled"]
        assert theirs["attributes"]["acp.stop_reason"] == "cancelled"
        (prompt,) = [
            s for s in agent_spans if s["name"] == "session/prompt" and s["parent"] == theirs["span_id"]
        ]
        assert prompt["kind"] == "SERVER"
        assert theirs["end"] >= prompt["end"]
        if version == 2:
            assert "acp.stop_reason" not in prompt["attributes"]  # answered {messageId}
    for host in host_turns[1:]:  # the host's side: the stop reason the agent ended with, and the rung
        assert attrs(host)["gen_ai.response.finish_reasons"] == ("cancelled",)
        assert attrs(host)["acp.resolved_by"] == "session_cancel"
        assert "acp.cancel.requested" in [e.name for e in host.events]
    assert "acp.permission.cancelled" in permission_turn["events"]
    (agent_permission,) = [s for s in agent_spans if s["name"] == "session/request_permission"]
    assert agent_permission["kind"] == "CLIENT"  # the agent's own request
    assert agent_permission["parent"] == permission_turn["span_id"]
    assert agent_permission["attributes"]["rpc.jsonrpc.version"] == "2.0"
    # the cancel metric on each side: the host's by the rung that took effect, the agent's by
    # the stop reason it ended with
    host_points = collected.points("acp.cancel.duration")
    assert [(a["acp.resolved_by"], count) for a, count, _sum in host_points] == [("session_cancel", 2)]
    agent_points = [p for p in dumped["points"] if p["name"] == "acp.cancel.duration"]
    assert [(p["attributes"]["acp.stop_reason"], p["count"]) for p in agent_points] == [("cancelled", 2)]
    assert all(p["attributes"]["acp.role"] == "agent" for p in agent_points)


async def test_an_error_answer_carries_its_code_and_message(tmp_path: Path, collected: Collected) -> None:
    sink = collected.sink()
    agent = await launch([sys.executable, "-m", "acp_driver", "agent"], trace=sink, protocol=1)
    try:
        session = await agent.new_session(".")
        outcome = await session.prompt("/fail the model is down")
        assert outcome.error is not None
    finally:
        await agent.aclose()
    sink.close()
    (prompt,) = named(collected.spans(), "session/prompt")
    assert attrs(prompt)["rpc.jsonrpc.error_code"] == -32603
    assert attrs(prompt)["rpc.jsonrpc.error_message"] == "the model is down"
    assert prompt.status.status_code.name == "ERROR"


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
