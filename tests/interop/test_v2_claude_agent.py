"""A real agent that speaks ACP v2: claude-agent-acp 0.101.0 (npm
``@agentclientprotocol/claude-agent-acp``; Claude Code through the Claude Agent SDK), run offline.

Its model API is a loopback stand-in (``fake_anthropic.py``: ``ANTHROPIC_BASE_URL`` and a fake
``ANTHROPIC_API_KEY``, in a private ``HOME``); each test picks the model's answer to each turn
from the prompt it carries: words streamed as deltas, an endless stream, or a ``Bash`` tool use
that makes the agent ask permission -- it does in its ``default`` mode (``session/set_config_option
mode=default``; a new session starts in ``auto``, where the tool would run unasked).

Driven in v2 (``CLAUDE_AGENT_ACP_PROTOCOL=v2``) by the official SDKs' v2 client scripts: a streamed
turn, a cancel mid-stream, a cancel during a tool's permission request, a prompt held behind a
running turn, a held prompt withdrawn, a cancel with a prompt held, and a resume (with replay) in a
new agent process. What it does on the wire is pinned here and written up in docs/interop.md.
Also: what it answers to ``initialize`` in each of its modes (``v1``, ``v2``, ``auto``), and our v1
driver against it in ``v1`` and ``auto`` modes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import AgentMessageChunk, Resolution, launch

from ..remote.serving import processes_running
from ..waiting import eventually
from .fake_anthropic import Endless, FakeAnthropic, Request, Step, ToolUse, Words
from .installs import NpmAgent
from .sdk_peers import V2Sdk
from .v2_plan import Plan, PlanRun, run_plan

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
"""A cold cache installs the agent (about 400 MB from npm) in the first test's setup."""

CANCELLED = -32800
DROP = ("ANTHROPIC_", "CLAUDE_")
"""Variables of ours the agent must not see (a real key, another configuration)."""
TOUCH = {"command": "touch made-by-agent.txt", "description": "Create a file"}


def claude_env(home: Path, model: FakeAnthropic, protocol: str) -> dict[str, str]:
    """The agent's environment on top of ours less ``DROP``: offline, on the fake model."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "CLAUDE_AGENT_ACP_PROTOCOL": protocol,
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-not-a-key",
        "IS_SANDBOX": "1",  # Claude Code runs as root here
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def by_marker(steps: dict[str, Step]) -> Any:
    """Answer each conversation request by the marker word in its latest user text (a tool's
    result, which carries none, gets two words)."""

    def decide(request: Request) -> Step:
        text = request.last_user_text()
        for marker, step in steps.items():
            if marker in text:
                return step
        return Words("done", 2)

    return decide


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic()
    await fake.start()
    yield fake
    await fake.close()


def claude_processes() -> list[int]:
    """Live processes below this one that run the agent or its Claude Code binary."""
    return processes_running(b"claude")


PYTHON_SDK_DROPS = {"state_update": {"background"}}
"""Fields of claude-agent-acp's updates that the Python SDK 1.0.0rc3's v2 models do not keep."""


def dropped_fields(sent: list[dict[str, Any]], delivered: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Per ``sessionUpdate`` kind, the top-level fields that were sent and not handed over."""
    dropped: dict[str, set[str]] = {}
    for wire, parsed in zip(sent, delivered, strict=True):
        missing = set(wire) - set(parsed)
        if missing:
            dropped.setdefault(wire["sessionUpdate"], set()).update(missing)
    return dropped


def position_of_update(run: PlanRun, after: int, **fields: Any) -> int:
    return run.position(
        lambda r: (
            r["ev"] == "wire"
            and r["d"] == "in"
            and all(r["m"].get("params", {}).get("update", {}).get(k) == v for k, v in fields.items())
        ),
        after=after,
    )


