"""The agent runtime's guarantees, seen on the wire from a raw client over real pipes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver import Connection, RpcError
from acp_driver.aio import AgentProcess, PendingRequest, ProcessGroup

from ..waiting import eventually

HERE = Path(__file__).parent
TRICKY = [sys.executable, str(HERE / "agents" / "tricky.py")]
REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]


class Client:
    """A raw ACP client: records every line, answers what the test tells it to."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.lines: list[tuple[float, str, dict[str, Any]]] = []
        self.conn = Connection(name="test-client", tracer=self._trace)
        self.child: AgentProcess | None = None
        self.process: ProcessGroup | None = None
        self.session_id = ""
        self.held: list[asyncio.Event] = []

    def _trace(self, direction: str, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:  # kept, as evidence: a test must fail, not its tracer
            message = {"notJson": line.decode("utf-8", "replace")}
        self.lines.append((time.monotonic(), direction, message))

    async def spawn(self) -> None:
        self.child = await AgentProcess.spawn(self.argv, self.conn)
        self.process = self.child.process

    async def initialize(self) -> None:
        await self.conn.request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": {"terminal": True}}
        )

    async def start(self) -> None:
        """Spawn the agent, initialize, and open a session."""
        await self.spawn()
        await self.initialize()
        result = await self.conn.request("session/new", self.new_session_params())
        self.session_id = result["sessionId"]

    def new_session_params(self) -> dict[str, Any]:
        return {"cwd": os.getcwd(), "mcpServers": []}  # v1 requires mcpServers

    def prompt(self, text: str) -> PendingRequest:
        """Send a prompt; its future carries the request id (``.rid``)."""
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        return self.conn.request_nowait("session/prompt", params)

    def cancel(self) -> None:
        self.conn.notify_nowait("session/cancel", {"sessionId": self.session_id})

    def received(self, method: str | None = None) -> list[tuple[float, dict[str, Any]]]:
        return [
            (t, m) for t, d, m in self.lines if d == "in" and (method is None or m.get("method") == method)
        ]

    def response_to(self, method: str) -> tuple[float, dict[str, Any]]:
        ids = {m["id"] for _, d, m in self.lines if d == "out" and m.get("method") == method}
        found = [(t, m) for t, d, m in self.lines if d == "in" and "method" not in m and m.get("id") in ids]
        assert found, f"no response to {method}"
        return found[-1]

    async def wait_for_messages(self, method: str, count: int = 1) -> None:
        await eventually(lambda: len(self.received(method)) >= count, f"{count} x {method}")

    async def close(self) -> None:
        await self.conn.aclose()
        if self.child is not None:
            await self.child.reap(term_timeout=1.0)
            self.child.close_stderr()


async def client(argv: list[str]) -> AsyncIterator[Client]:
    c = Client(argv)
    try:
        async with asyncio.timeout(60):
            await c.start()
            yield c
    finally:
        await c.close()


@pytest.fixture
async def tricky() -> AsyncIterator[Client]:
    async for c in client(TRICKY):
        yield c


@pytest.fixture
async def reference() -> AsyncIterator[Client]:
    async for c in client(REFERENCE):
        yield c


@pytest.mark.parametrize("mode", ["raise", "end_turn", "swallow"])
async def test_cancelled_turn_answers_cancelled_whatever_the_handler_does(tricky: Client, mode: str) -> None:
    turn = tricky.prompt(mode)
    await tricky.wait_for_messages("session/update")
    tricky.cancel()
    assert await turn == {"stopReason": "cancelled"}


async def test_swallowed_cancel_is_fenced_after_the_response(tricky: Client) -> None:
    # The handler swallows the cancel; the runtime answers "cancelled" for it after its
    # cancel_timeout and fences the turn. The handler then tries an update and a request: both
    # are refused (TurnEndedError), nothing of the turn reaches the wire after its response.
    turn = tricky.prompt("swallow")
    await tricky.wait_for_messages("session/update")
    tricky.cancel()
    assert await turn == {"stopReason": "cancelled"}
    answered_at, _ = tricky.response_to("session/prompt")
    await tricky.wait_for_messages("_tricky/fenced")
    [(_, note)] = tricky.received("_tricky/fenced")
    assert note["params"] == {"ended": True, "update": "refused", "request": "refused"}
    assert [m for t, m in tricky.received("session/update") if t > answered_at] == []
    assert tricky.received("_test/after_fence") == []


async def test_a_stray_print_never_reaches_the_wire(tricky: Client) -> None:
    # Spec (transports.mdx): "The agent MUST NOT write anything to its stdout that is not a
    # valid ACP message." The runtime moves fd 1 to stderr and keeps a private copy for ACP.
    async with asyncio.timeout(30):  # a broken rule fails here, not at the suite's timeout
        answer = await tricky.prompt("print")
    stray = [m["notJson"] for _, m in tricky.received() if "notJson" in m]
    assert stray == []
    assert answer == {"stopReason": "end_turn"}
    assert tricky.conn.violations == 0


