"""Our host driver (``acp_driver.driver``) against agents written with the official SDKs.

The agents are ``peers/sdk_agent.py`` (the official Python SDK's ``acp.run_agent``, run in a
venv with each pinned SDK version) and ``peers/ts_agent.mjs`` (the TypeScript SDK's agent app
on ``ndJsonStream``); fixture ``sdk`` runs every test against each. A tracer on our driver's
connection records the wire: "out" is every message our driver queued, "in" every line it read.
Each test ends by checking everything our driver emitted against the official ACP schema. The
cancels (``both_loops``) also run with our driver on uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from acp_driver.core import ErrorCode, RequestCancelledError
from acp_driver.driver import (
    AgentMessageChunk,
    ClientServices,
    LadderPolicy,
    PermissionPolicy,
    PermissionRequest,
    PromptTurn,
    RemoteAgent,
    Resolution,
    TurnResult,
    Update,
    allow_all,
    launch,
)

from ..waiting import eventually
from ..wire import first_update
from .pipe_peer import Trace
from .schema_check import assert_conforms
from .sdk_peers import SdkPeer

pytestmark = pytest.mark.interop

CANCEL = "$/cancel_request"
PERMISSION = "session/request_permission"
LADDER = LadderPolicy(budget=20.0)  # $/cancel_request at 10 s: a polite agent resolves long before
QUICK = 5.0  # seconds a cancel may take to land against a polite peer


@dataclass
class Driven:
    """Our driver attached to one SDK agent."""

    agent: RemoteAgent
    trace: Trace
    sdk: SdkPeer

    def report(self) -> str:
        return (
            f"--- {self.sdk.id}: our driver's trace ---\n{self.trace.dump()}\n"
            f"--- agent stderr ---\n{self.agent.stderr.describe()}"
        )

    def out(self, **match: Any) -> list[dict[str, Any]]:
        return [m for m in self.trace.messages("out") if all(m.get(k) == v for k, v in match.items())]

    def inc(self, **match: Any) -> list[dict[str, Any]]:
        return [m for m in self.trace.messages("in") if all(m.get(k) == v for k, v in match.items())]

    def answers_to(self, rid: Any) -> list[dict[str, Any]]:
        """Our responses to the agent's request ``rid``."""
        return [m for m in self.trace.messages("out") if "method" not in m and m.get("id") == rid]

    def conforms(self, *expect: str) -> None:
        assert_conforms(
            [(d, data) for d, _, data in self.trace.lines],
            "client",
            expect=("request initialize", *expect),
        )


_LAUNCH_TAKES_TRACER = "tracer" in inspect.signature(RemoteAgent.launch).parameters


@contextlib.asynccontextmanager
async def drive(sdk: SdkPeer, permission: PermissionPolicy = allow_all) -> AsyncIterator[Driven]:
    """Launch the SDK's agent with our driver (tracer on from ``initialize``); shut it down after."""
    trace = Trace()
    options: dict[str, Any] = {
        "env": {**os.environ, **sdk.env},
        "services": ClientServices(permission=permission),
        "ladder": LADDER,
        "name": sdk.id,
    }
    async with asyncio.timeout(60):
        if _LAUNCH_TAKES_TRACER:
            agent = await launch(sdk.script("agent"), tracer=trace, **options)
        else:  # an older driver: give its Connection the tracer
            from acp_driver.aio import Connection
            from acp_driver.driver import _agent

            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(_agent, "Connection", lambda **kw: Connection(**{**kw, "tracer": trace}))
                agent = await launch(sdk.script("agent"), **options)
    driven = Driven(agent, trace, sdk)
    try:
        async with asyncio.timeout(60):
            yield driven
    except BaseException:
        await agent.shutdown()
        raise
    finally:
        if os.environ.get("ACP_INTEROP_TRACE"):
            print(f"\n{driven.report()}")
    code = await agent.shutdown()
    # Closing its stdin is how a client says goodbye: the SDK agent must exit by itself, cleanly.
    assert code == 0, f"{sdk.id} agent exit status {code} after we closed its stdin\n{driven.report()}"


