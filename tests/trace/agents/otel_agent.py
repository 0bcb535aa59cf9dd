"""The reference agent with an ``OtelSink`` (the agent's role); its finished spans and its metric's
points are written as JSON to the file named by ``argv[1]`` when its stdin ends (the SDK's
in-memory exporter and reader). One command more than the reference agent's: ``/usage USED
SIZE`` sends a ``usage_update`` (as agents do after a model call), then streams like ``/stream``."""

from __future__ import annotations

import asyncio
import json
import sys

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_driver.agent import Turn, serve_stdio
from acp_driver.reference_agent import ReferenceAgent
from acp_driver.trace import OtelSink


class UsageAgent(ReferenceAgent):
    async def cmd_usage(self, turn: Turn, args: list[str]) -> None:
        used, size = int(args[0]), int(args[1])
        await turn.update({"sessionUpdate": "usage_update", "used": used, "size": size})
        await self.cmd_stream(turn, args[2:])


exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
reader = InMemoryMetricReader()
sink = OtelSink(provider, role="agent", meter_provider=MeterProvider(metric_readers=[reader]))
asyncio.run(serve_stdio(UsageAgent(), trace=sink))
sink.close()
spans = [
    {
        "name": s.name,
        "trace_id": s.context.trace_id,
        "span_id": s.context.span_id,
        "parent": s.parent.span_id if s.parent is not None else None,
        "kind": s.kind.name,
        "start": s.start_time,
        "end": s.end_time,
        "links": [link.context.span_id for link in s.links],
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (s.attributes or {}).items()},
        "events": [e.name for e in s.events],
    }
    for s in exporter.get_finished_spans()
]
data = reader.get_metrics_data()
points = [
    {"name": metric.name, "attributes": dict(point.attributes or {}), "count": point.count, "sum": point.sum}
    for resource in (data.resource_metrics if data is not None else [])
    for scope in resource.scope_metrics
    for metric in scope.metrics
    for point in metric.data.data_points
]
with open(sys.argv[1], "w") as out:
    json.dump({"spans": spans, "points": points}, out)
