"""Runners (b) and (c): the official Python SDK's ``ClientSideConnection`` <-> an agent written with
the same SDK (``peers/sdk_agent.py``), spawned with ``acp.stdio.spawn_agent_process``.

Run with the interpreter of the SDK's venv (0.12.1 or 1.0.0rc3); the version is read from the
installed distribution. Updates are counted in the client's ``session_update`` callback.

The SDK's requests are coroutines (``conn.ext_method``): ``gather`` wraps each in a Task, which
is what an SDK user gets. With ``agent`` in the config it drives another agent (the host-only rows
drive the ceiling agent, started with this interpreter: the SDK venvs have orjson).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    ECHO_PARAMS,
    Report,
    agent_override,
    host_rss,
    median,
    now,
    parse_config,
    percentile,
    rss_mib,
)
from acp import PROTOCOL_VERSION
from acp.schema import AgentMessageChunk, TextContentBlock
from acp.stdio import spawn_agent_process

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = [sys.executable, os.path.join(HERE, "..", "peers", "sdk_agent.py")]
VERSION = importlib.metadata.version("agent-client-protocol")


class BenchClient:
    """The host side: counts ``agent_message_chunk`` updates in ``session_update``."""

    def __init__(self) -> None:
        self.count = 0
        self.started: asyncio.Future[None] | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            self.count += 1
            started = self.started
            if started is not None and not started.done():
                started.set_result(None)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@contextlib.asynccontextmanager
async def connected(client: BenchClient) -> Any:
    async with spawn_agent_process(client, *AGENT, transport_kwargs={"stderr": None}) as (
        conn,
        proc,
    ):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn, proc


def text(t: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=t)]


async def main() -> None:
    global AGENT
    cfg = parse_config()
    rep = Report(f"sdk-{VERSION}", cfg)
    AGENT = agent_override(cfg) or AGENT
    rep.notes["sdk_version"] = VERSION
    loop = asyncio.get_running_loop()
    client = BenchClient()
    cancel_request = hasattr(__import__("acp.connection", fromlist=["x"]).Connection, "_send_cancel_request")

    async with connected(client) as (conn, proc):
        rep.results["rss_host_idle_mib"] = host_rss()
        rep.results["rss_agent_idle_mib"] = rss_mib(proc.pid)
        sid = (await conn.new_session(cwd=tempfile.gettempdir(), mcp_servers=[])).session_id
        ext = conn.ext_method
        echo = "bench/echo"

        for _ in range(cfg["warmup"]):
            await ext(echo, ECHO_PARAMS)
        await asyncio.gather(*(ext(echo, ECHO_PARAMS) for _ in range(cfg["warmup"])))

        async def seq() -> dict[str, float]:
            n = cfg["seq"]
            t0 = now()
            answered = 0
            for _ in range(n):
                answer = await ext(echo, ECHO_PARAMS)
                answered += answer == ECHO_PARAMS
            elapsed = now() - t0
            rep.work["seq"] = {"answered": answered}
            return {"seq_rps": n / elapsed}

        async def concurrent(workload: str, key: str, size: int, rounds: int) -> dict[str, float]:
            answered = 0
            t0 = now()
            for _ in range(rounds):
                answers = await asyncio.gather(*(ext(echo, ECHO_PARAMS) for _ in range(size)))
                answered += answers.count(ECHO_PARAMS)
            elapsed = now() - t0
            rep.work[workload] = {"answered": answered}
            return {key: size * rounds / elapsed}

        async def stream() -> dict[str, float]:
            n = cfg["stream"]
            client.count = 0
            t0 = now()
            result = await conn.prompt(session_id=sid, prompt=text(f"/stream {n} 0"))
            elapsed = now() - t0
            assert result.stop_reason == "end_turn", result
            rep.work["stream"] = {"updates": client.count}
            return {"stream_ups": n / elapsed}

        async def cancel() -> dict[str, float]:
            samples = []
            cancelled = 0
            for _ in range(cfg["cancel"]):
                client.started = loop.create_future()
                turn = loop.create_task(conn.prompt(session_id=sid, prompt=text("/stream 1 0\n/sleep 60000")))
                await client.started
                t0 = now()
                await conn.cancel(session_id=sid)
                result = await turn
                samples.append((now() - t0) * 1000)
                cancelled += result.stop_reason == "cancelled"
            client.started = None
            rep.work["cancel"] = {"cancelled": cancelled}
            return {"cancel_p50_ms": percentile(samples, 50), "cancel_p99_ms": percentile(samples, 99)}

        async def storm() -> dict[str, float | bool]:
            n = cfg["storm"]
            inner = conn._conn  # the SDK's JSON-RPC Connection (to watch the wire)
            first = inner._next_request_id
            tasks = [loop.create_task(ext("bench/sleep", {"ms": 60000})) for _ in range(n)]
            await asyncio.sleep(0)
            await ext(echo, {"barrier": True})
            waiting = set(range(first, first + n))
            all_answered = loop.create_future()

            def observe(event: Any) -> None:
                msg = event.message
                if (
                    event.direction.value == "incoming"
                    and "method" not in msg
                    and (msg.get("error") or {}).get("code") == -32800
                ):
                    waiting.discard(msg.get("id"))
                    if not waiting and not all_answered.done():
                        all_answered.set_result(None)

            inner.add_observer(observe)
            t0 = now()
            for task in tasks:  # each cancelled caller sends $/cancel_request (1.0.0rc3)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.wait_for(all_answered, 30)
            elapsed = now() - t0
            inner._observers.remove(observe)
            rep.work["storm"] = {"ids_answered": n - len(waiting)}
            return {"storm_ms": elapsed * 1000, "storm_ledger_empty": not inner._pending}

        await rep.measure("seq", seq)
        await rep.measure(
            "conc1k", lambda: concurrent("conc1k", "conc1k_rps", cfg["conc1k"], cfg["conc1k_rounds"])
        )
        await rep.measure(
            "conc10k", lambda: concurrent("conc10k", "conc10k_rps", cfg["conc10k"], cfg["conc10k_rounds"])
        )
        await rep.measure("stream", stream)
        await rep.measure("cancel", cancel)
        if cancel_request:
            await rep.measure("storm", storm)
        else:
            rep.not_applicable("storm", f"SDK {VERSION} does not send or honour $/cancel_request")
        rep.results["rss_host_load_mib"] = host_rss()
        rep.results["rss_agent_load_mib"] = rss_mib(proc.pid)

    async def cold() -> dict[str, float]:
        samples = []
        for _ in range(cfg["cold"]):
            t0 = now()
            async with connected(BenchClient()):
                samples.append((now() - t0) * 1000)
        return {"cold_start_ms": median(samples)}

    await rep.measure("cold", cold)
    rep.not_applicable("ignored", "no cancel ladder in the SDK")
    rep.not_applicable("hang", "no cancel ladder in the SDK")
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
