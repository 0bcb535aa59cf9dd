"""The official SDKs' clients launch ``acp-driver proxy -- <agent>`` as their agent, the way an
editor would, against the reference agent's misbehaviours (v1: the Python SDK 0.12.1 and
1.0.0rc3 clients and the TypeScript SDK 2.4 client, through ``peers/proxied_agent.py``; v2: both
SDKs' v2 clients, the proxy as the agent command of their plan).

Every cancelled prompt ends ``cancelled`` within the budget (+0.5 s, by the clients' own clocks),
every request is answered exactly once, and nothing of the agent is left once the client exited
or was SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from ..procs import group_alive, pid_alive
from ..waiting import eventually
from .peer_scripts import run_script
from .sdk_peers import PEERS_DIR, SdkPeer, V2Sdk
from .v2_plan import Plan, run_plan

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

BUDGET = 2.0
SLACK = 0.5
PROXY = [sys.executable, "-m", "acp_driver", "proxy", "--cancel-budget", str(BUDGET), "--"]
V1_BEHAVIORS = ("polite", "ignore-cancel", "hang", "end-turn-on-cancel")
V2_BEHAVIORS = ("polite", "ignore-cancel", "hang", "end-turn-on-cancel", "never-idle")


def _env(sdk: SdkPeer, tmp_path: Path, behavior: str) -> dict[str, str]:
    return {
        **sdk.env,
        "ACP_AGENT_PYTHON": sys.executable,
        "ACP_AGENT_SCRIPT": str(PEERS_DIR / "proxied_agent.py"),
        "ACP_INTEROP_TRACE_FILE": str(tmp_path / "agent-trace.jsonl"),
        "ACP_INTEROP_PROXY_BEHAVIOR": behavior,
        "ACP_INTEROP_PROXY_BUDGET": str(BUDGET),
        "ACP_INTEROP_PROXY_TRACE": str(tmp_path / "proxy.trace"),
        "ACP_INTEROP_PROXY_PIDFILE": str(tmp_path / "proxy.pid"),
    }


def _agent_pid(tmp_path: Path) -> int | None:
    """The agent's pid, as the proxy's trace recorded it at the start (it leads its group)."""
    path = tmp_path / "proxy.trace"
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if "connection_start" in entry.values() and entry.get("pid"):
            return int(entry["pid"])
    return None


def answered_once(wire: list[dict[str, Any]]) -> list[str]:
    """The requests of either side not answered exactly once (empty: all were), from one side's
    record of the wire (``d``: ``outgoing`` / ``incoming``)."""
    problems = []
    for sent, back in (("outgoing", "incoming"), ("incoming", "outgoing")):
        requests = [e["m"] for e in wire if e["d"] == sent and "method" in e["m"] and "id" in e["m"]]
        for request in requests:
            answers = [
                e
                for e in wire
                if e["d"] == back and "method" not in e["m"] and e["m"].get("id") == request["id"]
            ]
            if len(answers) != 1:
                problems.append(f"{sent} {request['method']} {request['id']}: {len(answers)} answers")
    return problems


async def _nothing_left(tmp_path: Path) -> None:
    proxy = int((tmp_path / "proxy.pid").read_text())
    agent = _agent_pid(tmp_path)
    assert agent is not None, "the proxy's trace names no agent"
    await eventually(lambda: not pid_alive(proxy), "the proxy to exit")
    await eventually(lambda: not group_alive(agent), "the agent's process group to be gone")


@pytest.mark.parametrize("behavior", V1_BEHAVIORS)
async def test_v1_sdk_clients_cancel_through_the_proxy(sdk: SdkPeer, behavior: str, tmp_path: Path) -> None:
    scenario = "session_cancel_now" if behavior == "hang" else "session_cancel"
    run = await run_script([*sdk.script("client"), scenario], _env(sdk, tmp_path, behavior))
    assert run.returncode == 0, run.report()
    result = run.json()
    assert result["stop_reason"] == "cancelled", run.report()
    assert result["cancel_to_answer"] <= BUDGET + SLACK, run.report()
    assert answered_once(result["wire"]) == [], run.report()
    assert result["agent_exit"] in (0, 1), run.report()  # 1: the ladder ended the agent
    await _nothing_left(tmp_path)


async def test_a_sigkilled_sdk_client_leaves_no_process(sdk: SdkPeer, tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *sdk.script("client"),
        "hold",
        env={**os.environ, **_env(sdk, tmp_path, "polite")},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        async with asyncio.timeout(60):
            async for line in process.stderr:
                if b"holding" in line:
                    break
        assert _agent_pid(tmp_path) is not None
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await _nothing_left(tmp_path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


@pytest.mark.parametrize("behavior", V2_BEHAVIORS)
async def test_v2_sdk_clients_cancel_through_the_proxy(
    v2_client: V2Sdk, behavior: str, tmp_path: Path
) -> None:
    plan = Plan().initialize().new_session().prompt("/stream 1 0\n/sleep 30000", "p1")
    if behavior != "hang":
        plan.await_prompt("p1").wait("agent_message_chunk")
    plan.cancel().wait("idle")
    agent = [*PROXY, sys.executable, "-m", "acp_driver", "agent", "--behavior", behavior]
    run = await run_plan(v2_client, plan, agent, tmp_path)
    report = run.report()
    assert run.end["failure"] is None, report
    wire = [r for r in run.records if r["ev"] == "wire"]
    (cancel_at,) = [r["t"] for r in wire if r["d"] == "out" and r["m"].get("method") == "session/cancel"]
    idles = [
        (r["t"], r["m"]["params"]["update"])
        for r in wire
        if r["d"] == "in"
        and r["m"].get("method") == "session/update"
        and r["m"]["params"]["update"].get("sessionUpdate") == "state_update"
        and r["m"]["params"]["update"].get("state") == "idle"
    ]
    assert len(idles) == 1, report
    idle_at, idle = idles[0]
    assert idle["stopReason"] == "cancelled", report
    assert idle_at - cancel_at <= BUDGET + SLACK, report
    both = [{"d": {"out": "outgoing", "in": "incoming"}[r["d"]], "m": r["m"]} for r in wire]
    assert answered_once(both) == [], report
    assert run.end["agent_exit"] in (0, 1), report