def texts(updates: list[Update]) -> list[str]:
    return [u.text for u in updates if isinstance(u, AgentMessageChunk)]


class Dialog:
    """A host permission dialog that never gets an answer: records whether it was closed."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.closed_at: float | None = None
        self.closed_by: str | None = None
        """The reason the host's task was cancelled with (``$/cancel_request``, ``turn ended``...)."""
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> dict[str, Any]:
        self.requests.append(request)
        self.opened.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError as exc:
            self.closed_at = time.monotonic()
            self.closed_by = str(exc.args[0]) if exc.args else None
            raise
        return request.allow()


async def collect(turn: PromptTurn) -> tuple[list[Update], TurnResult]:
    updates = [u async for u in turn]
    return updates, await turn


# ---------------------------------------------------------------------------------- tests


async def test_echo_turn(sdk: SdkPeer) -> None:
    async with drive(sdk) as d:
        assert d.agent.protocol_version == 1
        assert d.agent.info.get("version") == sdk.version, d.agent.info
        session = await d.agent.new_session(os.getcwd())
        updates, result = await collect(session.prompt("héllo ✓ interop"))
    assert texts(updates) == ["héllo ✓ interop"], d.report()
    assert (result.stop_reason, result.resolution, result.error) == ("end_turn", Resolution.COMPLETED, None)
    d.conforms("request session/new", "request session/prompt")


@pytest.mark.both_loops
async def test_session_cancel_stops_the_turn(sdk: SdkPeer) -> None:
    async with drive(sdk) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt("/sleep 30000")
        first = await first_update(turn, d.report)
        assert isinstance(first, AgentMessageChunk), d.report()
        assert first.text == "sleeping", d.report()
        outcome = await turn.cancel()
        result = await turn
    assert result.stop_reason == "cancelled", f"{result}\n{d.report()}"
    assert result.resolution is Resolution.CANCELLED
    assert result.error is None, "the agent must answer stopReason cancelled, not an error"
    # The agent complied with session/cancel alone: no escalation.
    assert (outcome.resolved_by, outcome.steps) == ("session_cancel", ("session_cancel",)), outcome
    assert outcome.elapsed < QUICK, outcome
    assert d.out(method="session/cancel") == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session.id}}
    ], d.report()
    assert not d.out(method=CANCEL), d.report()
    d.conforms("request session/new", "request session/prompt", "notification session/cancel")


async def test_cancel_request_for_an_extension_request(sdk: SdkPeer) -> None:
    """``$/cancel_request`` (scope ``request``) for an in-flight extension request."""
    method = "_ts/sleep" if sdk.kind == "typescript" else "_sdk/sleep"
    # An SDK without $/cancel_request support (0.12) just finishes: keep that sleep short.
    ms = 30000 if sdk.has_cancel_request else 1500
    async with drive(sdk) as d:
        ids: list[Any] = []
        started = time.monotonic()
        call = asyncio.ensure_future(d.agent.connection.request(method, {"ms": ms}, on_sent=ids.append))
        await eventually(
            lambda: any("sleep started" in line for line in d.agent.stderr.lines(50)),
            "the agent to start serving it",
            details=d.report,
        )
        assert d.agent.cancel_request(ids[0]), "the request was not in flight any more"
        cancelled_at = time.monotonic()
        try:
            got: Any = await call
        except RequestCancelledError as exc:
            got = exc
        answered_at = time.monotonic()
    (rid,) = ids
    assert d.out(method=CANCEL) == [{"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": rid}}]
    if sdk.has_cancel_request:
        # Spec: -32800 or a valid result; either way promptly.
        assert isinstance(got, RequestCancelledError) or "slept" in got, f"{got!r}\n{d.report()}"
        assert answered_at - cancelled_at < QUICK, d.report()
    else:
        # SDK 0.12 has no $/cancel_request (cancellation is optional): the request runs to its end.
        assert got == {"slept": ms}, f"{got!r}\n{d.report()}"
        assert answered_at - started >= ms / 1000 - 0.1
    d.conforms(f"request {method}", f"notification {CANCEL}")


