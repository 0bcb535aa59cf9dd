"""Runner (a): acp-driver's host driver <-> acp-driver's reference agent, over real pipes.

Uses only the public host API: ``launch``, ``agent.request`` (a bare future per request, no
task), ``agent.new_session``, ``session.prompt``, ``async for update in turn``, ``await turn``,
``turn.cancel()``. The cancel storm cancels the futures of ``agent.request`` (the default API:
``$/cancel_request`` goes out, the request is abandoned) and counts the agent's ``-32800`` answers
at the wire with ``launch(tracer=...)``, on a connection of its own so the other workloads run
without a tracer. With ``agent``/``echo``/``sleep`` in the config it drives another agent (the
host-only rows drive the ceiling agent).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
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

from acp_driver.aio import ProcessGroup, supervision_available
from acp_driver.driver import LadderPolicy, launch

AGENT = [sys.executable, "-m", "acp_driver", "agent"]
ECHO = "_acp_driver/echo"
SLEEP = "_acp_driver/sleep"
BUSY_TURN = "/stream 1 0\n/sleep 60000"  # one update (the turn has started), then busy


async def main() -> None:
    cfg = parse_config()
    rep = Report("acp-driver", cfg)
    cwd = tempfile.gettempdir()
    own = agent_override(cfg) is None
    argv = agent_override(cfg) or AGENT
    echo = cfg.get("echo", ECHO)
    sleep = cfg.get("sleep", SLEEP)
    agent = await launch(argv, protocol=1)
    rep.results["rss_host_idle_mib"] = host_rss()
    rep.results["rss_agent_idle_mib"] = rss_mib(agent.process.pid)
    session = await agent.new_session(cwd)

    for _ in range(cfg["warmup"]):
        await agent.request(echo, ECHO_PARAMS)
    await asyncio.gather(*(agent.request(echo, ECHO_PARAMS) for _ in range(cfg["warmup"])))

    async def seq() -> dict[str, float]:
        n = cfg["seq"]
        answered = 0
        t0 = now()
        for _ in range(n):
            answer = await agent.request(echo, ECHO_PARAMS)
            answered += answer == ECHO_PARAMS
        elapsed = now() - t0
        rep.work["seq"] = {"answered": answered}
        return {"seq_rps": n / elapsed}

    async def concurrent(workload: str, key: str, size: int, rounds: int) -> dict[str, float]:
        request = agent.request
        answered = 0
        t0 = now()
        for _ in range(rounds):
            # agent.request returns a bare future: no task per request (same as the ceiling).
            calls = [request(echo, ECHO_PARAMS) for _ in range(size)]
            if TRACING:
                await asyncio.sleep(0)
                mem_checkpoint(f"{key}_in_flight", rep.notes)
            answers = await asyncio.gather(*calls)
            answered += answers.count(ECHO_PARAMS)
        elapsed = now() - t0
        rep.work[workload] = {"answered": answered}
        return {key: size * rounds / elapsed}

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
        rep.work["stream"] = {"updates": count}
        return {"stream_ups": n / elapsed}

    async def cancel() -> dict[str, float]:
        samples = []
        cancelled = 0
        for _ in range(cfg["cancel"]):
            turn = session.prompt(BUSY_TURN)
            await turn.__anext__()  # the agent is in the turn now
            t0 = now()
            await turn.cancel()
            samples.append((now() - t0) * 1000)
            result = await turn
            cancelled += result.stop_reason == "cancelled"
        rep.work["cancel"] = {"cancelled": cancelled}
        return {"cancel_p50_ms": percentile(samples, 50), "cancel_p99_ms": percentile(samples, 99)}

    async def storm() -> dict[str, float | bool]:
        n = cfg["storm"]
        loop = asyncio.get_running_loop()
        lines: list[bytes] = []
        all_answered = loop.create_future()
        watching = False

        def tracer(direction: str, data: bytes) -> None:
            # At the wire, before any parsing by the library: keep the -32800 answers (checked below).
            if watching and direction == "in" and b"-32800" in data:
                lines.append(data)
                if len(lines) >= n and not all_answered.done():
                    all_answered.set_result(None)

        a = await launch(argv, tracer=tracer, protocol=1)
        try:
            conn = a.connection
            futs = [a.request(sleep, {"ms": 60000}) for _ in range(n)]
            await a.request(echo, {"barrier": True})  # answered after the agent read all n
            assert conn.in_flight == (0, n), conn.in_flight
            mem_checkpoint("storm_in_flight", rep.notes)
            violations = conn.violations
            watching = True
            t0 = now()
            for fut in futs:  # the callers give up: $/cancel_request goes out for each
                fut.cancel()
            if TRACING:
                await asyncio.sleep(0)
                mem_checkpoint("storm_cancelled", rep.notes)
            await asyncio.wait_for(all_answered, 30)
            elapsed = now() - t0
            watching = False
            await a.request(echo, {"barrier": True})  # every answer read has been handled
            ids = {json.loads(line)["id"] for line in lines}
            rep.work["storm"] = {"ids_answered": len(ids)}
            late = conn.violations - violations
            rep.notes["storm_late_answers_flagged_as_violations"] = late
            # The self-check: after every answer, nothing left in the ledger, none mistaken.
            empty = conn.in_flight == (0, 0) and late == 0
        finally:
            await a.shutdown()
        return {"storm_ms": elapsed * 1000, "storm_ledger_empty": empty}

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
    rep.results["rss_agent_load_mib"] = rss_mib(agent.process.pid)
    await agent.shutdown()

    async def cold_start(supervise: bool) -> float:
        ProcessGroup.supervise_default = supervise
        try:
            t0 = now()
            a = await launch(AGENT, protocol=1)
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

    async def ladder(behavior: str, key: str, expect: str) -> dict[str, float | str]:
        """A cancel the agent does not honour: time until the ladder resolved the turn; the
        self-check is that the step named ``expect`` resolved it and the agent process is gone."""
        budget = cfg["ignored_budget"]
        a = await launch([*AGENT, "--behavior", behavior], ladder=LadderPolicy(budget=budget), protocol=1)
        try:
            s = await a.new_session(cwd)
            turn = s.prompt(BUSY_TURN)
            if behavior != "hang":  # the hanging agent sends nothing: cancel right away
                await turn.__anext__()
            t0 = now()
            outcome = await turn.cancel()
            elapsed = now() - t0
            exit_code = await a.process.wait()
        finally:
            await a.shutdown()
        rep.notes[f"{key}_resolution"] = (
            f"{outcome.resolution.value if outcome.resolution else None} by {outcome.resolved_by}; "
            f"steps {','.join(outcome.steps)}; agent exit {exit_code}"
        )
        if outcome.resolved_by != expect:
            raise AssertionError(f"{behavior}: resolved by {outcome.resolved_by}, not {expect}")
        rep.work[key] = {"resolved": 1}
        return {f"{key}_s": elapsed, f"{key}_budget_s": budget}

    if own:
        await rep.measure("cold", cold)
        await rep.measure("ignored", lambda: ladder("ignore-cancel", "ignored", "terminate"))
        await rep.measure("hang", lambda: ladder("hang", "hang", "kill"))
    rep.emit()


if __name__ == "__main__":
    asyncio.run(main())