async def test_handler_error_without_cancel_is_passed_through(tricky: Client) -> None:
    with pytest.raises(RpcError) as info:
        await tricky.prompt("error")
    assert info.value.code == -32042
    assert info.value.data == {"why": "test"}


async def test_cascade_cancel_request_for_the_pending_permission_is_on_the_wire(tricky: Client) -> None:
    release = asyncio.Event()

    async def hold(params: Any) -> Any:
        await release.wait()
        return {"outcome": {"outcome": "cancelled"}}

    tricky.conn.on_request("session/request_permission", hold)
    turn = tricky.prompt("permission")
    await tricky.wait_for_messages("session/request_permission")
    _, permission = tricky.received("session/request_permission")[0]
    tricky.cancel()
    assert await turn == {"stopReason": "cancelled"}
    cancels = [m["params"]["requestId"] for _, m in tricky.received("$/cancel_request")]
    assert cancels == [permission["id"]]
    # Order on the wire: the cascade comes before the prompt's response.
    cancel_at = tricky.received("$/cancel_request")[0][0]
    answered_at, _ = tricky.response_to("session/prompt")
    assert cancel_at <= answered_at


async def test_cascade_reaches_requests_made_from_sub_tasks(tricky: Client) -> None:
    started = asyncio.Event()
    calls: list[Any] = []

    async def slow(params: Any) -> Any:
        calls.append(params)
        if len(calls) == 2:
            started.set()
        await asyncio.sleep(60)

    tricky.conn.on_request("_test/slow", slow)
    turn = tricky.prompt("two")
    await asyncio.wait_for(started.wait(), 30)
    tricky.cancel()
    assert await turn == {"stopReason": "cancelled"}
    outgoing_ids = {m["id"] for _, m in tricky.received("_test/slow")}
    cancelled = {m["params"]["requestId"] for _, m in tricky.received("$/cancel_request")}
    assert cancelled == outgoing_ids
    assert tricky.conn.in_flight == (0, 0)


async def test_no_update_after_the_response_for_a_streaming_turn(tricky: Client) -> None:
    turn = tricky.prompt("stream")
    await tricky.wait_for_messages("session/update", 20)
    tricky.cancel()
    assert await turn == {"stopReason": "cancelled"}
    answered_at, _ = tricky.response_to("session/prompt")
    # One pipe keeps order: whatever the turn sent before the agent answers a later request has
    # arrived by the time that answer has.
    await tricky.conn.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
    assert [m for t, m in tricky.received("session/update") if t > answered_at] == []


async def test_cancel_request_on_the_prompt_answers_cancelled(reference: Client) -> None:
    turn = reference.prompt("started\n/sleep 30000")
    await reference.wait_for_messages("session/update")  # the turn is running
    reference.conn.cancel_request(turn.rid)
    assert await turn == {"stopReason": "cancelled"}


async def test_cancel_request_in_the_same_read_as_the_prompt_answers_cancelled(reference: Client) -> None:
    # The agent is stopped while both are written, so it reads them together: its handler for
    # the prompt has not started when the cancel is read.
    assert reference.process is not None
    os.kill(reference.process.pid, signal.SIGSTOP)
    try:
        turn = reference.prompt("/sleep 30000")
        reference.conn.cancel_request(turn.rid)
        await asyncio.sleep(0)  # the end of this loop iteration writes the cancel
    finally:
        os.kill(reference.process.pid, signal.SIGCONT)
    assert await turn == {"stopReason": "cancelled"}


async def test_session_cancel_in_the_same_read_as_the_prompt_answers_cancelled(reference: Client) -> None:
    # session/cancel is handled as it is read; here the prompt's handler has not started (no
    # turn yet) when it is: the cancel must still reach the turn the prompt starts.
    assert reference.process is not None
    os.kill(reference.process.pid, signal.SIGSTOP)
    try:
        turn = reference.prompt("/sleep 30000")
        reference.cancel()
        await asyncio.sleep(0)  # the end of this loop iteration writes the cancel
    finally:
        os.kill(reference.process.pid, signal.SIGCONT)
    assert await turn == {"stopReason": "cancelled"}


async def test_idle_cancel_does_not_poison_the_next_turn(reference: Client) -> None:
    reference.cancel()
    reference.conn.notify_nowait("session/cancel", {"sessionId": "unknown-session"})
    # No wait: the pipe keeps order, so the agent reads both cancels before the prompt.
    assert await reference.prompt("hello") == {"stopReason": "end_turn"}


async def test_second_concurrent_prompt_is_refused_and_the_first_is_untouched(reference: Client) -> None:
    first = reference.prompt("/sleep 300\nfirst done")
    # No wait: read in order, the first prompt's handler registers its turn before the second's runs.
    with pytest.raises(RpcError) as info:
        await reference.prompt("second")
    assert info.value.code == -32600
    assert "busy" in info.value.message
    assert await first == {"stopReason": "end_turn"}
    assert await reference.prompt("third") == {"stopReason": "end_turn"}


