"""Runner: the official Python SDK's ACP v2 client (``acp.experimental.v2``, 1.0.0rc3) <-> the
agent written with it (``peers/sdk_agent_v2.py``), or the agent the config names (the host-only
v2 rows drive the ceiling's v2 agent).

``v2.connect_to_agent`` over the agent process's pipes; ``conn.prompt`` (answered at insertion),
``conn.cancel_session``. The SDK hands the client typed updates in ``session_update``: the
``AgentMessageChunk`` ones are counted, the idle ``state_update`` ends the turn. The SDK has no
notion of a turn in v2 (nothing waits for the idle, nothing ties a cancel to it): this client
does it, as an SDK user must.
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

from _common import HERE, Report, agent_override, now, parse_config, percentile
from acp.experimental import v2
from acp.experimental.v2 import schema

AGENT = [sys.executable, os.path.join(HERE, "..", "peers", "sdk_agent_v2.py")]
VERSION = importlib.metadata.version("agent-client-protocol")
BUSY_TURN = "/stream 1 0\n/sleep 60000"


class BenchClient:
    """Implements the SDK's v2 ``Client`` protocol: counts chunks, resolves the turn at its idle."""

    def __init__(self) -> None:
        self.chunks = 0
        self.first_chunk: asyncio.Future[None] | None = None
        self.idle: asyncio.Future[str | None] | None = None

    def expect_turn(self) -> None:
        loop = asyncio.get_running_loop()
        self.chunks = 0
        self.first_chunk = loop.create_future()
        self.idle = loop.create_future()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, schema.AgentMessageChunk):
            self.chunks += 1
            if self.first_chunk is not None and not self.first_chunk.done():
                self.first_chunk.set_result(None)
        elif (
            isinstance(update, schema.IdleSessionStateUpdate)
            and self.idle is not None
            and not self.idle.done()
        ):
            self.idle.set_result(update.stop_reason)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main() -> None:
    cfg = parse_config()
    rep = Report(f"sdk-{VERSION}", cfg)
    rep.notes["sdk_version"] = VERSION
    argv = agent_override(cfg) or AGENT
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=64 * 1024 * 1024
    )
    assert process.stdin is not None
    assert process.stdout is not None
    client = BenchClient()
    conn = v2.connect_to_agent(client, process.stdin, process.stdout)
    answer = await conn.initialize(
        protocol_version=v2.PROTOCOL_VERSION,
        info=schema.Implementation(name="bench-sdk-v2-client", version=VERSION),
        capabilities=schema.ClientCapabilities(),
    )
    assert answer.protocol_version == 2, answer
    sid = (await conn.new_session(cwd=tempfile.gettempdir(), mcp_servers=[])).session_id

    def text(t: str) -> list[Any]:
        return [schema.TextContentBlock(type="text", text=t)]

    client.expect_turn()  # warm-up turn, as every v2 runner
    assert client.idle is not None
    await conn.prompt(session_id=sid, prompt=text(f"/stream {cfg['warmup']} 0"))
    await client.idle

    async def stream() -> dict[str, float]:
        n = cfg["stream"]
        client.expect_turn()
        assert client.idle is not None
        t0 = now()
        inserted = await conn.prompt(session_id=sid, prompt=text(f"/stream {n} 0"))
        stop_reason = await client.idle
        elapsed = now() - t0
        assert inserted.message_id, inserted
        assert stop_reason == "end_turn", stop_reason
        rep.work["stream_v2"] = {"updates": client.chunks}
        return {"stream_v2_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        cancelled = 0
        for _ in range(cfg["cancel"]):
            client.expect_turn()
            assert client.first_chunk is not None
            assert client.idle is not None
            await conn.prompt(session_id=sid, prompt=text(BUSY_TURN))  # inserted
            await client.first_chunk  # and busy
            t0 = now()
            await conn.cancel_session(session_id=sid)
            stop_reason = await client.idle
            samples.append((now() - t0) * 1000)
            cancelled += stop_reason == "cancelled"
        rep.work["cancel_v2"] = {"cancelled": cancelled}
        return {"cancel_v2_p50_ms": percentile(samples, 50), "cancel_v2_p99_ms": percentile(samples, 99)}

    await rep.measure("stream_v2", stream)
    await rep.measure("cancel_v2", cancel)
    with contextlib.suppress(Exception):
        await conn.close()
    process.stdin.close()
    await process.wait()
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
