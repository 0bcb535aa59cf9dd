"""The official SDKs' v2 CLIENTS (``peers/sdk_v2_client.py`` on the Python SDK 1.0.0rc3,
``peers/ts_v2_client.mjs`` on the TypeScript SDK 2.4.0) driving OUR agent runtime in ACP v2: the
bundled reference agent (``python -m acp_driver agent``, which speaks v1 and v2; the clients ask
for 2), and ``peers/runtime_v2_agent.py`` (the reference agent plus handlers that get cancellation
wrong). The clients record every message both ways; the guarantees of our runtime are checked on
that wire:

- a session opened the way each SDK's client does by default (the Python SDK's sends no
  ``mcpServers``, which v2 made optional);
- a prompt is answered at its insertion with a ``messageId``, after its ``user_message`` (same
  id) and with ``running`` next; every span ends with exactly one idle with the right stop reason;
- ``requires_action`` while a permission request is pending, ``running`` again once answered;
- prompts sent while the agent works are held and inserted in order, each its own span;
- ``$/cancel_request`` on a held prompt: ``-32800``, the running span untouched;
- ``session/cancel``: the held prompts ``-32800``, the span idle ``cancelled`` -- also when the
  handler swallowed its cancellation or ignored it (then after the runtime's cancel timeout, and
  nothing of the handler after the idle); a permission request pending at the cancel is withdrawn
  by our runtime (``$/cancel_request``), and the client's ``cancelled`` outcome accepted;
- a handler that raises: idle ``error``, never a JSON-RPC error after insertion;
- ``session/resume`` with ``replayFrom: start``: the replay, then a state snapshot, then the answer;
- ``session/close`` with a span running: its idle ``cancelled`` before the answer, nothing after.

Every message our agent sent is checked against the newest v2 schema.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .schema_check_v2 import V2Schema, assert_conforms_v2
from .sdk_peers import PEERS_DIR, V2Sdk
from .v2_plan import Plan, PlanRun, run_plan

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CANCELLED = -32800
REFERENCE_AGENT = [sys.executable, "-m", "acp_driver", "agent"]
STUBBORN_AGENT = [sys.executable, str(PEERS_DIR / "runtime_v2_agent.py")]


def agent_side(run: PlanRun) -> list[tuple[str, dict[str, Any]]]:
    """The wire as our agent saw it: what the client received is what our agent sent."""
    return [("out" if r["d"] == "in" else "in", r["m"]) for r in run.records if r["ev"] == "wire"]


def update_records(run: PlanRun, start: int = 0, stop: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(position, update) of each ``session/update`` our agent sent, between two positions."""
    found = []
    for index in range(start, len(run.records) if stop is None else stop):
        r = run.records[index]
        if r["ev"] == "wire" and r["d"] == "in" and r["m"].get("method") == "session/update":
            found.append((index, r["m"]["params"]["update"]))
    return found


def check_span(run: PlanRun, name: str, stop_reason: str, start: int, stop: int | None = None) -> None:
    """The prompt ``name`` was inserted as v2 says -- its ``user_message``, its answer with the
    same ``messageId``, ``running`` -- and its span ended with one idle, ``stop_reason``."""
    report = run.report()
    answered_at, answer = run.answer(name)
    message_id = answer["result"]["messageId"]
    updates = update_records(run, start, stop)
    inserted = [
        i for i, u in updates if u["sessionUpdate"] == "user_message" and u["messageId"] == message_id
    ]
    assert len(inserted) == 1, f"{name}: its user_message, once in {start}..{stop}\n{report}"
    inserted_at = inserted[0]
    assert inserted_at < answered_at, report
    after = [(i, u) for i, u in updates if i > inserted_at]
    assert after[0][1] == {"sessionUpdate": "state_update", "state": "running"}, report
    idles = [(i, u) for i, u in after if u["sessionUpdate"] == "state_update" and u["state"] == "idle"]
    assert idles, report
    assert idles[0][1].get("stopReason") == stop_reason, report


def error_code(run: PlanRun, name: str) -> Any:
    return run.answer(name)[1].get("error", {}).get("code")


