"""Runner: acp-driver's host driver in ACP v2 (``launch(..., protocol=2)``) <-> the reference
agent in v2 (``acp-driver agent --protocol 2``), or the agent the config names (the host-only v2
rows drive the ceiling's v2 agent).

Only the public host API: ``session.prompt``, ``async for update in turn`` (typed updates; the
``agent_message_chunk`` ones are counted), ``await turn``, ``turn.cancel()`` -- which, in v2,
returns when the idle that confirms the cancel has arrived (see ``benchmarks/v2.py``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Report, agent_override, now, parse_config, percentile

from acp_driver.driver import Resolution, launch

AGENT = [sys.executable, "-m", "acp_driver", "agent", "--protocol", "2"]
BUSY_TURN = "/stream 1 0\n/sleep 60000"  # one chunk (the work has started), then busy


async def main() -> None:
    cfg = parse_config()
    rep = Report("acp-driver", cfg)
    agent = await launch(agent_override(cfg) or AGENT, protocol=2)
    assert agent.protocol_version == 2, agent.protocol_version
    session = await agent.new_session(tempfile.gettempdir())
    await session.prompt(f"/stream {cfg['warmup']} 0")  # warm-up turn, as every v2 runner

    async def stream() -> dict[str, float]:
        n = cfg["stream"]
        t0 = now()
        turn = session.prompt(f"/stream {n} 0")
        chunks = 0
        async for update in turn:
            chunks += update.kind == "agent_message_chunk"
        result = await turn  # resolved at the idle
        elapsed = now() - t0
        assert result.stop_reason == "end_turn", result
        rep.work["stream_v2"] = {"updates": chunks}
        return {"stream_v2_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        cancelled = 0
        for _ in range(cfg["cancel"]):
            turn = session.prompt(BUSY_TURN)
            async for update in turn:  # the user message, then the work's first chunk
                if update.kind == "agent_message_chunk":
                    break
            assert turn.prompt_answer is not None
            await asyncio.wait({turn.prompt_answer})  # inserted (answered {messageId})
            t0 = now()
            outcome = await turn.cancel()  # returns at the idle
            samples.append((now() - t0) * 1000)
            result = await turn
            cancelled += (
                result.stop_reason == "cancelled"
                and outcome.resolution is Resolution.CANCELLED
                and outcome.resolved_by == "session_cancel"
            )
        rep.work["cancel_v2"] = {"cancelled": cancelled}
        return {"cancel_v2_p50_ms": percentile(samples, 50), "cancel_v2_p99_ms": percentile(samples, 99)}

    await rep.measure("stream_v2", stream)
    await rep.measure("cancel_v2", cancel)
    await agent.shutdown()
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
