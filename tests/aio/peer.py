"""A peer process for ``test_pipes.py``: serves an ``acp_driver.aio.Connection`` over real pipes.

Run as ``python tests/aio/peer.py`` to serve on stdin/stdout (``open_stdio``), or with
``--fds R,W`` to serve on two inherited pipe fds (``open_pipes``). Exits 0 once the connection
is closed (stdin EOF, or the other side closed).

Methods:

- ``echo`` -> its params;
- ``sleep {ms}`` -> sleeps (default cancellation behaviour), returns ``{"slept": ms}``;
- ``partial {ms}`` -> sleeps; when cancelled returns ``{"partial": true}``;
- ``fail`` -> raises ``ValueError`` (with a secret in its text that must not leak);
- ``rpc_error`` -> raises ``RpcError(-32001, "custom", {"x": 1})``;
- ``call_back {method, params, detached}`` -> makes that request back to the caller, returns its
  result; ``detached``: from a task of its own that the handler does not cancel (only the
  connection's cascade can);
- ``ignore_cancel {ms}`` -> sleeps; swallows one cancellation, sleeps ~0.3 s more, returns "done";
- ``flood {n}`` -> sends notifications ``note {"seq": 0..n-1}`` back, returns ``{"sent": n}``;
- ``stats`` -> what this side saw (see ``stats`` below).

The notification ``note {"seq": i}`` is counted and checked for order.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import orjson

from acp_driver import Connection, RpcError, current_request
from acp_driver.aio import open_pipes, open_stdio

SECRET = "secret-do-not-leak-4f2a"


class Peer:
    def __init__(self) -> None:
        self.conn = Connection(name="peer", tracer=self.trace)
        self.cancels: list[Any] = []  # requestIds of every $/cancel_request received
        self.started: list[list[Any]] = []  # [method, id] of every handler that started
        self.cancelled: list[Any] = []  # ids of handlers that saw CancelledError
        self.notes = 0
        self.notes_out_of_order = 0
        conn = self.conn
        for name in ("echo", "sleep", "partial", "fail", "rpc_error", "call_back", "ignore_cancel", "flood"):
            conn.on_request(name, self._started(getattr(self, name)))
        conn.on_request("stats", self.stats)
        conn.on_notification("note", self.note)

    def trace(self, direction: str, data: bytes) -> None:
        if direction != "in":
            return
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if type(msg) is dict and msg.get("method") == "$/cancel_request":
            params = msg.get("params")
            self.cancels.append(params.get("requestId") if type(params) is dict else None)

    def _started(self, handler: Any) -> Any:
        async def wrapper(params: Any) -> Any:
            ctx = current_request()
            assert ctx is not None
            self.started.append([ctx.method, ctx.id])
            try:
                return await handler(params)
            except asyncio.CancelledError:
                self.cancelled.append(ctx.id)
                raise

        return wrapper

    # ------------------------------------------------------------------ methods

    async def echo(self, params: Any) -> Any:
        return params

    async def sleep(self, params: Any) -> Any:
        ms = (params or {}).get("ms", 1000)
        await asyncio.sleep(ms / 1000)
        return {"slept": ms}

    async def partial(self, params: Any) -> Any:
        try:
            await asyncio.sleep((params or {}).get("ms", 10_000) / 1000)
        except asyncio.CancelledError:
            return {"partial": True}
        return {"partial": False}

    async def fail(self, params: Any) -> Any:
        raise ValueError(f"{SECRET}: this text must stay inside the peer")

    async def rpc_error(self, params: Any) -> Any:
        raise RpcError(-32001, "custom", {"x": 1})

    async def call_back(self, params: Any) -> Any:
        request = self.conn.request(params["method"], params.get("params"))
        if params.get("detached"):
            return await asyncio.shield(asyncio.ensure_future(request))
        return await request

    async def ignore_cancel(self, params: Any) -> Any:
        try:
            await asyncio.sleep((params or {}).get("ms", 10_000) / 1000)
        except asyncio.CancelledError:
            pass  # swallowed once
        await asyncio.sleep(0.3)
        return "done"

    async def flood(self, params: Any) -> Any:
        n = params["n"]
        for seq in range(n):
            await self.conn.notify("note", {"seq": seq})
        return {"sent": n}

    async def stats(self, params: Any) -> Any:
        incoming, outgoing = self.conn.in_flight
        return {
            "incoming": incoming - 1,  # this stats request itself is not counted
            "outgoing": outgoing,
            "notifications": self.notes,
            "notifications_out_of_order": self.notes_out_of_order,
            "cancels": self.cancels,
            "started": self.started,
            "cancelled": self.cancelled,
            "violations": self.conn.violations,
        }

    def note(self, params: Any) -> None:
        if params.get("seq") != self.notes:
            self.notes_out_of_order += 1
        self.notes += 1


async def main(argv: list[str]) -> int:
    peer = Peer()
    if len(argv) == 2 and argv[0] == "--fds":
        read_fd, write_fd = (int(fd) for fd in argv[1].split(","))
        await open_pipes(
            peer.conn, os.fdopen(read_fd, "rb", buffering=0), os.fdopen(write_fd, "wb", buffering=0)
        )
    else:
        await open_stdio(peer.conn)
    await peer.conn.wait_closed()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