async def test_sdk_v2_client_drives_our_reference_agent(
    v2_client: V2Sdk, v2_schema: V2Schema, tmp_path: Path
) -> None:
    plan = (
        Plan()
        .initialize()
        .new_session()
        # 2-3: a streamed turn.
        .prompt("/stream 3 10", "p1")
        .wait("idle")
        # 4-7: a permission, allowed: requires_action while pending.
        .prompt("/permission", "p2")
        .wait_permission()
        .answer_permission("allow")
        .wait("idle")
        # 8-15: prompts held behind running work, inserted in order.
        .prompt("/stream 3 50", "p3")
        .wait("agent_message_chunk")
        .prompt("alpha", "p4")
        .prompt("beta", "p5")
        .wait("idle", 3)
        .await_prompt("p4")
        .await_prompt("p5")
        # 15-23: a slow span, three prompts held; one withdrawn; session/cancel.
        .prompt("/sleep 30000", "p6")
        .await_prompt("p6")  # inserted: running (the answer comes after it on the wire)
        .prompt("held one", "p7")
        .prompt("held two", "p8")
        .withdraw("p7")
        .await_prompt("p7")
        .cancel()
        .wait("idle")
        .await_prompt("p8")
        # 24-27: a cancel while a permission request is pending.
        .prompt("/permission", "p9")
        .wait_permission()
        .cancel()
        .wait("idle")
        # 28-29: a handler that fails.
        .prompt("/fail it broke", "p10")
        .wait("idle")
        # 30-33: resume with replay on the same connection: replay, snapshot, answer.
        .step("resume", replay=True)
        .wait("idle")  # the snapshot
        .prompt("after the resume", "p11")
        .wait("idle")
        # 34-36: session/close with a span running.
        .prompt("/sleep 30000", "p12")
        .await_prompt("p12")
        .step("close_session")
    )
    run = (await run_plan(v2_client, plan, REFERENCE_AGENT, tmp_path)).check()
    report = run.report()
    assert run.wire("in")[0]["result"]["protocolVersion"] == 2, report
    # Called as each SDK's client is by default: the Python SDK's sends no mcpServers (optional
    # in v2), the TypeScript SDK's session builder sends []. (The Python SDK's session/new was
    # refused -32602 while v1's table was applied to v2.)
    (opened,) = [m for m in run.wire("out") if m.get("method") == "session/new"]
    assert opened["params"].get("mcpServers", "omitted") == (
        "omitted" if v2_client.kind == "python" else []
    ), report

    check_span(run, "p1", "end_turn", run.step_at(2), run.step_at(4))
    assert run.text(run.step_at(2), run.step_at(4)) == "chunk 1/3\nchunk 2/3\nchunk 3/3\n", report

    # requires_action while the permission is pending, running once answered.
    check_span(run, "p2", "end_turn", run.step_at(4), run.step_at(8))
    assert run.states(run.step_at(4), run.step_at(8)) == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
    ], report
    assert "permission outcome: selected allow" in run.text(run.step_at(4), run.step_at(8)), report

    # Held prompts: inserted after the span before them ended, in the order sent.
    start, stop = run.step_at(8), run.step_at(15)
    for name in ("p3", "p4", "p5"):
        check_span(run, name, "end_turn", start, stop)
    positions = [run.answer(name)[0] for name in ("p3", "p4", "p5")]
    assert positions == sorted(positions), report
    idle_positions = [i for i, u in update_records(run, start, stop) if u.get("state") == "idle"]
    assert len(idle_positions) == 3, report
    assert idle_positions[0] < run.answer("p4")[0] < idle_positions[1] < run.answer("p5")[0], report
    assert run.sent("p4")[0] < idle_positions[0], "p4 was not sent while p3 ran\n" + report
    assert run.text(idle_positions[0], stop) == "alpha\nbeta\n", report

    # A held prompt withdrawn: -32800 while the span still runs; session/cancel: the other held
    # prompt -32800, the span idle "cancelled" -- exactly one idle.
    start, cancel_at, stop = run.step_at(15), run.step_at(21), run.step_at(24)
    withdrawn_at, _ = run.answer("p7")
    assert error_code(run, "p7") == CANCELLED, report
    assert withdrawn_at < cancel_at, report
    assert run.states(start, cancel_at) == [("running", None)], report
    assert error_code(run, "p8") == CANCELLED, report
    assert run.states(start, stop) == [("running", None), ("idle", "cancelled")], report
    assert not any("held" in str(u) for _, u in update_records(run, start, stop)), report

    # A cancel while a permission request is pending: our runtime withdraws it
    # ($/cancel_request), the client answers the `cancelled` outcome, the span ends cancelled
    # with no `running` after requires_action.
    start, cancel_at, stop = run.step_at(24), run.step_at(26), run.step_at(28)
    permission = run.events("permission")[-1]
    withdrawals = [m for m in run.wire("in", cancel_at, stop) if m.get("method") == "$/cancel_request"]
    assert [m["params"]["requestId"] for m in withdrawals] == [permission["id"]], report
    assert [r.get("result") for r in run.responses_to(permission["id"])] == [
        {"outcome": {"outcome": "cancelled"}}
    ], report
    assert run.states(start, stop) == [
        ("running", None),
        ("requires_action", None),
        ("idle", "cancelled"),
    ], report

    # A handler that raised: the prompt was answered (inserted); the span ends idle "error".
    check_span(run, "p10", "error", run.step_at(28), run.step_at(30))
    [idle] = [u for _, u in update_records(run, run.step_at(28), run.step_at(30)) if u.get("state") == "idle"]
    assert idle["error"]["message"] == "it broke", report

    # Resume with replay: the replay (the user messages), then the state snapshot, then the answer.
    resumed_at = run.step_at(30)
    answer_at = run.position(lambda r: r["ev"] == "result" and r["i"] == 30)
    replay = [u for _, u in update_records(run, resumed_at, answer_at)]
    assert [u["sessionUpdate"] for u in replay][-1] == "state_update", report
    assert replay[-1] == {"sessionUpdate": "state_update", "state": "idle"}, report
    assert [u["content"][0]["text"] for u in replay[:-1] if u["sessionUpdate"] == "user_message"][:2] == [
        "/stream 3 10",
        "/permission",
    ], report
    check_span(run, "p11", "end_turn", run.step_at(32), run.step_at(34))

    # session/close with a span running: the idle "cancelled", then the answer, then nothing.
    close_at = run.step_at(36)
    closed_at = run.position(lambda r: r["ev"] == "result" and r["i"] == 36)
    assert run.states(close_at, closed_at)[-1:] == [("idle", "cancelled")], report
    close_answer = run.wire("in", close_at)
    assert [m for m in close_answer if "method" not in m] == [
        {"jsonrpc": "2.0", "id": run.wire("out")[-1]["id"], "result": {}}
    ], report
    assert "method" not in close_answer[-1], "our agent sent something after the close's answer\n" + report

    # Exactly one idle per span: 12 prompts, 2 withdrawn or cancelled while held, 10 spans.
    assert len([s for s in run.states() if s[0] == "idle"]) == 10 + 1, report  # + the resume snapshot
    assert run.delivered() == run.updates() or v2_client.kind == "python", report
    assert_conforms_v2(
        v2_schema,
        agent_side(run),
        "agent",
        expect=(
            "result initialize",
            "result session/new",
            "result session/prompt",
            "error session/prompt",
            "result session/resume",
            "result session/close",
            "notification session/update",
            "request session/request_permission",
            "notification $/cancel_request",
        ),
    )


