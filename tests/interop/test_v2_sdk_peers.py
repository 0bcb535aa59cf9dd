"""ACP v2 between the official SDKs themselves: each SDK's v2 client script against each SDK's v2
agent script (Python ``acp.experimental.v2`` 1.0.0rc3, TypeScript ``…/experimental/v2`` 2.4.0),
over real pipes. It proves the peer scripts speak v2 to each other -- so a v2 host or agent of
ours can be put in either seat -- and records what the SDKs leave to the application when a
session is cancelled.

The agents (``peers/sdk_v2_agent.py``, ``peers/ts_v2_agent.mjs``) implement the v2 lifecycle
themselves; the SDKs only carry typed messages. ``test_v2_sdks_leave_cancellation_to_the_app``
takes an agent that ignores ``session/cancel`` and shows, on the wire, that neither SDK steps in:
no idle ``cancelled``, held prompts not answered, a pending permission request left open.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .installs import PeerInstaller
from .sdk_peers import V2Sdk, v2_sdk_or_skip
from .v2_plan import Plan, PlanRun, run_plan

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

CANCELLED = -32800


def check_turn(
    run: PlanRun, start: int, stop: int | None, states: list[tuple[str, str | None]], text: str
) -> None:
    assert run.states(start, stop) == states, run.report()
    assert run.text(start, stop) == text, run.report()


async def test_v2_turns_permissions_held_prompts_and_cancels(
    v2_client: V2Sdk, v2_agent: V2Sdk, tmp_path: Path
) -> None:
    plan = (
        Plan()
        .initialize()
        .new_session()
        # 0-4: a streamed turn.
        .prompt("/stream 3 10", "p1")
        .await_prompt("p1")
        .wait("idle")
        # 5-8: a permission, allowed.
        .prompt("/permission", "p2")
        .wait_permission()
        .answer_permission("allow")
        .wait("idle")
        # 9-17: a slow turn; two prompts held behind it; one withdrawn; a cancel.
        .prompt("/sleep 30000", "p3")
        .wait("agent_message_chunk")
        .prompt("held one", "p4")
        .prompt("held two", "p5")
        .withdraw("p4")
        .await_prompt("p4")
        .cancel()
        .wait("idle")
        .await_prompt("p5")
        # 18-21: a cancel while a permission request is pending.
        .prompt("/permission", "p6")
        .wait_permission()
        .cancel()
        .wait("idle")
        # 22-23: the next turn is its own.
        .prompt("after", "p7")
        .wait("idle")
        .step("close_session")
    )
    run = (await run_plan(v2_client, plan, v2_agent.script("agent"), tmp_path, env=v2_agent.env)).check()
    report = run.report()

    init = run.wire("in")[0]
    assert init["result"]["protocolVersion"] == 2, report

    # The prompt is answered at insertion with the message id of its user_message.
    _, answer = run.answer("p1")
    message_id = answer["result"]["messageId"]
    inserted = [u for u in run.updates() if u.get("sessionUpdate") == "user_message"]
    assert [u["messageId"] for u in inserted][:1] == [message_id], report
    check_turn(run, run.step_at(2), run.step_at(5), [("running", None), ("idle", "end_turn")], "w0 w1 w2 ")

    # A permission: requires_action while it is pending, running again once answered.
    check_turn(
        run,
        run.step_at(5),
        run.step_at(9),
        [("running", None), ("requires_action", None), ("running", None), ("idle", "end_turn")],
        "permission outcome: selected allow",
    )

    # A held prompt withdrawn with $/cancel_request gets -32800 and the running turn goes on.
    withdrawn_at, withdrawn = run.answer("p4")
    assert withdrawn.get("error", {}).get("code") == CANCELLED, report
    assert run.states(run.step_at(9), withdrawn_at) == [("running", None)], report
    # session/cancel: the running turn ends idle "cancelled", the other held prompt gets -32800.
    cancel_at = run.step_at(15)
    assert run.states(cancel_at, run.step_at(18)) == [("idle", "cancelled")], report
    held_at, held = run.answer("p5")
    assert held.get("error", {}).get("code") == CANCELLED, report
    assert held_at > cancel_at, report
    assert not any(u.get("sessionUpdate") == "user_message" and "held" in str(u) for u in run.updates()), (
        report
    )

    # A cancel during a permission request: the agent withdraws it ($/cancel_request), the
    # client answers that with the `cancelled` outcome, the turn ends idle "cancelled".
    permission = run.events("permission")[-1]
    cancel_at = run.step_at(20)
    withdrawals = [
        m
        for m in run.wire("in", cancel_at)
        if m.get("method") == "$/cancel_request" and m["params"]["requestId"] == permission["id"]
    ]
    assert withdrawals, report
    assert [r["result"] for r in run.responses_to(permission["id"], cancel_at)] == [
        {"outcome": {"outcome": "cancelled"}}
    ], report
    assert run.states(cancel_at, run.step_at(22)) == [("idle", "cancelled")], report
    assert {
        "sessionUpdate": "tool_call_update",
        "toolCallId": permission["request"]["subject"]["toolCall"]["toolCallId"],
        "status": "cancelled",
    } in [{k: u.get(k) for k in ("sessionUpdate", "toolCallId", "status")} for u in run.updates(cancel_at)], (
        report
    )
    check_turn(run, run.step_at(22), run.step_at(24), [("running", None), ("idle", "end_turn")], "after")

    # session/close is answered (an empty result) and the SDK client got every update parsed.
    assert run.wire("in")[-1] == {"jsonrpc": "2.0", "id": run.wire("out")[-1]["id"], "result": {}}, report
    assert run.delivered() == run.updates(), report


@pytest.mark.parametrize(("client_kind", "agent_kind"), [("python", "typescript"), ("typescript", "python")])
async def test_v2_sdks_leave_cancellation_to_the_app(
    interop_peers: PeerInstaller, client_kind: str, agent_kind: str, tmp_path: Path
) -> None:
    """An agent that does nothing about ``session/cancel``: neither SDK (agent side or client
    side) emits an idle ``cancelled``, answers the held prompts, answers a pending permission
    request or gives up waiting: the work ends on its own, ``end_turn``, and then the held prompt
    runs; the permission request stays open until the client's user answers it. The two crossed
    pairs put each SDK in each role (the same-SDK pairs, run by hand, behave the same)."""
    v2_client = v2_sdk_or_skip(interop_peers, client_kind)
    v2_agent = v2_sdk_or_skip(interop_peers, agent_kind)
    plan = (
        Plan()
        .initialize()
        .new_session()
        .prompt("/oblivious 1000", "p1")  # 2
        .wait("agent_message_chunk")
        .prompt("held", "p2")  # 4
        .cancel()  # 5
        .wait("idle")  # 6
        .await_prompt("p2")
        .wait("idle")
        .prompt("/permission-oblivious", "p3")  # 9
        .wait_permission()
        .cancel()  # 11
        .answer_permission("allow")  # 12
        .wait("idle")
    )
    run = (await run_plan(v2_client, plan, v2_agent.script("agent"), tmp_path, env=v2_agent.env)).check()
    report = run.report()
    assert run.run.stderr.count("session/cancel ignored") == 2, report

    # The first idle after the cancel is the work's own end, not a cancellation.
    cancel_at = run.step_at(5)
    assert run.states(cancel_at, run.step_at(9))[:1] == [("idle", "end_turn")], report
    assert all(reason != "cancelled" for _, reason in run.states()), report
    # The held prompt was not answered -32800: it was inserted once the work ended, and ran.
    first_idle = run.position(
        lambda r: (
            r["ev"] == "wire"
            and r["d"] == "in"
            and r["m"].get("params", {}).get("update", {}).get("state") == "idle"
        ),
        after=cancel_at,
    )
    answered_at, answer = run.answer("p2")
    assert "messageId" in answer.get("result", {}), report
    assert answered_at > first_idle, report
    assert "held" in run.text(first_idle, run.step_at(9)), report

    # The permission request pending at the cancel: nothing answered it or withdrew it until the
    # plan's own answer, which the agent got.
    permission = run.events("permission")[-1]
    cancel_at, answered_step = run.step_at(11), run.step_at(12)
    between = [
        m
        for m in run.wire("out", cancel_at, answered_step)
        if "method" not in m and m.get("id") == permission["id"]
    ]
    assert between == [], report
    assert [r["result"]["outcome"] for r in run.responses_to(permission["id"])] == [
        {"outcome": "selected", "optionId": "allow"}
    ], report
    assert not [m for m in run.wire("in", cancel_at) if m.get("method") == "$/cancel_request"], report
    assert run.text(answered_step).endswith("permission outcome: selected allow"), report
    assert run.states(answered_step)[-1] == ("idle", "end_turn"), report
