"""Our bundled reference agent (``python -m acp_driver agent``) with a wire tracer.

Run with the interpreter that has ``acp_driver`` installed: ``python traced_agent.py
[BEHAVIOR]``. Every line the agent's connection reads ("in") or queues for the wire ("out") is
appended to the file named by ``ACP_INTEROP_TRACE_FILE`` as one JSON object
``{"d": "in"|"out", "t": <monotonic seconds>, "line": <the raw line, decoded as UTF-8>}``, so an
interop test can check every message OUR agent side emitted against the official schema.
With ``ACP_INTEROP_AGENT_LOOP=uvloop`` the agent runs on uvloop; each entry names the loop that wrote it
(``"loop"``: the loop class's module).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time

import orjson

from acp_driver import reference_agent
from acp_driver.agent import _runtime
from acp_driver.aio import Connection


def main() -> None:
    path = os.environ.get("ACP_INTEROP_TRACE_FILE")
    if path:
        sink = open(path, "ab", buffering=0)  # noqa: SIM115 - open for the life of the process

        def tracer(direction: str, data: bytes) -> None:
            text = bytes(data).decode("utf-8", "replace").rstrip("\r\n")
            loop = type(asyncio.get_running_loop()).__module__
            entry = {"d": direction, "t": time.monotonic(), "line": text, "loop": loop}
            sink.write(orjson.dumps(entry) + b"\n")

        # serve_stdio builds its Connection from this module global: hand it one with a tracer.
        _runtime.Connection = functools.partial(Connection, tracer=tracer)  # type: ignore[misc]
    loop_factory = None
    if os.environ.get("ACP_INTEROP_AGENT_LOOP") == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop
    reference_agent.main(sys.argv[1] if len(sys.argv) > 1 else "polite", loop_factory=loop_factory)


if __name__ == "__main__":
    main()
