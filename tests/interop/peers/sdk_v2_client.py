"""An ACP v2 client written with the official Python SDK's ``acp.experimental.v2`` (1.0.0rc3+),
driving any v2 agent given as a command, by a plan.

Usage: ``python sdk_v2_client.py PLAN -- AGENT_COMMAND...`` (or ``-- URL``: a remote agent,
``ws://`` or ``http://``, reached with the SDK's WebSocket or Streamable HTTP transport, which
need its ``[http]`` extra). PLAN is a JSON list of steps (see below), run in order. The agent runs with this process's environment and working directory; its
stderr is ours. Prints JSON lines on stdout, as they happen, for a test to read:

- ``{"ev": "wire", "d": "in"|"out", "t": T, "m": MESSAGE}``: every JSON-RPC message through the
  SDK connection (its stream observer), both ways;
- ``{"ev": "step", "i": I, "step": STEP}`` as each step starts, and ``{"ev": "result", "i": I,
  ...}`` for the steps that get an answer;
- ``{"ev": "update", "t": T, "u": UPDATE}``: each ``session/update`` the SDK handed to the
  client (parsed by the SDK; an update it could not parse never gets here, only to ``wire``);
- ``{"ev": "permission", "n": N, "id": ID, "request": PARAMS}`` when the agent asks, and
  ``{"ev": "permission_answer", "n": N, "response": ...}`` / ``{"ev": "permission_withdrawn",
  "n": N}`` (the agent's ``$/cancel_request`` reached the handler: the SDK cancels its task; this
  client then answers the ``cancelled`` outcome, as the v2 schema asks);
- ``{"ev": "prompt_settled", "as": NAME, "result"|"error": ...}`` when a prompt is answered;
- last, ``{"ev": "end", "failure": null|TEXT, "agent_exit": CODE}``.

Steps (``{"op": ...}``):

- ``initialize``: ``protocolVersion`` (default 2); ``new_session``; ``set_config``
  (``configId``, ``value``); ``close_session``; ``resume`` (``replay``: from the start);
  ``new_session`` and ``resume`` send only what the SDK sends by default (no ``mcpServers``,
  which v2 made optional) unless the step gives ``mcpServers``;
- ``prompt`` (``text``, ``as``: a name): sent, not awaited (``{"ev": "prompt_sent", "as": NAME,
  "id": ID}`` once it is on the wire); ``await_prompt`` (``as``): until its answer arrives (on the
  wire: the SDK drops the answer to a prompt its caller withdrew); ``withdraw`` (``as``): cancel the task awaiting it (the SDK's way to cancel a
  request: it sends ``$/cancel_request``);
- ``cancel``: ``session/cancel``;
- ``wait_update`` (``kind``: a ``sessionUpdate`` value, or ``idle`` / ``running`` /
  ``requires_action`` for a ``state_update``; ``count``, default 1): until that many such updates
  arrived past the cursor, which then moves past the last one;
- ``wait_permission``: until a permission request is pending that no step waited for yet;
  ``answer_permission`` (``option``: ``allow`` / ``reject`` picks by kind, ``cancelled`` answers
  that outcome): answers the oldest pending one;
- ``restart``: closes the connection (the agent's stdin ends), waits for the agent to exit,
  starts it again (then ``initialize`` again).

Each wait fails the run after ``timeout`` seconds (default 30).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from typing import Any

from acp.experimental import v2
from acp.experimental.v2 import schema

T0 = time.monotonic()


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, default=repr) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return model


def log(*parts: Any) -> None:
    print("sdk_v2_client:", *parts, file=sys.stderr, flush=True)


class Failure(Exception):
    pass


class Permission:
    def __init__(self, n: int, request_id: Any, params: dict[str, Any], options: list[Any]) -> None:
        self.n = n
        self.id = request_id
        self.params = params
        self.options = options
        self.answer: asyncio.Future[schema.RequestPermissionResponse] = (
            asyncio.get_running_loop().create_future()
        )
        self.seen = False
        self.done = False


class PlanClient:
    """Implements the SDK's v2 ``Client`` protocol; records everything it is handed."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[Permission] = []
        self.changed = asyncio.Event()
        self.wire: list[dict[str, Any]] = []

    def observe(self, event: Any) -> None:
        direction = "in" if getattr(event.direction, "value", str(event.direction)) == "incoming" else "out"
        record = {"ev": "wire", "d": direction, "t": round(time.monotonic() - T0, 4), "m": event.message}
        self.wire.append(record)
        emit(record)
        self.poke()

    def outgoing(self, method: str) -> list[dict[str, Any]]:
        return [e["m"] for e in self.wire if e["d"] == "out" and e["m"].get("method") == method]

    def answer_to(self, request_id: Any) -> dict[str, Any] | None:
        for e in self.wire:
            m: dict[str, Any] = e["m"]
            if e["d"] == "in" and "method" not in m and m.get("id") == request_id:
                return m
        return None

    def poke(self) -> None:
        self.changed.set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        record = dump(update)
        self.updates.append(record)
        emit({"ev": "update", "t": round(time.monotonic() - T0, 4), "u": record})
        self.poke()

    async def request_permission(
        self, session_id: str, title: str, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        claimed = {p.id for p in self.permissions}
        asked = [
            e["m"]
            for e in self.wire
            if e["d"] == "in"
            and e["m"].get("method") == "session/request_permission"
            and e["m"]["id"] not in claimed
        ]
        request_id = asked[0]["id"] if asked else None
        params = asked[0]["params"] if asked else {"title": title}
        permission = Permission(len(self.permissions) + 1, request_id, params, options)
        self.permissions.append(permission)
        emit({"ev": "permission", "n": permission.n, "id": request_id, "request": params})
        self.poke()
        try:
            response = await permission.answer
        except asyncio.CancelledError:
            # The agent withdrew the request ($/cancel_request): the SDK cancelled this handler.
            # v2 asks the client to answer a withdrawn permission with the `cancelled` outcome.
            permission.done = True
            emit({"ev": "permission_withdrawn", "n": permission.n})
            self.poke()
            return schema.RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome())
        permission.done = True
        emit({"ev": "permission_answer", "n": permission.n, "response": dump(response)})
        return response