async def test_capabilities_match_what_is_implemented(reference: Client) -> None:
    init = next(m for _, m in reference.received() if m.get("id") == 1 and "result" in m)
    caps = init["result"]["agentCapabilities"]
    assert caps["loadSession"] is False
    assert caps["sessionCapabilities"] == {"close": {}, "resume": {}}
    for method in ("session/load", "session/list", "authenticate"):
        with pytest.raises(RpcError) as info:
            await reference.conn.request(
                method, {"sessionId": reference.session_id, "cwd": "/", "methodId": "x"}
            )
        assert info.value.code == -32601
    assert await reference.conn.request("session/close", {"sessionId": reference.session_id}) == {}


async def test_capability_gated_calls_send_nothing(reference: Client) -> None:
    # The client advertised terminals but no fs: /read is refused locally, /terminal goes out.
    turn = reference.prompt("/read /etc/hostname")
    assert await turn == {"stopReason": "end_turn"}
    assert reference.received("fs/read_text_file") == []
    texts = [m["params"]["update"]["content"]["text"] for _, m in reference.received("session/update")]
    assert any("does not support fs/read_text_file" in t for t in texts)


async def test_stdin_eof_cancels_in_flight_work_and_exits_quickly() -> None:
    c = Client(REFERENCE)
    try:
        async with asyncio.timeout(60):
            await c.start()
            turn = c.prompt("working\n/sleep 30000")
            await c.wait_for_messages("session/update")
            started = time.monotonic()
            c.conn.close_write()
            assert c.process is not None
            code = await c.process.wait()
            elapsed = time.monotonic() - started
            assert code == 0
            assert elapsed < 5  # the runtime exits within ~1 s; generous for slow machines
            # The in-flight prompt was answered before the exit (stdout still writable).
            assert await turn == {"stopReason": "cancelled"}
    finally:
        await c.close()


# ---------------------------------------------------------------------------- params shape

BAD_PARAMS = [
    ("session/prompt", {"prompt": "SID"}, 'missing required member "prompt"'),
    ("session/prompt", {"prompt": "SID", "x": 1, "promptx": []}, 'missing required member "prompt"'),
    ("session/prompt", {"sessionId": "SID", "prompt": "hello"}, '"prompt" must be an array, got string'),
    ("session/prompt", {"sessionId": "SID", "prompt": ["hello"]}, "prompt[0] must be a content block"),
    ("session/prompt", {"sessionId": 7, "prompt": []}, '"sessionId" must be a string, got integer'),
    (
        "session/prompt",
        {"sessionId": "SID", "prompt": [{"type": "text", "text": 5}]},
        '"text" must be a string',
    ),
    ("session/prompt", {"sessionId": "SID", "prompt": [{"type": "text"}]}, 'missing required member "text"'),
    ("session/prompt", ["SID"], "params must be an object, got array"),
    ("session/new", {"cwd": "/"}, 'missing required member "mcpServers"'),
    ("session/new", {"cwd": "/", "mcpServers": {}}, '"mcpServers" must be an array, got object'),
    ("initialize", {"protocolVersion": True}, '"protocolVersion" must be an integer, got boolean'),
    ("initialize", None, "params must be an object, got null"),
]


@pytest.mark.parametrize(("method", "params", "reason"), BAD_PARAMS)
async def test_params_without_the_required_shape_are_invalid_params(
    reference: Client, method: str, params: Any, reason: str
) -> None:
    if isinstance(params, dict) and params.get("prompt") == "SID":
        params = {"sessionId": reference.session_id}
    elif isinstance(params, dict) and params.get("sessionId") == "SID":
        params = {**params, "sessionId": reference.session_id}
    with pytest.raises(RpcError) as info:
        await reference.conn.request(method, params)
    assert info.value.code == -32602
    assert reason in info.value.message
    # Nothing ran: no turn started, and the session still takes a valid prompt.
    assert reference.received("session/update") == []
    assert await reference.prompt("hi") == {"stopReason": "end_turn"}


async def test_a_prompt_with_lone_surrogates_is_read_and_echoed_with_u_fffd(
    reference: Client,
) -> None:
    # "\udce9" alone is valid JSON text: the runtime reads the prompt (it used to answer -32700
    # with id null, so the client's request hung). The reference agent echoes the text in an
    # update; we never emit a lone surrogate, so the echo carries U+FFFD in its place and the
    # turn ends normally (it used to fail with -32603).
    rid = "raw-1"
    line = (
        b'{"jsonrpc":"2.0","id":"raw-1","method":"session/prompt","params":{"sessionId":"%s",'
        b'"prompt":[{"type":"text","text":"caf\\udce9"}]}}' % reference.session_id.encode()
    )
    reference.conn.send_raw(line)
    await eventually(
        lambda: any(d == "in" and m.get("id") == rid for _, d, m in reference.lines), "the prompt's answer"
    )
    (answer,) = [m for _, d, m in reference.lines if d == "in" and m.get("id") == rid]
    assert answer["result"] == {"stopReason": "end_turn"}
    echoed = [
        m["params"]["update"]["content"]["text"]
        for _, d, m in reference.lines
        if d == "in" and m.get("method") == "session/update"
    ]
    assert "caf\ufffd\n" in echoed
    # The connection and the session still work.
    assert await reference.prompt("hi") == {"stopReason": "end_turn"}