@pytest.mark.parametrize("kind", ["python", "typescript"])
async def test_our_runtime_ends_spans_cancelled_whatever_the_handler_did(
    interop_peers: Any, v2_schema: V2Schema, kind: str, tmp_path: Path
) -> None:
    """Handlers that swallow their cancellation or ignore it, and one that raises: the SDK client
    sees idle ``cancelled`` (the second after our runtime's cancel timeout, with nothing of the
    handler after it) and idle ``error``."""
    from .sdk_peers import v2_sdk_or_skip

    client = v2_sdk_or_skip(interop_peers, kind)
    plan = (
        Plan()
        .initialize()
        .new_session()
        .prompt("/swallow-cancel", "p1")  # 2
        .await_prompt("p1")
        .cancel()
        .wait("idle")
        .prompt("/ignore-cancel", "p2")  # 6
        .await_prompt("p2")
        .cancel()
        .wait("idle")
        .prompt("/raise", "p3")  # 10
        .wait("idle")
        .prompt("after", "p4")  # 12
        .wait("idle")
    )
    run = (await run_plan(client, plan, STUBBORN_AGENT, tmp_path)).check()
    report = run.report()
    check_span(run, "p1", "cancelled", run.step_at(2), run.step_at(6))
    assert run.text(run.step_at(2), run.step_at(6)) == "swallowed\n", report
    check_span(run, "p2", "cancelled", run.step_at(6), run.step_at(10))
    assert run.text(run.step_at(6)).count("too late") == 0, report
    check_span(run, "p3", "error", run.step_at(10), run.step_at(12))
    check_span(run, "p4", "end_turn", run.step_at(12))
    assert run.text(run.step_at(12)) == "after\n", report
    assert len([s for s in run.states() if s[0] == "idle"]) == 4, report
    assert_conforms_v2(v2_schema, agent_side(run), "agent", expect=("notification session/update",))
