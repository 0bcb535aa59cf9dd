"""Running a v2 client peer script (``peers/sdk_v2_client.py``, ``peers/ts_v2_client.mjs``) on a
plan, and reading the JSON lines it printed: the wire both ways, the updates the SDK handed over,
the permission requests, the prompts' answers, in the order they happened.

A plan is a list of steps (see the client scripts' docstring); ``Plan`` builds one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .peer_scripts import ScriptRun, run_script
from .sdk_peers import V2Sdk

Record = dict[str, Any]


class Plan(list[dict[str, Any]]):
    """The steps, written as calls: ``Plan().initialize().new_session().prompt("hi", "p1")...``."""

    def step(self, op: str, **fields: Any) -> Plan:
        self.append({"op": op, **fields})
        return self

    def initialize(self, protocol_version: int = 2) -> Plan:
        return self.step("initialize", protocolVersion=protocol_version)

    def new_session(self) -> Plan:
        return self.step("new_session")

    def prompt(self, text: str, name: str) -> Plan:
        return self.step("prompt", text=text, **{"as": name})

    def await_prompt(self, name: str) -> Plan:
        return self.step("await_prompt", **{"as": name})

    def withdraw(self, name: str) -> Plan:
        return self.step("withdraw", **{"as": name})

    def cancel(self) -> Plan:
        return self.step("cancel")

    def wait(self, kind: str, count: int = 1) -> Plan:
        return self.step("wait_update", kind=kind, count=count)

    def wait_permission(self) -> Plan:
        return self.step("wait_permission")

    def answer_permission(self, option: str) -> Plan:
        return self.step("answer_permission", option=option)


class PlanRun:
    """What one run of a client script printed, in order."""

    def __init__(self, run: ScriptRun) -> None:
        self.run = run
        self.records: list[Record] = []
        for line in run.stdout.splitlines():
            if line.strip():
                try:
                    self.records.append(json.loads(line))
                except ValueError:
                    pytest.fail(f"the client printed a line that is not JSON: {line!r}\n{self.report()}")
        ends = [r for r in self.records if r["ev"] == "end"]
        self.end: Record = (
            ends[-1] if ends else {"failure": "the client printed no end record", "agent_exit": None}
        )

    # -- the run as a whole ------------------------------------------------------------------

    def report(self, width: int = 400) -> str:
        """The run as a reader wants it in a failure message: wire, steps and events."""
        lines = []
        for r in self.records:
            if r["ev"] == "wire":
                arrow = "<-" if r["d"] == "in" else "->"
                lines.append(f"{r['t']:8.3f} {arrow} {json.dumps(r['m'])[:width]}")
            elif r["ev"] != "update":
                lines.append(f"         ## {json.dumps(r)[:width]}")
        return f"{self.run.report()}\n--- what the client saw ---\n" + "\n".join(lines)

    def check(self) -> PlanRun:
        """Fail the test unless the plan ran to its end and the agent exited by itself, 0."""
        assert self.end["failure"] is None, f"the plan failed: {self.end['failure']}\n{self.report()}"
        assert self.end["agent_exit"] == 0, f"the agent exited {self.end['agent_exit']}\n{self.report()}"
        return self

    # -- positions ---------------------------------------------------------------------------

    def position(self, predicate: Callable[[Record], bool], after: int = -1) -> int:
        """Index of the first record past ``after`` that matches; fails the test if none does."""
        for index in range(after + 1, len(self.records)):
            if predicate(self.records[index]):
                return index
        pytest.fail(f"no such record in the run\n{self.report()}", pytrace=False)

    def step_at(self, i: int) -> int:
        """Where plan step ``i`` started."""
        return self.position(lambda r: r["ev"] == "step" and r["i"] == i)

    # -- the wire ----------------------------------------------------------------------------

    def wire(self, direction: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The messages that went ``in`` (agent to client) or ``out``, between two positions."""
        window = self.records[start:stop]
        return [r["m"] for r in window if r["ev"] == "wire" and r["d"] == direction]

    def updates(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The ``session/update`` updates that arrived on the wire, between two positions."""
        return [
            m["params"]["update"]
            for m in self.wire("in", start, stop)
            if m.get("method") == "session/update" and isinstance(m.get("params"), dict)
        ]

    def delivered(self) -> list[dict[str, Any]]:
        """The updates the SDK handed to the client's handler (what it could parse)."""
        return [r["u"] for r in self.records if r["ev"] == "update"]

    def states(self, start: int = 0, stop: int | None = None) -> list[tuple[Any, Any]]:
        """The ``state_update`` sequence: ``(state, stopReason)`` pairs."""
        return [
            (u.get("state"), u.get("stopReason"))
            for u in self.updates(start, stop)
            if u.get("sessionUpdate") == "state_update"
        ]

    def text(self, start: int = 0, stop: int | None = None) -> str:
        """The agent's message text (chunks), between two positions."""
        return "".join(
            u["content"].get("text", "")
            for u in self.updates(start, stop)
            if u.get("sessionUpdate") == "agent_message_chunk" and isinstance(u.get("content"), dict)
        )

    def sent(self, name: str) -> tuple[int, Any]:
        """Position and JSON-RPC id of the prompt named ``name``."""
        index = self.position(lambda r: r["ev"] == "prompt_sent" and r["as"] == name)
        return index, self.records[index]["id"]

    def answer(self, name: str) -> tuple[int, dict[str, Any]]:
        """Position and message of the answer to the prompt named ``name`` (on the wire)."""
        sent_at, request_id = self.sent(name)
        # From the step that sent it: a quick agent answers before the client records
        # ``prompt_sent``, and an HTTP client's observer may see the answer before the request.
        steps = [
            i
            for i in range(sent_at)
            if self.records[i]["ev"] == "step"
            and self.records[i]["step"].get("op") == "prompt"
            and self.records[i]["step"].get("as") == name
        ]
        for index in range(steps[-1] if steps else sent_at, len(self.records)):
            r = self.records[index]
            if (
                r["ev"] == "wire"
                and r["d"] == "in"
                and "method" not in r["m"]
                and r["m"].get("id") == request_id
            ):
                return index, r["m"]
        pytest.fail(f"prompt {name!r} got no answer\n{self.report()}", pytrace=False)

    def responses_to(self, request_id: Any, start: int = 0) -> list[dict[str, Any]]:
        """Every response the client sent to the agent's request ``request_id``, past ``start``."""
        return [m for m in self.wire("out", start) if "method" not in m and m.get("id") == request_id]

    def events(self, kind: str) -> list[Record]:
        return [r for r in self.records if r["ev"] == kind]


async def run_plan(
    client: V2Sdk,
    plan: list[dict[str, Any]],
    agent: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    timeout: float = 150.0,
) -> PlanRun:
    """Run ``client``'s script on ``plan`` against the agent command ``agent``, in ``cwd``; the
    environment is ours less ``drop`` (name prefixes) plus ``env``."""
    argv = [*client.script("client"), json.dumps(plan), "--", *agent]
    run = await run_script(argv, {**client.env, **(env or {})}, timeout=timeout, cwd=cwd, drop=drop)
    return PlanRun(run)
