"""An ACP client written with the official Python SDK, driving OUR reference agent.

Run as ``python sdk_client.py SCENARIO`` with ``agent-client-protocol`` (0.12.x or 1.0.x)
installed. It spawns the agent with the SDK's own ``acp.spawn_agent_process`` (command from
``ACP_AGENT_PYTHON`` + ``ACP_AGENT_SCRIPT``; ``ACP_INTEROP_TRACE_FILE`` is passed on), runs one
scenario with the SDK's ``ClientSideConnection`` and prints ONE JSON object on stdout: the
scenario's observations plus ``wire``, every message the SDK connection saw (its stream
observers), and ``agent_exit``, the agent's exit status after the SDK closed it.

Scenarios:

- ``turn``: one prompt with thought, plan, message chunks, a tool call and a permission
  request (answered by this client: the first ``allow_*`` option); reports the updates.
- ``session_cancel``: a prompt that sleeps; after its first update, ``session/cancel``;
  reports the stop reason.
- ``session_cancel_now``: the same, the cancel sent as soon as the prompt is on the wire (an
  agent that hangs says nothing first).
- ``hold``: a prompt that sleeps; after its first update, this client waits (to be killed).
- ``cancel_request_prompt`` (SDK 1.0+): the task awaiting ``conn.prompt`` is cancelled after
  the first update: the SDK sends ``$/cancel_request`` and drops the answer, which this script
  still sees through its observer and reports as ``answer``.
- ``cancel_request_ext`` (SDK 1.0+): the same for the extension request
  ``_acp_driver/sleep {"ms": 30000}``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import time
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    RequestPermissionResponse,
    TextContentBlock,
)

SDK_VERSION = importlib.metadata.version("agent-client-protocol")
TURN_PROMPT = "/think pondering\n/plan\n/stream 3 0\n/tool lookup\n/permission"
SLEEPY_PROMPT = "/stream 1 0\n/sleep 30000"


def log(*parts: Any) -> None:
    print("sdk_client:", *parts, file=sys.stderr, flush=True)


class InteropClient:
    """Implements the SDK's ``acp.Client`` protocol (only what the reference agent needs)."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.got_update = asyncio.Event()
        self.permission_requests: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.got_update.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            {"options": [o.model_dump(mode="json", by_alias=True) for o in options], "session_id": session_id}
        )
        for option in options:
            if str(option.kind).startswith("allow"):
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


class Wire:
    """The SDK connection's stream observer: every message in and out, with a timestamp."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def __call__(self, event: Any) -> None:
        direction = getattr(event.direction, "value", str(event.direction))
        self.messages.append({"d": direction, "t": time.monotonic(), "m": event.message})

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [e["m"] for e in self.messages if e["d"] == "outgoing" and e["m"].get("method") == method]

    def answer_to(self, request_id: Any) -> tuple[float, dict[str, Any]] | None:
        for e in self.messages:
            m = e["m"]
            if e["d"] == "incoming" and "method" not in m and m.get("id") == request_id:
                return e["t"], m
        return None


async def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


async def scenario(name: str, conn: Any, client: InteropClient, wire: Wire, out: dict[str, Any]) -> None:
    init = await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="sdk-interop-client", version=SDK_VERSION),
    )
    out["agent_info"] = init.agent_info.model_dump(mode="json", by_alias=True) if init.agent_info else None
    session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
    sid = session.session_id

    if name == "turn":
        response = await conn.prompt(session_id=sid, prompt=[text_block(TURN_PROMPT)])
        out["stop_reason"] = response.stop_reason
        out["permission_requests"] = client.permission_requests
        return

    if name == "hold":
        task = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block(SLEEPY_PROMPT)]))
        await asyncio.wait_for(client.got_update.wait(), 30)
        log("holding")
        await asyncio.sleep(3600)

    if name in ("session_cancel", "session_cancel_now"):
        task = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block(SLEEPY_PROMPT)]))
        if name == "session_cancel":
            await asyncio.wait_for(client.got_update.wait(), 30)
        else:
            await wait_for(lambda: bool(wire.sent("session/prompt")), 30, "the prompt to go out")
        started = time.monotonic()
        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(task, 30)
        out["stop_reason"] = response.stop_reason
        out["cancel_to_answer"] = time.monotonic() - started
        return

    if name in ("cancel_request_prompt", "cancel_request_ext"):
        if name == "cancel_request_prompt":
            method = "session/prompt"
            task = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block(SLEEPY_PROMPT)]))
            await asyncio.wait_for(client.got_update.wait(), 30)
        else:
            method = "_acp_driver/sleep"
            task = asyncio.ensure_future(conn.ext_method("acp_driver/sleep", {"ms": 30000}))
            await wait_for(lambda: bool(wire.sent(method)), 30, f"{method} to go out")
            # No wait for the handler to start: a $/cancel_request that arrives first is answered
            # -32800 all the same (the case the test is about is the answer, not the timing).
        (request,) = wire.sent(method)
        started = time.monotonic()
        task.cancel()  # the SDK 1.0 way to cancel a request: cancel the task awaiting it
        try:
            await task
        except asyncio.CancelledError:
            out["caller_saw"] = {"cancelled": True}
        else:
            out["caller_saw"] = {"result": True}
        out["request_id"] = request["id"]
        # The SDK dropped the answer; its observer still saw it arrive.
        await wait_for(lambda: wire.answer_to(request["id"]) is not None, 10, f"the answer to {method}")
        answered_at, answer = wire.answer_to(request["id"]) or (0.0, {})
        out["answer"] = answer
        out["cancel_to_answer"] = answered_at - started
        return

    raise SystemExit(f"unknown scenario {name!r}")


async def main(name: str) -> dict[str, Any]:
    client = InteropClient()
    wire = Wire()
    out: dict[str, Any] = {"sdk_version": SDK_VERSION, "scenario": name}
    command = os.environ["ACP_AGENT_PYTHON"]
    args = [os.environ["ACP_AGENT_SCRIPT"]]
    env = {k: v for k, v in os.environ.items() if k.startswith("ACP_INTEROP_")}
    try:
        async with asyncio.timeout(60):
            async with spawn_agent_process(
                client,
                command,
                *args,
                env=env,
                transport_kwargs={"stderr": None},  # the agent's stderr goes to ours
                observers=[wire],
            ) as (conn, process):
                await scenario(name, conn, client, wire, out)
            out["agent_exit"] = process.returncode
    finally:
        out["updates"] = client.updates
        out["wire"] = wire.messages
    return out


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1]))
    print(json.dumps(result, default=repr))
