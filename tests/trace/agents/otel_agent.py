"""The reference agent with an ``OtelSink`` (the agent's role); its finished spans are written as
JSON to the file named by ``argv[1]`` when its stdin ends (the SDK's in-memory exporter)."""

from __future__ import annotations

import asyncio
import json
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_driver.agent import serve_stdio
from acp_driver.reference_agent import ReferenceAgent
from acp_driver.trace import OtelSink

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
sink = OtelSink(provider, role="agent")
asyncio.run(serve_stdio(ReferenceAgent(), trace=sink))
sink.close()
spans = [
    {
        "name": s.name,
        "trace_id": s.context.trace_id,
        "span_id": s.context.span_id,
        "parent": s.parent.span_id if s.parent is not None else None,
        "kind": s.kind.name,
        "attributes": dict(s.attributes or {}),
        "events": [e.name for e in s.events],
    }
    for s in exporter.get_finished_spans()
]
with open(sys.argv[1], "w") as out:
    json.dump(spans, out)