async def until(client: PlanClient, predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Failure(f"timed out after {timeout}s waiting for {what}")
        client.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(client.changed.wait(), remaining)


def matches(update: dict[str, Any], kind: str) -> bool:
    if kind in ("idle", "running", "requires_action"):
        return update.get("sessionUpdate") == "state_update" and update.get("state") == kind
    return update.get("sessionUpdate") == kind


class Runner:
    def __init__(self, plan: list[dict[str, Any]], command: list[str]) -> None:
        self.plan = plan
        self.command = command
        self.client = PlanClient()
        self.conn: Any = None
        self.process: asyncio.subprocess.Process | None = None
        self.session_id: str | None = None
        self.prompts: dict[str, asyncio.Task[Any]] = {}
        self.prompt_ids: dict[str, Any] = {}
        self.cursor = 0
        self.remote = len(command) == 1 and command[0].startswith(("ws://", "http://"))
        """The agent is a URL (``acp-driver serve``...), reached with the SDK's transports."""

    async def start(self) -> None:
        if self.remote:
            # A remote agent: the SDK's transports (its ``[http]`` extra), one connection.
            url = self.command[0]
            if url.startswith("ws"):
                from acp.ws import create_websocket_stream

                transport = await create_websocket_stream(url)
            else:
                from acp.http import create_http_stream

                transport = create_http_stream(url)
            self.conn = v2.connect_to_agent(self.client, transport, observers=[self.client.observe])
            return
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.conn = v2.connect_to_agent(
            self.client, self.process.stdin, self.process.stdout, observers=[self.client.observe]
        )

    async def stop(self) -> int | None:
        """Close the connection (the agent reads end of input) and wait for the agent to exit
        (a remote agent: 0 once the connection is closed)."""
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
        if self.remote:
            return 0
        process = self.process
        if process is None:
            return None
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                process.stdin.close()
        try:
            async with asyncio.timeout(10):
                return await process.wait()
        except TimeoutError:
            log("the agent did not exit within 10 s of its stdin closing: killing it")
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            return None

    def settled(self, name: str, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            emit({"ev": "prompt_settled", "as": name, "error": {"cancelled_by_caller": True}})
        elif (error := task.exception()) is not None:
            data = {"code": getattr(error, "code", None), "message": str(error)}
            emit({"ev": "prompt_settled", "as": name, "error": data})
        else:
            emit({"ev": "prompt_settled", "as": name, "result": dump(task.result())})
        self.client.poke()

    async def step(self, i: int, step: dict[str, Any]) -> None:
        op = step["op"]
        timeout = float(step.get("timeout", 30))
        conn = self.conn
        if op == "initialize":
            response = await conn.initialize(
                protocol_version=int(step.get("protocolVersion", v2.PROTOCOL_VERSION)),
                info=schema.Implementation(name="sdk-v2-plan-client", version="0"),
                capabilities=schema.ClientCapabilities(),
            )
            emit({"ev": "result", "i": i, "result": dump(response)})
        elif op == "new_session":
            # As the SDK's client is called by default: only what v2 requires (no mcpServers),
            # unless the plan says otherwise.
            extra = {"mcp_servers": step["mcpServers"]} if "mcpServers" in step else {}
            response = await conn.new_session(cwd=step.get("cwd", os.getcwd()), **extra)
            self.session_id = response.session_id
            emit({"ev": "result", "i": i, "result": dump(response)})
        elif op == "set_config":
            response = await conn.set_config_option(
                config_id=step["configId"], session_id=self.session_id, value=step["value"]
            )
            emit({"ev": "result", "i": i, "result": dump(response)})
        elif op == "close_session":
            response = await conn.close_session(session_id=self.session_id)
            emit({"ev": "result", "i": i, "result": dump(response)})
        elif op == "resume":
            replay = schema.ReplayFromStartVariant() if step.get("replay") else None
            extra = {"mcp_servers": step["mcpServers"]} if "mcpServers" in step else {}
            response = await conn.resume_session(
                session_id=self.session_id, cwd=step.get("cwd", os.getcwd()), replay_from=replay, **extra
            )
            emit({"ev": "result", "i": i, "result": dump(response)})
        elif op == "prompt":
            name = step["as"]
            blocks = [schema.TextContentBlock(text=step["text"])]
            task = asyncio.ensure_future(conn.prompt(session_id=self.session_id, prompt=blocks))
            task.add_done_callback(lambda t, name=name: self.settled(name, t))
            self.prompts[name] = task

            def sent() -> Any:
                known = set(self.prompt_ids.values())
                ids = [m["id"] for m in self.client.outgoing("session/prompt") if m["id"] not in known]
                return ids[0] if ids else None

            self.prompt_ids[name] = await until(self.client, sent, timeout, f"prompt {name!r} to go out")
            emit({"ev": "prompt_sent", "as": name, "id": self.prompt_ids[name]})
        elif op == "await_prompt":
            # The answer on the wire: the SDK drops the one to a prompt its caller withdrew.
            request_id = self.prompt_ids[step["as"]]
            await until(
                self.client,
                lambda: self.client.answer_to(request_id),
                timeout,
                f"the answer to prompt {step['as']!r}",
            )
        elif op == "withdraw":
            self.prompts[step["as"]].cancel()
        elif op == "cancel":
            await conn.cancel_session(session_id=self.session_id)
        elif op == "wait_update":
            kind, count = step["kind"], int(step.get("count", 1))

            def found() -> bool:
                seen = 0
                for index in range(self.cursor, len(self.client.updates)):
                    if matches(self.client.updates[index], kind):
                        seen += 1
                        if seen == count:
                            self.cursor = index + 1
                            return True
                return False

            await until(self.client, found, timeout, f"{count} {kind} update(s)")
        elif op == "wait_permission":

            def pending() -> Permission | None:
                return next((p for p in self.client.permissions if not p.seen and not p.done), None)

            permission = await until(self.client, pending, timeout, "a permission request")
            permission.seen = True
        elif op == "answer_permission":
            permission = next(
                (p for p in self.client.permissions if not p.done and not p.answer.done()), None
            )
            if permission is None:
                raise Failure("no pending permission request to answer")
            choice = step["option"]
            if choice == "cancelled":
                outcome: Any = schema.CancelledPermissionOutcome()
            else:
                option = next(o for o in permission.options if str(o.kind).startswith(choice))
                outcome = schema.SelectedPermissionOutcomeVariant(option_id=option.option_id)
            permission.answer.set_result(schema.RequestPermissionResponse(outcome=outcome))
        elif op == "restart":
            code = await self.stop()
            # A new connection: its request ids start again.
            self.client.wire.clear()
            self.prompt_ids.clear()
            emit({"ev": "result", "i": i, "agent_exit": code})
            await self.start()
        else:
            raise Failure(f"unknown step {op!r}")

    async def run(self) -> None:
        await self.start()
        for i, step in enumerate(self.plan):
            emit({"ev": "step", "i": i, "step": step})
            await self.step(i, step)


async def main(plan: list[dict[str, Any]], command: list[str]) -> int:
    runner = Runner(plan, command)
    failure: str | None = None
    try:
        async with asyncio.timeout(120):
            await runner.run()
    except Failure as exc:
        failure = str(exc)
    except Exception as exc:  # reported, not raised: the test reads it
        failure = f"{type(exc).__name__}: {exc}"
    for task in runner.prompts.values():
        task.cancel()
    code = await runner.stop()
    emit({"ev": "end", "failure": failure, "agent_exit": code})
    return 1 if failure else 0


if __name__ == "__main__":
    separator = sys.argv.index("--")
    sys.exit(asyncio.run(main(json.loads(sys.argv[1]), sys.argv[separator + 1 :])))