@pytest.mark.both_loops
async def test_cancel_request_for_the_prompt(sdk: SdkPeer) -> None:
    """``$/cancel_request`` on the ``session/prompt`` itself (the ladder's second step, by hand)."""
    ms = 30000 if sdk.has_cancel_request else 1500
    async with drive(sdk) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt(f"/sleep {ms}")
        await first_update(turn, d.report)
        assert d.agent.cancel_request(turn.request_id)
        cancelled_at = time.monotonic()
        result = await turn
        answered_at = time.monotonic()
    assert d.out(method=CANCEL) == [
        {"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": turn.request_id}}
    ], d.report()
    if sdk.has_cancel_request:
        # -32800 (the Python SDK cancels the handler) or stopReason cancelled (the TS agent returns
        # it): our driver reports both as a cancelled turn.
        assert (result.stop_reason, result.resolution) == ("cancelled", Resolution.CANCELLED), d.report()
        assert result.error is None or result.error.code == ErrorCode.REQUEST_CANCELLED, result
        assert answered_at - cancelled_at < QUICK
    else:
        assert (result.stop_reason, result.resolution) == ("end_turn", Resolution.COMPLETED), d.report()
    d.conforms("request session/new", "request session/prompt", f"notification {CANCEL}")


async def test_permission_answered_by_our_policy(sdk: SdkPeer) -> None:
    async with drive(sdk, permission=allow_all) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt("/permission")
        updates, result = await collect(turn)
    assert result.stop_reason == "end_turn", d.report()
    assert texts(updates) == ["permission outcome: selected allow"], d.report()
    (call,) = turn.tool_calls.values()
    assert (call.kind, call.status, call.cancelled) == ("edit", "completed", False), call
    (asked,) = d.inc(method=PERMISSION)
    assert d.answers_to(asked["id"]) == [
        {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
        }
    ], d.report()
    d.conforms("request session/new", "request session/prompt", f"result {PERMISSION}")


@pytest.mark.both_loops
async def test_permission_cancelled_with_the_turn(sdk: SdkPeer) -> None:
    """Spec: on ``session/cancel`` the client MUST answer pending permissions ``cancelled``."""
    dialog = Dialog()
    async with drive(sdk, permission=dialog) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt("/permission")
        await asyncio.wait_for(dialog.opened.wait(), 30)
        cancelled_at = time.monotonic()
        outcome = await turn.cancel()
        updates, result = await collect(turn)
        await d.agent.new_session(os.getcwd())  # a round trip: whatever the agent sent before is in
    assert dialog.closed_at is not None, "our driver left the host's permission dialog open"
    assert dialog.closed_at - cancelled_at < 1.0
    (asked,) = d.inc(method=PERMISSION)
    # Exactly one answer, "cancelled" -- also when the agent withdraws the request afterwards.
    assert d.answers_to(asked["id"]) == [
        {"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}}
    ], d.report()
    # ... at once with the session/cancel, not when the turn ended.
    (answered_at,) = [t for t, m in d.trace.timed("out") if "method" not in m and m.get("id") == asked["id"]]
    (turn_answered_at,) = [
        t for t, m in d.trace.timed("in") if "method" not in m and m.get("id") == turn.request_id
    ]
    assert answered_at - cancelled_at < 1.0
    assert answered_at < turn_answered_at, d.report()
    assert texts(updates) == ["permission outcome: cancelled"], f"the agent saw otherwise\n{d.report()}"
    assert (result.stop_reason, result.resolution) == ("cancelled", Resolution.CANCELLED), d.report()
    assert outcome.resolved_by == "session_cancel", outcome
    (call,) = turn.tool_calls.values()
    assert call.status == "failed", call
    d.conforms("request session/new", "notification session/cancel", f"result {PERMISSION}")


async def test_agent_withdraws_its_permission_request(sdk: SdkPeer) -> None:
    """The agent gives up on its own request (internal cancellation) while the turn goes on.

    SDKs with ``$/cancel_request`` send it: our driver must close the host's dialog (cancel the
    policy coroutine) and answer ``-32800``. SDK 0.12 sends nothing: the dialog stays open until
    the turn ends, when our driver closes it (the agent no longer waits for that answer).
    """
    dialog = Dialog()
    async with drive(sdk, permission=dialog) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt("/permission-withdraw 300")
        updates, result = await collect(turn)
        await d.agent.new_session(os.getcwd())  # a round trip: our late answer has gone out before it
    (asked,) = d.inc(method=PERMISSION)
    withdrawals = d.inc(method=CANCEL)
    answers = d.answers_to(asked["id"])
    assert dialog.closed_at is not None, f"the host's dialog was never closed\n{d.report()}"
    assert result.stop_reason == "end_turn", d.report()
    if sdk.has_cancel_request:
        assert withdrawals == [{"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": asked["id"]}}]
        assert [a.get("error", {}).get("code") for a in answers] == [ErrorCode.REQUEST_CANCELLED], d.report()
        # Closed by the withdrawal, not left open until the turn ended (the two may be read
        # together: the turn then resolves first, as it is read, and the task unwinds after).
        assert dialog.closed_by == "$/cancel_request", (dialog.closed_by, d.report())
        expected = (
            "permission outcome: withdrawn" if sdk.kind == "python" else "permission outcome: error -32800"
        )
        assert texts(updates) == [expected], d.report()
    else:
        assert withdrawals == [], d.report()
        assert [a.get("error", {}).get("code") for a in answers] == [ErrorCode.REQUEST_CANCELLED], d.report()
        assert texts(updates) == ["permission outcome: withdrawn"], d.report()
    d.conforms("request session/new", f"error {PERMISSION}")


