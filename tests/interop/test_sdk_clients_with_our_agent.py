"""Clients written with the official SDKs against OUR agent runtime (the bundled reference agent).

The clients are ``peers/sdk_client.py`` (the official Python SDK's ``ClientSideConnection``,
spawning the agent with the SDK's own ``spawn_agent_process``; run in a venv with each pinned
SDK version) and ``peers/ts_client.mjs`` (the TypeScript SDK's client app on ``ndJsonStream``);
fixture ``sdk`` runs every test against each. The agent is ``peers/traced_agent.py``: the
reference agent with a tracer on its connection, so each test can check everything OUR agent
side emitted against the official ACP schema. The cancels also run with our agent on uvloop
(``agent_loop``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_driver.core import ErrorCode

from .peer_scripts import ScriptRun, agent_trace_loops, read_agent_trace, run_script
from .schema_check import assert_conforms
from .sdk_peers import PEERS_DIR, SdkPeer

pytestmark = pytest.mark.interop

CANCEL = "$/cancel_request"
QUICK = 5.0


class ClientRun:
    """One scenario of an SDK client against our traced reference agent."""

    def __init__(self, run: ScriptRun, trace_file: Path, sdk: SdkPeer) -> None:
        self.run = run
        self.sdk = sdk
        self.trace = read_agent_trace(trace_file)
        self.result = run.json()

    def report(self) -> str:
        ours = "\n".join(f"{d:>3} {line}" for d, line in self.trace)
        result = {k: v for k, v in self.result.items() if k not in ("wire", "updates")}
        return f"{self.run.report()}\n--- result ---\n{result}\n--- our agent's trace ---\n{ours}"

    def ours(self, direction: str) -> list[dict[str, Any]]:
        return [json.loads(line) for d, line in self.trace if d == direction]

    def conforms(self, *expect: str) -> None:
        assert_conforms(self.trace, "agent", expect=("result initialize", "result session/new", *expect))


AGENT_LOOPS = {"asyncio": "asyncio.unix_events", "uvloop": "uvloop"}
"""``ACP_INTEROP_AGENT_LOOP`` for ``peers/traced_agent.py``, and the module of the loop it then runs."""


async def run_client(sdk: SdkPeer, scenario: str, tmp_path: Path, agent_loop: str = "asyncio") -> ClientRun:
    trace_file = tmp_path / "agent-trace.jsonl"
    env = {
        **sdk.env,
        "ACP_AGENT_PYTHON": sys.executable,  # has acp_driver installed
        "ACP_AGENT_SCRIPT": str(PEERS_DIR / "traced_agent.py"),
        "ACP_INTEROP_TRACE_FILE": str(trace_file),
        "ACP_INTEROP_AGENT_LOOP": agent_loop,
    }
    run = await run_script([*sdk.script("client"), scenario], env)
    client = ClientRun(run, trace_file, sdk)
    if os.environ.get("ACP_INTEROP_TRACE"):
        print(f"\n{client.report()}")
    assert run.returncode == 0, f"the {sdk.id} client failed\n{client.report()}"
    # The SDK closed the connection (our agent's stdin): our agent must have exited by itself, 0.
    assert client.result.get("agent_exit") == 0, client.report()
    assert agent_trace_loops(trace_file) == {AGENT_LOOPS[agent_loop]}, client.report()
    return client


def update_kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u.get("sessionUpdate") for u in updates]


def message_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk"]


async def test_turn_with_updates(sdk: SdkPeer, tmp_path: Path) -> None:
    c = await run_client(sdk, "turn", tmp_path)
    result, updates = c.result, c.result["updates"]
    assert result["stop_reason"] == "end_turn", c.report()
    assert result["agent_info"]["name"] == "acp-driver-reference-agent"
    kinds = update_kinds(updates)
    assert kinds[0] == "agent_thought_chunk", kinds
    assert kinds.count("plan") == 4, kinds
    assert message_texts(updates) == [
        "chunk 1/3\n",
        "chunk 2/3\n",
        "chunk 3/3\n",
        "permission outcome: selected allow\n",
    ], c.report()
    tool_statuses = [(u["toolCallId"], u.get("status")) for u in updates if "toolCallId" in u]
    lookup, edit = sorted({tid for tid, _ in tool_statuses})
    assert tool_statuses[-1] == (edit, "completed"), tool_statuses
    assert [s for tid, s in tool_statuses if tid == lookup][-1] == "completed", tool_statuses
    (asked,) = result["permission_requests"]
    assert [o["optionId"] for o in asked["options"]] == ["allow", "reject"]
    # Every update reached the SDK client before the turn's answer (and nothing after it).
    ours = c.ours("out")
    answer = next(i for i, m in enumerate(ours) if m.get("result", {}).get("stopReason") == "end_turn")
    assert not [m for m in ours[answer + 1 :] if m.get("method") == "session/update"], c.report()
    c.conforms("result session/prompt", "notification session/update", "request session/request_permission")


@pytest.mark.parametrize("agent_loop", AGENT_LOOPS)
async def test_session_cancel(sdk: SdkPeer, tmp_path: Path, agent_loop: str) -> None:
    c = await run_client(sdk, "session_cancel", tmp_path, agent_loop)
    assert c.result["stop_reason"] == "cancelled", c.report()
    assert c.result["cancel_to_answer"] < QUICK, c.report()
    (cancel,) = [m for m in c.ours("in") if m.get("method") == "session/cancel"]
    (prompt,) = [m for m in c.ours("in") if m.get("method") == "session/prompt"]
    assert cancel["params"] == {"sessionId": prompt["params"]["sessionId"]}
    assert [m for m in c.ours("out") if m.get("id") == prompt["id"]] == [
        {"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "cancelled"}}
    ], c.report()
    c.conforms("result session/prompt")


def _needs_cancel_request(sdk: SdkPeer) -> None:
    if not sdk.has_cancel_request:
        pytest.skip(f"{sdk.id} does not implement $/cancel_request (added in the SDK's 1.0 line)")


@pytest.mark.parametrize("agent_loop", AGENT_LOOPS)
async def test_cancel_request_for_the_prompt(sdk: SdkPeer, tmp_path: Path, agent_loop: str) -> None:
    """The SDK cancels its ``session/prompt`` with ``$/cancel_request``: our runtime answers the
    prompt ``stopReason: cancelled`` (a valid result, as for ``session/cancel``)."""
    _needs_cancel_request(sdk)
    c = await run_client(sdk, "cancel_request_prompt", tmp_path, agent_loop)
    rid = c.result["request_id"]
    assert c.result["answer"] == {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "cancelled"}}, (
        c.report()
    )
    assert c.result["cancel_to_answer"] < QUICK, c.report()
    assert [m for m in c.ours("in") if m.get("method") == CANCEL] == [
        {"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": rid}}
    ], c.report()
    if sdk.kind == "typescript":  # it waits for the answer (cooperative cancel) and returns it
        assert c.result["caller_saw"] == {"result": {"stopReason": "cancelled"}}, c.report()
    else:  # the Python SDK raises CancelledError at once and drops the answer
        assert c.result["caller_saw"] == {"cancelled": True}, c.report()
    c.conforms("result session/prompt")


async def test_cancel_request_for_an_extension_request(sdk: SdkPeer, tmp_path: Path) -> None:
    """The SDK cancels ``_acp_driver/sleep`` with ``$/cancel_request``: our runtime answers -32800."""
    _needs_cancel_request(sdk)
    c = await run_client(sdk, "cancel_request_ext", tmp_path)
    rid = c.result["request_id"]
    answer = c.result["answer"]
    assert answer["id"] == rid, c.report()
    assert answer["error"]["code"] == ErrorCode.REQUEST_CANCELLED, c.report()
    assert c.result["cancel_to_answer"] < QUICK, c.report()
    if sdk.kind == "typescript":
        assert c.result["caller_saw"]["error"]["code"] == ErrorCode.REQUEST_CANCELLED, c.report()
    c.conforms("error _acp_driver/sleep")
