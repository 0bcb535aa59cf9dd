"""What the run asks each agent beside the audit: what ``--protocol auto`` settles with it, and
where its tools run (the permission probe), over a plain NDJSON conversation."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import PERMISSION_PROMPT, Agent, FakeModel, agent_binary, agent_command, agent_env


class Conversation:
    """An agent process spoken to in plain NDJSON, as a client would: what it writes is read by a
    thread into ``incoming`` (``None`` last, when its output ends); ``close()`` kills its group."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.incoming: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    self.incoming.put(message)
        self.incoming.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.process.stdin.flush()

    def answer_to(
        self, rid: int, timeout: float, on_request: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any] | None:
        """The agent's answer to our request ``rid`` (None: its output ended first). Its own
        requests meanwhile go to ``on_request(message)`` (by default: ignored); ``queue.Empty``
        after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.incoming.get(timeout=max(deadline - time.monotonic(), 0.001))
            if message is None:
                return None
            if "method" not in message and message.get("id") == rid:
                return message
            if "method" in message and "id" in message and on_request is not None:
                on_request(message)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


# ---------------------------------------------------------------------- what auto settles


def negotiation(agent: Agent, cache: Path, model: FakeModel) -> dict[str, Any]:
    """What ``--protocol auto`` (the default of ``run``, ``chat`` and ``check``) settles with the
    agent: one ``initialize`` asking for the newest version with every version's field names, its
    answer read by acp-driver's own negotiation (``core.read_answer``). The audit itself insists on
    v1 (``--protocol 1``); this says whether an agent that answers ``auto`` is judged the same way."""
    from acp_driver import __version__
    from acp_driver.core import NegotiationError, initialize_params, read_answer

    home = cache / "home" / f"{agent.name}-negotiate"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    scratch = cache / "scratch" / f"{agent.name}-negotiate"
    scratch.mkdir(parents=True, exist_ok=True)
    params = initialize_params(
        2, both=True, info={"name": "acp-driver-compat", "version": __version__}, capabilities={}
    )
    talk = Conversation(agent_command(agent, cache), scratch, agent_env(agent, home, model))
    found: dict[str, Any] = {"asked": params["protocolVersion"]}
    try:
        talk.send({"id": 1, "method": "initialize", "params": params})
        answer = talk.answer_to(1, 120)
        if answer is None or "result" not in answer:
            found["error"] = "no answer" if answer is None else json.dumps(answer.get("error"))
        else:
            result = answer["result"]
            found["answered"] = result.get("protocolVersion")
            found["fields"] = sorted(k for k in result if k != "protocolVersion")
            try:
                settled = read_answer("auto", result)
                found["spoken"] = settled.profile.version
                found["note"] = settled.note
            except NegotiationError as exc:
                found["error"] = str(exc)
    except (OSError, queue.Empty) as exc:
        found["error"] = f"no answer: {exc or type(exc).__name__}"
    finally:
        talk.close()
    return found


def describe_negotiation(found: dict[str, Any]) -> str:
    asked = f"Asked for ACP v{found['asked']} as `--protocol auto` asks (every version's field names)"
    if "answered" not in found:
        return f"{asked}, it gave no usable answer: {found.get('error')}."
    fields = ", ".join(f"`{f}`" for f in found["fields"])
    said = f"{asked}, it answered `protocolVersion: {found['answered']!r}` with {fields}"
    if "error" in found:
        return f"{said}: acp-driver cannot speak to it that way ({found['error']})."
    if found.get("note"):
        return (
            f"{said}: the client's own version echoed, in v1's shape. acp-driver speaks v1 to it and "
            f"says so (`{found['note']}`; `check --protocol auto` prints it as `check: ...` and judges "
            "it by the v1 rules, as here)."
        )
    if found["spoken"] == 2:
        return (
            f"{said}: it is spoken to in v2, so `check --protocol auto` (the default) judges it by the v2 "
            "rules ([ACP v2](#acp-v2)); the verdicts here are `--protocol 1`'s."
        )
    return f"{said}: it is spoken to in v{found['spoken']}."


# ---------------------------------------------------------------------- where the tool runs


def where_tools_run(agent: Agent, cache: Path, model: FakeModel, check_args: list[str]) -> dict[str, Any]:
    """The permission prompt outside the audit: the agent process starts in one directory, its
    session's cwd is another, and every permission request is answered with its reject option.
    Says whether the agent asked, and where ``touch x.txt`` ran (if it did)."""
    base = cache / "scratch" / f"{agent.name}-tools"
    shutil.rmtree(base, ignore_errors=True)
    own, session = base / "process", base / "session"
    own.mkdir(parents=True)
    session.mkdir()
    home = cache / "home" / f"{agent.name}-tools"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    talk = Conversation([str(agent_binary(agent, cache)), *agent.args], own, agent_env(agent, home, model))
    asked: list[str] = []

    def on_request(message: dict[str, Any]) -> None:
        if message.get("method") == "session/request_permission":
            options = message.get("params", {}).get("options", [])
            reject = next((o for o in options if str(o.get("kind", "")).startswith("reject")), None)
            asked.append(str(reject.get("optionId")) if reject else "cancelled")
            outcome = (
                {"outcome": "selected", "optionId": reject["optionId"]}
                if reject
                else {"outcome": "cancelled"}
            )
            talk.send({"id": message["id"], "result": {"outcome": outcome}})
        else:
            talk.send({"id": message["id"], "error": {"code": -32601, "message": "Method not found"}})

    def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        talk.send({"id": rid, "method": method, "params": params})
        try:
            answer = talk.answer_to(rid, 120, on_request)
        except queue.Empty:
            raise RuntimeError(f"no answer to {method}") from None
        if answer is None:
            raise RuntimeError("the agent closed its output")
        return answer

    def option(name: str) -> str | None:
        return check_args[check_args.index(name) + 1] if name in check_args else None

    outcome: str
    try:
        request(
            1,
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    # As the audit: terminals offered with --terminal (their requests are refused
                    # here; this probe only watches whether the agent asks, and where it runs).
                    "terminal": "--terminal" in check_args,
                },
            },
        )
        if option("--auth"):
            request(2, "authenticate", {"methodId": option("--auth")})
        sid = request(3, "session/new", {"cwd": str(session), "mcpServers": []})["result"]["sessionId"]
        if option("--mode"):
            request(4, "session/set_mode", {"sessionId": sid, "modeId": option("--mode")})
        answer = request(
            5, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PERMISSION_PROMPT}]}
        )
        outcome = (
            f"stopReason {answer.get('result', {}).get('stopReason')!r}"
            if "result" in answer
            else f"error {answer.get('error')}"
        )
    except (RuntimeError, KeyError, TypeError) as exc:
        outcome = f"the probe broke off: {exc}"
    finally:
        talk.close()
    ran = [
        label
        for label, where in (("the session's cwd", session), ("its own working directory", own))
        if (where / "x.txt").exists()
    ]
    return {"asked": asked, "ran": ran, "outcome": outcome, "mode": option("--mode")}


def describe_tools(found: dict[str, Any]) -> str:
    mode = f" in mode `{found['mode']}`" if found.get("mode") else " in its default mode"
    asked = (
        "asked permission (answered with its reject option)" if found["asked"] else "did not ask permission"
    )
    ran = (
        f"`touch x.txt` ran in {' and '.join(found['ran'])}" if found["ran"] else "`touch x.txt` did not run"
    )
    return (
        f"Permission prompt outside the audit{mode}, the process started in one directory and the "
        f"session's cwd another: the agent {asked}; {ran}; the turn ended with {found['outcome']}."
    )