async def test_claude_v2_driven_by_the_python_sdk_client(
    claude_agent: NpmAgent, v2_sdk_python: V2Sdk, model: FakeAnthropic, tmp_path: Path
) -> None:
    model.decide = by_marker(
        {
            "FIVE": Words("a", 5),
            "FOREVER": Endless("b"),
            "TOUCH": ToolUse("Bash", TOUCH),
            "SLOW": Words("c", 40, interval=0.03),
            "HELD": Words("d", 2),
            "ENDLESS": Endless("f"),
            "NEVER": Words("never", 2),
            "AGAIN": Words("e", 2),
        }
    )
    plan = (
        Plan()
        .initialize()
        .new_session()
        .step("set_config", configId="mode", value="default")  # 2: asks before running a tool
        # 3-4: a streamed turn.
        .prompt("say FIVE words", "p1")
        .wait("idle")
        # 5-8: a cancel mid-stream.
        .prompt("talk FOREVER", "p2")
        .wait("agent_message_chunk", 3)
        .cancel()
        .wait("idle")
        # 9-12: a cancel while the tool's permission request is pending.
        .prompt("TOUCH a file", "p3")
        .wait_permission()
        .cancel()
        .wait("idle")
        # 13-18: a prompt held behind a running turn: inserted at its end.
        .prompt("SLOW words", "p4")
        .wait("agent_message_chunk", 2)
        .prompt("HELD words", "p5")
        .wait("idle")
        .await_prompt("p5")
        .wait("idle")
        # 19-26: a held prompt withdrawn, another held, then a cancel.
        .prompt("ENDLESS words", "p6")
        .wait("agent_message_chunk", 2)
        .prompt("NEVER one", "p7")
        .prompt("NEVER two", "p8")
        .withdraw("p7")
        .wait("agent_message_chunk", 5)
        .cancel()
        .wait("idle")
        # 27-32: a new agent process resumes the session, with its history replayed.
        .step("restart")
        .initialize()
        .step("resume", replay=True)
        .wait("idle")
        .prompt("AGAIN two words", "p9")
        .wait("idle")
    )
    env = claude_env(tmp_path / "home", model, "v2")
    run = (await run_plan(v2_sdk_python, plan, list(claude_agent.argv), tmp_path, env=env, drop=DROP)).check()
    report = run.report()
    await eventually(lambda: not claude_processes(), "no claude process left")

    assert run.wire("in")[0]["result"]["protocolVersion"] == 2, report
    # The SDK handed over every update, in order, but its models (schema alpha.5) drop the fields
    # of the newer schema claude-agent-acp speaks.
    delivered, sent = run.delivered(), run.updates()
    assert [u["sessionUpdate"] for u in delivered] == [u["sessionUpdate"] for u in sent], report
    assert dropped_fields(sent, delivered) == PYTHON_SDK_DROPS, dropped_fields(sent, delivered)

    # 3-4 A streamed turn: user_message, the answer (its messageId), running, the deltas, idle.
    at, answer = run.answer("p1")
    inserted = [u for u in run.updates(run.step_at(3), at) if u.get("sessionUpdate") == "user_message"]
    assert [u["messageId"] for u in inserted] == [answer["result"]["messageId"]], report
    assert run.states(run.step_at(3), run.step_at(5)) == [("running", None), ("idle", "end_turn")], report
    assert run.text(run.step_at(3), run.step_at(5)) == "a0 a1 a2 a3 a4 ", report

    # 5-8 Cancel mid-stream: it hangs up on the model and ends idle "cancelled".
    assert run.states(run.step_at(7), run.step_at(9)) == [("idle", "cancelled")], report
    streams = [r for r in model.conversation if "FOREVER" in r.last_user_text()]
    assert streams, report
    assert streams[0].hung_up.is_set(), report

    # 9-12 Cancel during the permission request: requires_action before the request; at the
    # cancel the agent withdraws it ($/cancel_request) and reports the tool call cancelled, then
    # idle "cancelled" -- no `running` in between. The tool never ran.
    permission = run.events("permission")[0]
    assert run.states(run.step_at(9), run.step_at(11)) == [("running", None), ("requires_action", None)], (
        report
    )
    cancel_at = run.step_at(11)
    withdrawal = next(m for m in run.wire("in", cancel_at) if m.get("method") == "$/cancel_request")
    assert withdrawal["params"]["requestId"] == permission["id"], report
    assert [r["result"] for r in run.responses_to(permission["id"])] == [
        {"outcome": {"outcome": "cancelled"}}
    ], report
    assert run.states(cancel_at, run.step_at(13)) == [("idle", "cancelled")], report
    tool_id = permission["request"]["subject"]["toolCall"]["toolCallId"]
    assert any(
        u.get("sessionUpdate") == "tool_call_update"
        and u.get("toolCallId") == tool_id
        and u.get("status") == "cancelled"
        for u in run.updates(cancel_at)
    ), report
    assert not (tmp_path / "made-by-agent.txt").exists()

    # 13-18 A held prompt: no answer while the turn runs; at its idle end_turn it is inserted.
    first_idle = position_of_update(run, run.step_at(13), state="idle")
    held_at, held = run.answer("p5")
    assert run.sent("p5")[0] < first_idle, "p5 was not sent while the turn ran\n" + report
    assert held_at > first_idle, report
    assert "messageId" in held["result"], report
    assert run.states(run.step_at(13), run.step_at(19)) == [
        ("running", None),
        ("idle", "end_turn"),
        ("running", None),
        ("idle", "end_turn"),
    ], report
    assert run.text(first_idle, run.step_at(19)) == "d0 d1 ", report

    # 19-26 $/cancel_request on a held prompt is NOT answered (claude-agent-acp 0.101.0): five
    # more chunks stream and nothing comes back; the session/cancel then answers both held
    # prompts -32800 and ends the turn idle "cancelled".
    cancel_at = run.step_at(25)
    for name in ("p7", "p8"):
        answered_at, answered = run.answer(name)
        assert answered_at > cancel_at, report
        assert answered["error"]["code"] == CANCELLED, report
    assert run.states(run.step_at(19), run.step_at(27)) == [("running", None), ("idle", "cancelled")], report
    assert not [r for r in model.conversation if "NEVER" in r.last_user_text()], report

    # 27-32 Resume in a new process: the history is replayed, then a state snapshot (idle, no stop
    # reason), then the answer; the next prompt runs as usual.
    resumed_at = run.step_at(29)
    answer_at = run.position(lambda r: r["ev"] == "result" and r["i"] == 29)
    replay = run.updates(resumed_at, answer_at)
    assert {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "say FIVE words"}} in [
        {k: u.get(k) for k in ("sessionUpdate", "content")} for u in replay
    ], report
    assert run.states(resumed_at, answer_at) == [("idle", None)], report
    assert run.text(run.step_at(31)) == "e0 e1 ", report


