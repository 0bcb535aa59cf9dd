"""The official Python SDK's v2 client (``peers/sdk_v2_client.py`` on the SDK 1.0.0rc3 with its
``[http]`` extra: ``acp.ws`` and ``acp.http`` transports handed to ``acp.experimental.v2``) driving
OUR reference agent served by ``acp-driver serve``, over both profiles (WebSocket and Streamable
HTTP). The relay must keep every v2 guarantee of the agent runtime on the wire: insertion with a
``messageId``, ``running``, one idle per span, held prompts in order, ``$/cancel_request`` on a
held prompt, ``session/cancel`` with prompts held, ``session/close`` (idle before its answer).

The TypeScript SDK 2.4.0's remote transports (``createWebSocketStream``, ``createHttpStream``) are
exercised in v1 by ``test_remote_ts_clients.py``; its v2 client is not run over them here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..remote.serving import ServeProcess
from .schema_check_v2 import V2Schema, assert_conforms_v2
from .sdk_peers import V2Sdk
from .test_v2_sdk_clients_with_our_agent import agent_side, check_span, error_code
from .v2_plan import Plan, run_plan

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

pytest.importorskip("acp.ws")
pytest.importorskip("acp.http")

CANCELLED = -32800
PYTHON_SDK_HERE = V2Sdk("python", "1.0.0rc3", Path(sys.executable), {})
"""The Python SDK of this interpreter (a test dependency, with ``[http]``: the transports)."""


@pytest.mark.parametrize("profile", ["ws", "http"])
async def test_sdk_v2_client_through_serve(v2_schema: V2Schema, profile: str, tmp_path: Path) -> None:
    plan = (
        Plan()
        .initialize()
        .new_session()
        .prompt("/stream 3 10", "p1")  # 2
        .wait("idle")
        .prompt("/stream 3 50", "p2")  # 4
        .wait("agent_message_chunk")
        .prompt("alpha", "p3")
        .wait("idle", 2)
        .await_prompt("p3")
        .prompt("/sleep 30000", "p4")  # 9
        .await_prompt("p4")
        .prompt("held one", "p5")
        .prompt("held two", "p6")
        .withdraw("p5")
        .await_prompt("p5")
        .cancel()  # 15
        .wait("idle")
        .await_prompt("p6")
        .prompt("/sleep 30000", "p7")  # 18
        .await_prompt("p7")
        .step("close_session")  # 20
    )
    async with ServeProcess.start() as server:
        url = server.url if profile == "http" else "ws" + server.url[len("http") :]
        run = (await run_plan(PYTHON_SDK_HERE, plan, [url], tmp_path)).check()
    report = run.report()
    assert run.wire("in")[0]["result"]["protocolVersion"] == 2, report
    check_span(run, "p1", "end_turn", run.step_at(2), run.step_at(4))
    check_span(run, "p2", "end_turn", run.step_at(4), run.step_at(9))
    check_span(run, "p3", "end_turn", run.step_at(4), run.step_at(9))
    assert run.answer("p2")[0] < run.answer("p3")[0], report
    assert error_code(run, "p5") == CANCELLED, report
    assert run.answer("p5")[0] < run.step_at(15), report
    assert error_code(run, "p6") == CANCELLED, report
    assert run.states(run.step_at(9), run.step_at(18)) == [("running", None), ("idle", "cancelled")], report
    close_at = run.step_at(20)
    closed_at = run.position(lambda r: r["ev"] == "result" and r["i"] == 20)
    assert run.states(close_at, closed_at)[-1:] == [("idle", "cancelled")], report
    assert "method" not in run.wire("in", close_at)[-1], report
    assert_conforms_v2(
        v2_schema, agent_side(run), "agent", expect=("result session/prompt", "notification session/update")
    )
