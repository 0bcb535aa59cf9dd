"""The ceiling's agent: a minimal asyncio + orjson NDJSON peer, no framework.

It reads lines from stdin, routes them by hand and writes coalesced replies to stdout. It speaks
just enough ACP for the benchmark: ``initialize``, ``session/new``, ``session/prompt`` (prompt
lines ``/stream N MS`` and ``/sleep MS``), ``session/cancel``, ``$/cancel_request`` and the
extension methods ``_bench/echo`` (returns its params) and ``_bench/sleep`` ``{"ms": N}``.
No validation, no ledger: an upper bound on what Python can do over these pipes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:  # annotations only: the ceiling imports nothing it does not run
    from collections.abc import Callable
    from typing import Any

dumps = orjson.dumps
loads = orjson.loads
# Reads of at most what a pipe holds (64 KiB): asyncio's default 256 KiB costs each read an mmap'd
# buffer (mmap, page faults, munmap). node reads 64 KiB at a time too; acp-driver 32 KiB (its
# parsed read stays in cache: docs/benchmarks.md).
READ_BYTES = 64 * 1024


class Agent(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
        self.loop = loop
        self.done = done
        self.buf = b""
        self.out: list[bytes] = []
        self.flushing = False
        self.wt: asyncio.WriteTransport | None = None
        self.sleeps: dict[object, asyncio.TimerHandle] = {}
        self.turns: dict[str, tuple[object, asyncio.TimerHandle | None]] = {}
        self.sessions = 0

    # output ---------------------------------------------------------------
    def send(self, msg: object) -> None:
        # dumps() + b"\n" (not OPT_APPEND_NEWLINE): a right-sized copy; orjson's own output keeps a
        # ~4 KiB buffer (orjson 3.13), which adds up in a queue of thousands of messages.
        self.out.append(dumps(msg) + b"\n")
        if not self.flushing:
            self.flushing = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flushing = False
        if self.out and self.wt is not None:
            self.wt.write(b"".join(self.out))
            self.out.clear()

    # input ----------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        lines = (self.buf + data).split(b"\n") if self.buf else data.split(b"\n")
        self.buf = lines.pop()
        for line in lines:
            if line:
                self.handle(loads(line))

    def eof_received(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof_received()

    def handle(self, msg: dict) -> None:
        method = msg.get("method")
        if method is None:
            return  # a response: we never send requests
        rid = msg.get("id")
        params = msg.get("params") or {}
        if method == "_bench/echo":
            self.send({"jsonrpc": "2.0", "id": rid, "result": params})
        elif method == "_bench/sleep":
            self.sleeps[rid] = self.loop.call_later(params.get("ms", 0) / 1000, self.slept, rid, params)
        elif method == "$/cancel_request":
            target = params.get("requestId")
            handle = self.sleeps.pop(target, None)
            if handle is not None:
                handle.cancel()
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": target,
                        "error": {"code": -32800, "message": "Request cancelled"},
                    }
                )
        elif method == "session/prompt":
            self.prompt(rid, params)
        elif method == "session/cancel":
            sid = params.get("sessionId")
            turn = self.turns.pop(sid, None)
            if turn is not None:
                prid, handle = turn
                if handle is not None:
                    handle.cancel()
                self.send({"jsonrpc": "2.0", "id": prid, "result": {"stopReason": "cancelled"}})
        elif method == "initialize":
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
                }
            )
        elif method == "session/new":
            self.sessions += 1
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": f"s{self.sessions}"}})
        elif rid is not None:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32601, "message": f"Method not found: {method}"},
                }
            )

    def slept(self, rid: object, params: dict) -> None:
        if self.sleeps.pop(rid, None) is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"slept": params.get("ms", 0)}})

    def prompt(self, rid: object, params: dict) -> None:
        self.loop.create_task(self.run_turn(rid, params))

    async def run_turn(self, rid: object, params: dict) -> None:
        sid = params.get("sessionId")
        text = "\n".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
        for line in text.splitlines():
            words = line.split()
            if not words:
                continue
            if words[0] == "/stream":
                n = int(words[1])
                for i in range(n):
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/update",
                            "params": {
                                "sessionId": sid,
                                "update": {
                                    "sessionUpdate": "agent_message_chunk",
                                    "content": {"type": "text", "text": f"chunk {i + 1}/{n}\n"},
                                },
                            },
                        }
                    )
                    if len(self.out) >= 64:  # let the loop flush and read, like any streaming agent
                        await asyncio.sleep(0)
            elif words[0] == "/sleep":
                ms = int(words[1])
                handle = self.loop.call_later(ms / 1000, self.turn_done, sid, rid)
                self.turns[sid] = (rid, handle)
                return
        self.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})

    def turn_done(self, sid: str, rid: object) -> None:
        if self.turns.pop(sid, None) is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})


async def main(make: Callable[[asyncio.AbstractEventLoop, asyncio.Future[None]], Any] | None = None) -> None:
    """Serve the agent ``make(loop, done)`` builds (this module's ``Agent`` by default) on stdio."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    agent = (make or Agent)(loop, done)
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    wt, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, stdout)
    agent.wt = wt
    rt, _ = await loop.connect_read_pipe(lambda: agent, stdin)
    rt.max_size = READ_BYTES  # type: ignore[attr-defined]
    await done
    agent.flush()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