async def test_claude_v2_driven_by_the_typescript_sdk_client(
    claude_agent: NpmAgent, v2_sdk_typescript: V2Sdk, model: FakeAnthropic, tmp_path: Path
) -> None:
    model.decide = by_marker(
        {"FIVE": Words("a", 5), "FOREVER": Endless("b"), "TOUCH": ToolUse("Bash", TOUCH)}
    )
    plan = (
        Plan()
        .initialize()
        .new_session()
        .step("set_config", configId="mode", value="default")
        .prompt("say FIVE words", "p1")  # 3
        .wait("idle")
        .prompt("talk FOREVER", "p2")  # 5
        .wait("agent_message_chunk", 3)
        .cancel()
        .wait("idle")
        .prompt("TOUCH a file", "p3")  # 9
        .wait_permission()
        .answer_permission("allow")
        .wait("idle")
    )
    env = claude_env(tmp_path / "home", model, "v2")
    run = (
        await run_plan(v2_sdk_typescript, plan, list(claude_agent.argv), tmp_path, env=env, drop=DROP)
    ).check()
    report = run.report()
    assert run.text(run.step_at(3), run.step_at(5)) == "a0 a1 a2 a3 a4 ", report
    assert run.states(run.step_at(7), run.step_at(9)) == [("idle", "cancelled")], report
    # An allowed tool: requires_action, then running again, the tool runs, the turn goes on.
    assert run.states(run.step_at(9)) == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
    ], report
    assert (tmp_path / "made-by-agent.txt").exists(), report
    assert run.text(run.step_at(11)) == "done0 done1 ", report


