"""Runner: the ceiling in ACP v2. ``ceiling_host.py``'s minimal client (a dict of bare futures,
writes coalesced once per loop iteration, lines routed by hand) <-> ``peers/ceiling_agent_v2.py``,
or the agent the config names (the agent-only v2 rows: the ceiling host drives each v2 agent).

The least v2 protocol work a host does for the two v2 workloads (see ``benchmarks/v2.py``):

- ``stream_v2``: send the prompt, count the ``agent_message_chunk`` updates in the read callback,
  stop at the idle ``state_update``; its ``stopReason`` must be ``end_turn``.
- ``cancel_v2``: a busy turn (its answer ``{messageId}`` and its first chunk arrived), then
  ``session/cancel``: the time until the idle ``state_update``; it counts only with ``stopReason``
  ``cancelled``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import HERE, Report, agent_override, now, parse_config, percentile
from ceiling_host import Client, connect

AGENT = [sys.executable, os.path.join(HERE, "..", "peers", "ceiling_agent_v2.py")]
BUSY_TURN = "/stream 1 0\n/sleep 60000"


class Turn:
    """What the read callback saw of one v2 turn: its chunks and its idle."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.chunks = 0
        self.first_chunk: asyncio.Future[None] = loop.create_future()
        self.idle: asyncio.Future[str | None] = loop.create_future()

    def __call__(self, params: dict[str, Any]) -> None:
        update = params["update"]
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk":
            self.chunks += 1
            if not self.first_chunk.done():
                self.first_chunk.set_result(None)
        elif kind == "state_update" and update.get("state") == "idle" and not self.idle.done():
            self.idle.set_result(update.get("stopReason"))


async def start(argv: list[str]) -> tuple[subprocess.Popen[bytes], Client]:
    proc, client = await connect(argv)
    answer = await client.request(
        "initialize",
        {"protocolVersion": 2, "info": {"name": "ceiling-v2", "version": "0"}, "capabilities": {}},
    )
    if answer.get("protocolVersion") != 2:
        raise RuntimeError(f"the agent did not answer ACP v2: {answer}")
    return proc, client


async def main() -> None:
    cfg = parse_config()
    rep = Report("ceiling", cfg)
    loop = asyncio.get_running_loop()
    proc, client = await start(agent_override(cfg) or AGENT)
    sid = (await client.request("session/new", {"cwd": tempfile.gettempdir(), "mcpServers": []}))["sessionId"]

    def prompt(text: str) -> asyncio.Future[Any]:
        return client.request_future(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        )[1]

    warmup = client.on_update = Turn(loop)  # warm-up turn, as every v2 runner
    await prompt(f"/stream {cfg['warmup']} 0")
    await warmup.idle

    async def stream() -> dict[str, float]:
        n = cfg["stream"]
        turn = client.on_update = Turn(loop)
        t0 = now()
        answer = prompt(f"/stream {n} 0")
        stop_reason = await turn.idle
        elapsed = now() - t0
        client.on_update = None
        assert "messageId" in await answer, answer
        assert stop_reason == "end_turn", stop_reason
        rep.work["stream_v2"] = {"updates": turn.chunks}
        return {"stream_v2_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        cancelled = 0
        for _ in range(cfg["cancel"]):
            turn = client.on_update = Turn(loop)
            await prompt(BUSY_TURN)  # inserted
            await turn.first_chunk  # and busy
            t0 = now()
            client.notify("session/cancel", {"sessionId": sid})
            stop_reason = await turn.idle
            samples.append((now() - t0) * 1000)
            cancelled += stop_reason == "cancelled"
        client.on_update = None
        rep.work["cancel_v2"] = {"cancelled": cancelled}
        return {"cancel_v2_p50_ms": percentile(samples, 50), "cancel_v2_p99_ms": percentile(samples, 99)}

    await rep.measure("stream_v2", stream)
    await rep.measure("cancel_v2", cancel)
    client.flush()
    assert client.wt is not None
    client.wt.close()
    await client.eof
    await asyncio.to_thread(proc.wait)
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
