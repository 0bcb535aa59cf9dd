"""Runner (e): the ceiling. A minimal asyncio + orjson NDJSON client <-> the minimal agent
(``peers/ceiling_agent.py``) over the same kind of pipes: no framework, no validation, no ledger
beyond a dict of futures. An upper bound for any Python implementation on this machine.

The least work per request: each request is a bare future in that dict (no task, no coroutine),
writes are coalesced once per loop iteration, lines are parsed and routed by hand. With
``agent``/``echo``/``sleep`` in the config it drives another agent (the agent-only rows).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import orjson
from _common import (
    CEILING_AGENT,
    ECHO_PARAMS,
    TRACING,
    Report,
    agent_override,
    host_rss,
    median,
    mem_checkpoint,
    now,
    parse_config,
    percentile,
    rss_mib,
)

AGENT = [sys.executable, CEILING_AGENT]
dumps = orjson.dumps
loads = orjson.loads
# Reads of at most what a pipe holds (64 KiB): asyncio's default 256 KiB costs each read an mmap'd
# buffer (mmap, page faults, munmap). node reads 64 KiB at a time too; acp-driver 32 KiB (its
# parsed read stays in cache), which gives this side nothing (measured: docs/benchmarks.md).
READ_BYTES = 64 * 1024


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")


class Client(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buf = b""
        self.out: list[bytes] = []
        self.flushing = False
        self.wt: asyncio.WriteTransport | None = None
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.on_update: Callable[[dict[str, Any]], None] | None = None
        self.on_response: Callable[[dict[str, Any]], None] | None = None
        self.eof: asyncio.Future[None] = loop.create_future()

    def send(self, msg: object) -> None:
        self.out.append(dumps(msg) + b"\n")  # right-sized (see peers/ceiling_agent.py)
        if not self.flushing:
            self.flushing = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flushing = False
        if self.out and self.wt is not None:
            self.wt.write(b"".join(self.out))
            self.out.clear()

    def request_future(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        self.next_id += 1
        rid = self.next_id
        fut = self.loop.create_future()
        self.pending[rid] = fut
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid, fut

    async def request(self, method: str, params: Any) -> Any:
        rid, fut = self.request_future(method, params)
        try:
            return await fut
        finally:
            self.pending.pop(rid, None)

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def data_received(self, data: bytes) -> None:
        lines = (self.buf + data).split(b"\n") if self.buf else data.split(b"\n")
        self.buf = lines.pop()
        for line in lines:
            if not line:
                continue
            msg = loads(line)
            method = msg.get("method")
            if method is not None:
                if method == "session/update" and self.on_update is not None:
                    self.on_update(msg["params"])
                continue
            if self.on_response is not None:
                self.on_response(msg)
            fut = self.pending.pop(msg.get("id"), None)
            if fut is None or fut.done():
                continue
            if "error" in msg:
                fut.set_exception(RpcError(msg["error"]))
            else:
                fut.set_result(msg.get("result"))

    def eof_received(self) -> None:
        if not self.eof.done():
            self.eof.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof_received()


async def connect(argv: list[str]) -> tuple[subprocess.Popen[bytes], Client]:
    """Start the agent ``argv`` and the client on its pipes (no ``initialize`` yet)."""
    loop = asyncio.get_running_loop()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # noqa: ASYNC220
    client = Client(loop)
    assert proc.stdin is not None
    assert proc.stdout is not None
    wt, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, proc.stdin)
    client.wt = wt
    rt, _ = await loop.connect_read_pipe(lambda: client, proc.stdout)
    rt.max_size = READ_BYTES  # type: ignore[attr-defined]
    return proc, client


async def start() -> tuple[subprocess.Popen[bytes], Client]:
    proc, client = await connect(AGENT)
    await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return proc, client


async def stop(proc: subprocess.Popen[bytes], client: Client) -> None:
    client.flush()
    assert client.wt is not None
    client.wt.close()
    await client.eof
    await asyncio.to_thread(proc.wait)


async def main() -> None:
    global AGENT
    cfg = parse_config()
    rep = Report("ceiling", cfg)
    AGENT = agent_override(cfg) or AGENT
    loop = asyncio.get_running_loop()
    proc, client = await start()
    rep.results["rss_host_idle_mib"] = host_rss()
    rep.results["rss_agent_idle_mib"] = rss_mib(proc.pid)
    sid = (await client.request("session/new", {"cwd": tempfile.gettempdir(), "mcpServers": []}))["sessionId"]
    echo = cfg.get("echo", "_bench/echo")
    sleep = cfg.get("sleep", "_bench/sleep")
    req = client.request

    for _ in range(cfg["warmup"]):
        await req(echo, ECHO_PARAMS)
    await asyncio.gather(*(req(echo, ECHO_PARAMS) for _ in range(cfg["warmup"])))

    async def seq() -> dict[str, float]:
        n = cfg["seq"]
        answered = 0
        t0 = now()
        for _ in range(n):
            answer = await req(echo, ECHO_PARAMS)
            answered += answer == ECHO_PARAMS
        elapsed = now() - t0
        rep.work["seq"] = {"answered": answered}
        return {"seq_rps": n / elapsed}

    async def concurrent(workload: str, key: str, size: int, rounds: int) -> dict[str, float]:
        send = client.request_future
        answered = 0
        t0 = now()
        for _ in range(rounds):
            # Bare futures: the least work a caller can do (no task, no coroutine per request).
            calls = [send(echo, ECHO_PARAMS)[1] for _ in range(size)]
            if TRACING:
                await asyncio.sleep(0)
                mem_checkpoint(f"{key}_in_flight", rep.notes)
            answers = await asyncio.gather(*calls)
            answered += answers.count(ECHO_PARAMS)
        elapsed = now() - t0
        rep.work[workload] = {"answered": answered}
        return {key: size * rounds / elapsed}

    def prompt(text: str) -> asyncio.Future[Any]:
        return loop.create_task(
            req("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        )

    async def stream() -> dict[str, float]:
        n = cfg["stream"]
        count = 0

        def on_update(params: dict[str, Any]) -> None:
            nonlocal count
            if params["update"]["sessionUpdate"] == "agent_message_chunk":
                count += 1

        client.on_update = on_update
        t0 = now()
        result = await prompt(f"/stream {n} 0")
        elapsed = now() - t0
        client.on_update = None
        assert result["stopReason"] == "end_turn", result
        rep.work["stream"] = {"updates": count}
        return {"stream_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        cancelled = 0
        for _ in range(cfg["cancel"]):
            started = loop.create_future()
            client.on_update = lambda _p, f=started: f.done() or f.set_result(None)
            turn = prompt("/stream 1 0\n/sleep 60000")
            await started
            t0 = now()
            client.notify("session/cancel", {"sessionId": sid})
            result = await turn
            samples.append((now() - t0) * 1000)
            cancelled += result["stopReason"] == "cancelled"
        client.on_update = None
        rep.work["cancel"] = {"cancelled": cancelled}
        return {"cancel_p50_ms": percentile(samples, 50), "cancel_p99_ms": percentile(samples, 99)}

    async def storm() -> dict[str, float | bool]:
        n = cfg["storm"]
        futs = [client.request_future(sleep, {"ms": 60000}) for _ in range(n)]
        await req(echo, {"barrier": True})  # answered after the agent read all n
        answered: set[Any] = set()
        all_answered = loop.create_future()

        def on_response(msg: dict[str, Any]) -> None:
            if msg.get("error", {}).get("code") == -32800:
                answered.add(msg.get("id"))
                if len(answered) == n and not all_answered.done():
                    all_answered.set_result(None)

        client.on_response = on_response
        t0 = now()
        for rid, fut in futs:  # the callers give up: cancel the future, ask the agent to stop
            fut.cancel()
            client.notify("$/cancel_request", {"requestId": rid})
        # Each entry stays in the ledger until its answer arrives (data_received pops it).
        await asyncio.wait_for(all_answered, 30)
        elapsed = now() - t0
        client.on_response = None
        rep.work["storm"] = {"ids_answered": len(answered & {rid for rid, _f in futs})}
        return {"storm_ms": elapsed * 1000, "storm_ledger_empty": not client.pending}

    await rep.measure("seq", seq)
    await rep.measure(
        "conc1k", lambda: concurrent("conc1k", "conc1k_rps", cfg["conc1k"], cfg["conc1k_rounds"])
    )
    await rep.measure(
        "conc10k", lambda: concurrent("conc10k", "conc10k_rps", cfg["conc10k"], cfg["conc10k_rounds"])
    )
    await rep.measure("stream", stream)
    await rep.measure("cancel", cancel)
    await rep.measure("storm", storm)
    rep.results["rss_host_load_mib"] = host_rss()
    rep.results["rss_agent_load_mib"] = rss_mib(proc.pid)
    await stop(proc, client)

    async def cold() -> dict[str, float]:
        samples = []
        for _ in range(cfg["cold"]):
            t0 = now()
            p, c = await start()
            samples.append((now() - t0) * 1000)
            await stop(p, c)
        return {"cold_start_ms": median(samples)}

    await rep.measure("cold", cold)
    rep.not_applicable("ignored", "no cancel ladder")
    rep.not_applicable("hang", "no cancel ladder")
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