BOTH = {
    "info": {"name": "probe", "version": "0"},
    "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"},
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
}
V1_NAMES = {k: BOTH[k] for k in ("clientInfo", "clientCapabilities")}


async def initialize_once(agent: NpmAgent, env: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
    """Start the agent, send one ``initialize``, return its answer; end its input; it exits."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    proc = await asyncio.create_subprocess_exec(
        *agent.argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**inherited, **env},
        start_new_session=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            proc.stdin.write(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
                + b"\n"
            )
            await proc.stdin.drain()
            answer: dict[str, Any] = json.loads(await proc.stdout.readline())
            proc.stdin.close()
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return answer


@pytest.mark.parametrize("mode", ["v1", "v2", "auto"])
async def test_claude_initialize_in_each_mode(
    claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path, mode: str
) -> None:
    """The negotiation a host that speaks both must do: ask for 2 carrying v1's field names too.
    ``v1`` answers 1 (with v1's ``agentInfo``), ``v2`` and ``auto`` answer 2; a v1 request gets 1
    from ``auto`` and ``v1``, and ``-32022`` from ``v2``."""
    env = claude_env(tmp_path / "home", model, mode)
    asked_two = await initialize_once(claude_agent, env, {"protocolVersion": 2, **BOTH})
    asked_one = await initialize_once(claude_agent, env, {"protocolVersion": 1, **V1_NAMES})
    found = (asked_two, asked_one)
    if mode == "v1":
        assert asked_two["result"]["protocolVersion"] == 1, found
        assert asked_two["result"]["agentInfo"]["version"] == "0.101.0", found
        assert asked_one["result"]["protocolVersion"] == 1, found
    else:
        assert asked_two["result"]["protocolVersion"] == 2, found
        assert asked_two["result"]["info"]["version"] == "0.101.0", found
        assert "agentInfo" not in asked_two["result"], found
    if mode == "auto":
        assert asked_one["result"]["protocolVersion"] == 1, found
    if mode == "v2":
        assert asked_one["error"]["code"] == -32022, found
        assert asked_one["error"]["data"] == {"requested": 1, "supported": [2]}, found


@pytest.mark.parametrize("mode", ["v1", "auto"])
async def test_claude_v1_through_our_driver(
    claude_agent: NpmAgent, model: FakeAnthropic, tmp_path: Path, mode: str
) -> None:
    """Our (v1) driver against the same binary in ``v1`` and ``auto`` modes: a streamed turn, and
    a cancel mid-stream that lands at the ladder's first rung."""
    model.decide = by_marker({"FIVE": Words("a", 5), "FOREVER": Endless("b")})
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(DROP)},
        **claude_env(tmp_path / "home", model, mode),
    }
    async with asyncio.timeout(90):
        agent = await launch(list(claude_agent.argv), env=env, cwd=tmp_path)
        async with agent:
            session = await agent.new_session(tmp_path)
            turn = session.prompt("say FIVE words")
            texts = [u.text async for u in turn if isinstance(u, AgentMessageChunk)]
            assert (await turn).stop_reason == "end_turn"
            # The words, each its own chunk; v1 has no `notice` update: Claude Code's warnings
            # come as message text too.
            assert texts[:5] == ["a0 ", "a1 ", "a2 ", "a3 ", "a4 "], texts
            turn = session.prompt("talk FOREVER")
            seen = 0
            async for update in turn:
                if isinstance(update, AgentMessageChunk):
                    seen += 1
                    if seen == 3:
                        break
            outcome = await turn.cancel()
            assert outcome.resolution is Resolution.CANCELLED, outcome
            assert outcome.steps == ("session_cancel",), outcome
            assert (await turn).stop_reason == "cancelled"
    await eventually(lambda: not claude_processes(), "no claude process left")
