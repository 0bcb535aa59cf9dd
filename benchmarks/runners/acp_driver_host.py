"""Runner (a): acp-driver's host driver <-> acp-driver's reference agent, over real pipes.

Uses only the public host API: ``launch``, ``agent.request``, ``agent.new_session``,
``session.prompt``, ``async for update in turn``, ``await turn``, ``turn.cancel()``; the cancel
storm uses ``agent.connection.request(..., cancel_grace=...)`` so each cancelled caller waits for
the agent's answer, then checks ``agent.connection.in_flight == (0, 0)``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    ECHO_PARAMS,
    TRACING,
    Report,
    host_rss,
    median,
    mem_checkpoint,
    now,
    parse_config,
    percentile,
    rss_mib,
)

from acp_driver.aio import ProcessGroup, supervision_available
from acp_driver.core import Outcome
from acp_driver.driver import LadderPolicy, launch

AGENT = [sys.executable, "-m", "acp_driver", "agent"]
ECHO = "_acp_driver/echo"
SLEEP = "_acp_driver/sleep"
BUSY_TURN = "/stream 1 0\n/sleep 60000"  # one update (the turn has started), then busy


async def main() -> None:
    cfg = parse_config()
    rep = Report("acp-driver", cfg)
    cwd = tempfile.gettempdir()
    agent = await launch(AGENT)
    rep.results["rss_host_idle_mib"] = host_rss()
    rep.results["rss_agent_idle_mib"] = rss_mib(agent.process.pid)
    session = await agent.new_session(cwd)

    for _ in range(cfg["warmup"]):
        await agent.request(ECHO, ECHO_PARAMS)
    await asyncio.gather(*(agent.request(ECHO, ECHO_PARAMS) for _ in range(cfg["warmup"])))

    async def seq() -> dict[str, float]:
        n = cfg["seq"]
        t0 = now()
        for _ in range(n):
            await agent.request(ECHO, ECHO_PARAMS)
        return {"seq_rps": n / (now() - t0)}

    async def concurrent(key: str, size: int, rounds: int) -> dict[str, float]:
        t0 = now()
        for _ in range(rounds):
            calls = [asyncio.ensure_future(agent.request(ECHO, ECHO_PARAMS)) for _ in range(size)]
            if TRACING:
                await asyncio.sleep(0)
                mem_checkpoint(f"{key}_in_flight", rep.notes)
            answers = await asyncio.gather(*calls)
            assert len(answers) == size
            assert answers[-1] == ECHO_PARAMS
        return {key: size * rounds / (now() - t0)}

    async def stream() -> dict[str, float]:
        n = cfg["stream"]
        t0 = now()
        turn = session.prompt(f"/stream {n} 0")
        count = 0
        async for _update in turn:
            count += 1
        result = await turn
        elapsed = now() - t0
        assert result.stop_reason == "end_turn", result
        assert count == n, (count, n)
        return {"stream_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        for _ in range(cfg["cancel"]):
            turn = session.prompt(BUSY_TURN)
            await turn.__anext__()  # the agent is in the turn now
            t0 = now()
            await turn.cancel()
            samples.append((now() - t0) * 1000)
            result = await turn
            assert result.stop_reason == "cancelled", result
        return {"cancel_p50_ms": percentile(samples, 50), "cancel_p99_ms": percentile(samples, 99)}

    async def storm() -> dict[str, float | bool]:
        n = cfg["storm"]
        conn = agent.connection
        rids: list[int] = []
        loop = asyncio.get_running_loop()
        violations_before = conn.violations
        tasks = [
            loop.create_task(conn.request(SLEEP, {"ms": 60000}, cancel_grace=30.0, on_sent=rids.append))
            for _ in range(n)
        ]
        await asyncio.sleep(0)  # every caller has queued its request
        await agent.request(ECHO, {"barrier": True})  # answered after the agent read all n
        assert conn.in_flight == (0, n), conn.in_flight
        mem_checkpoint("storm_in_flight", rep.notes)
        t0 = now()
        for task in tasks:
            task.cancel()
        if TRACING:
            await asyncio.sleep(0)
            mem_checkpoint("storm_cancelled", rep.notes)
        await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = now() - t0
        stones = [conn.core.outgoing.tombstone(r) for r in rids]
        checked = [s for s in stones if s is not None]
        answered = sum(1 for s in checked if s.outcome is Outcome.CANCELLED)
        rep.notes["storm_answered_-32800_of_checked"] = f"{answered}/{len(checked)} (tombstones kept)"
        empty = conn.in_flight == (0, 0)
        assert empty, conn.in_flight
        assert answered == len(checked), rep.notes
        rep.notes["storm_violations"] = conn.violations - violations_before
        # The same storm through the default host API (agent.request: cancel_grace 0): the callers
        # are released at once and the late -32800 answers must be recognised (tombstones).
        tasks = [asyncio.ensure_future(agent.request(SLEEP, {"ms": 60000})) for _ in range(n)]
        await asyncio.sleep(0)
        await agent.request(ECHO, {"barrier": True})
        before = conn.violations
        t1 = now()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        released = now() - t1
        await agent.request(ECHO, {"barrier": True})  # answered after every late -32800
        rep.notes["storm_default_api"] = (
            f"callers released in {released * 1000:.1f} ms; late answers flagged as peer violations: "
            f"{conn.violations - before} of {n}; in_flight {conn.in_flight}"
        )
        return {"storm_ms": elapsed * 1000, "storm_ledger_empty": empty}

    await rep.measure("seq", seq)
    await rep.measure("conc1k", lambda: concurrent("conc1k_rps", cfg["conc1k"], cfg["conc1k_rounds"]))
    await rep.measure("conc10k", lambda: concurrent("conc10k_rps", cfg["conc10k"], cfg["conc10k_rounds"]))
    await rep.measure("stream", stream)
    await rep.measure("cancel", cancel)
    await rep.measure("storm", storm)
    rep.results["rss_host_load_mib"] = host_rss()
    rep.results["rss_agent_load_mib"] = rss_mib(agent.process.pid)
    await agent.shutdown()

    async def cold_start(supervise: bool) -> float:
        ProcessGroup.supervise_default = supervise
        try:
            t0 = now()
            a = await launch(AGENT)
            elapsed = (now() - t0) * 1000
        finally:
            ProcessGroup.supervise_default = True
        assert a.process.supervised is (supervise and supervision_available())
        await a.shutdown()
        return elapsed

    async def cold() -> dict[str, float]:
        # Interleaved: with the supervisor (the default), then without it, same process.
        supervised, direct = [], []
        for _ in range(cfg["cold"]):
            supervised.append(await cold_start(True))
            direct.append(await cold_start(False))
        if not supervision_available():
            rep.notes["supervisor"] = "not available on this platform: both cold starts are direct"
        return {
            "cold_start_ms": median(supervised),
            "cold_start_direct_ms": median(direct),
            "supervisor_cost_ms": median([s - d for s, d in zip(supervised, direct, strict=True)]),
        }

    async def ignored() -> dict[str, float | str]:
        budget = cfg["ignored_budget"]
        a = await launch([*AGENT, "--behavior", "ignore-cancel"], ladder=LadderPolicy(budget=budget))
        try:
            s = await a.new_session(cwd)
            turn = s.prompt(BUSY_TURN)
            await turn.__anext__()
            t0 = now()
            outcome = await turn.cancel()
            elapsed = now() - t0
        finally:
            await a.shutdown()
        rep.notes["ignored_resolution"] = (
            f"{outcome.resolution.value if outcome.resolution else None} by {outcome.resolved_by}; steps {','.join(outcome.steps)}"
        )
        return {"ignored_s": elapsed, "ignored_budget_s": budget}

    await rep.measure("cold", cold)
    await rep.measure("ignored", ignored)
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