async def test_prompt_cancel_request_cascades_to_the_permission_request(sdk: SdkPeer) -> None:
    """``$/cancel_request`` on the prompt while its permission request is pending: the SDK
    cancels the prompt's handler, which withdraws the permission request with ``$/cancel_request``
    (Python SDK 1.0: the awaiting task is cancelled; TS: the handler's AbortSignal is passed on);
    our driver closes the dialog and answers ``-32800``."""
    if not sdk.has_cancel_request:
        pytest.skip(f"{sdk.id} does not implement $/cancel_request (added in the SDK's 1.0 line)")
    dialog = Dialog()
    async with drive(sdk, permission=dialog) as d:
        session = await d.agent.new_session(os.getcwd())
        turn = session.prompt("/permission")
        await asyncio.wait_for(dialog.opened.wait(), 30)
        assert d.agent.cancel_request(turn.request_id)
        _, result = await collect(turn)
        await d.agent.new_session(os.getcwd())  # a round trip: whatever the agent sent before is in
    (asked,) = d.inc(method=PERMISSION)
    assert d.inc(method=CANCEL) == [
        {"jsonrpc": "2.0", "method": CANCEL, "params": {"requestId": asked["id"]}}
    ], d.report()
    assert [a.get("error", {}).get("code") for a in d.answers_to(asked["id"])] == [
        ErrorCode.REQUEST_CANCELLED
    ], d.report()
    assert dialog.closed_at is not None
    assert (result.stop_reason, result.resolution) == ("cancelled", Resolution.CANCELLED), d.report()
    d.conforms("request session/new", f"notification {CANCEL}", f"error {PERMISSION}")


async def test_run_with_the_default_protocol_completes_against_an_agent_that_echoes_the_version(
    sdk: SdkPeer,
) -> None:
    """The SDK's agent answers ``initialize`` with the client's own version, as the SDK's echo
    example does: ``acp-driver run`` under its default (``auto``, asking 2) speaks v1 with it,
    says so on stderr when the agent claimed 2, completes the turn and exits 0."""
    import shlex
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "run",
        "--agent",
        shlex.join(sdk.script("agent")),
        "hello from run",
        env={**os.environ, **sdk.env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert "hello from run" in out.decode()
    assert "ACP v1" in err.decode()
    if sdk.kind == "python":  # the Python SDK's agent echoes 2: the note says why v1
        assert "agent claims v2 but answers v1: speaking v1" in err.decode()
