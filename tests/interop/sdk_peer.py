"""A peer process running the official ACP Python SDK's low-level ``acp.connection.Connection``.

Run as ``python sdk_peer.py``: it speaks JSON-RPC 2.0 (newline-delimited JSON) on its own
stdin/stdout, through the SDK's own ``acp.stdio.stdio_streams()``, until stdin ends. It logs
what the SDK connection sees and sends (its stream observers) to stderr, one JSON line each.

Methods it serves:

- ``echo``: returns its params.
- ``slow``: sends the notification ``peer/started`` ``{"method": "slow"}``, then sleeps 30 s;
  counted in ``stats`` when it is cancelled (``$/cancel_request``).
- ``ask_back``: sends the request ``our/slow`` to the other side with the SDK's
  ``send_request`` and gives up after ``params["after"]`` seconds (default 0.2) with an
  ``asyncio.timeout`` -- the SDK then sends ``$/cancel_request`` -- and returns
  ``{"gave_up": true}`` (``{"gave_up": false, "result": ...}`` if an answer came first).
- ``call_unknown``: sends the request ``params["method"]`` (default ``our/no_such_method``)
  without params and returns the error the other side answered as ``{"code", "message", "data"}``.
- ``stats``: what happened so far (cancelled handlers, notifications received).
- ``exit``: ends the process at once (exit status 0) without answering anything.

Every other request gets the SDK's own ``RequestError.method_not_found``; notifications are
recorded (unknown ones raise ``method_not_found`` like the SDK's router does, which the SDK
must only log: a notification never gets an answer).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp.connection import Connection, StreamEvent
from acp.exceptions import RequestError
from acp.stdio import stdio_streams

KNOWN_NOTIFICATIONS = {"peer/note"}


def log(kind: str, **fields: Any) -> None:
    print(json.dumps({"peer": kind, **fields}, default=repr), file=sys.stderr, flush=True)


def observe(event: StreamEvent) -> None:
    log(event.direction.value, message=event.message)


async def main() -> None:
    reader, writer = await stdio_streams()
    stats: dict[str, Any] = {"slow_cancelled": 0, "slow_finished": 0, "notifications": []}
    conn: Connection | None = None

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        assert conn is not None
        if is_notification:
            stats["notifications"].append({"method": method, "params": params})
            if method not in KNOWN_NOTIFICATIONS:
                raise RequestError.method_not_found(method)
            return None
        if method == "echo":
            return params
        if method == "slow":
            await conn.send_notification("peer/started", {"method": "slow"})
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                stats["slow_cancelled"] += 1
                log("slow cancelled")
                raise
            stats["slow_finished"] += 1
            return {"slept": 30}
        if method == "ask_back":
            after = float((params or {}).get("after", 0.2))
            try:
                async with asyncio.timeout(after):
                    result = await conn.send_request("our/slow", {"from": "sdk"})
            except TimeoutError:
                log("ask_back gave up", after=after)
                return {"gave_up": True}
            return {"gave_up": False, "result": result}
        if method == "call_unknown":
            target = (params or {}).get("method", "our/no_such_method")
            try:
                result = await conn.send_request(target)
            except RequestError as exc:
                return {"code": exc.code, "message": str(exc), "data": exc.data}
            return {"unexpected_result": result}
        if method == "stats":
            return stats
        if method == "exit":
            log("exiting without answers")
            os._exit(0)
        raise RequestError.method_not_found(method)

    conn = Connection(handler, writer, reader, observers=[observe], listening=False)
    log("ready")
    try:
        await conn.main_loop()  # returns at end of stdin
    finally:
        await conn.close()
        log("closed")


if __name__ == "__main__":
    asyncio.run(main())
