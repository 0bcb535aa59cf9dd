"""A tiny hand-rolled ACP agent toolkit for misbehaving test agents (no acp_driver imports).

Each agent script in this directory is a plain Python program that speaks just enough ACP
(newline-delimited JSON-RPC 2.0 on stdin/stdout) to get to ``session/prompt`` and then
misbehaves there. Environment:

- ``ACP_TEST_PIDFILE``: if set, every process of the agent appends ``<role> <pid>`` lines to it,
  so a test can check afterwards that none of them survived.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

PROTOCOL_VERSION = 1

_stdin = sys.stdin.buffer


def record_pid(role: str, pid: int | None = None) -> None:
    """Append ``role pid`` to the pid file named by ``ACP_TEST_PIDFILE`` (if any)."""
    path = os.environ.get("ACP_TEST_PIDFILE")
    if path:
        with open(path, "a") as f:
            f.write(f"{role} {pid if pid is not None else os.getpid()}\n")


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def write_raw(data: bytes) -> None:
    """Write bytes to fd 1 in one go (one ``write`` call when small enough)."""
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def send(*messages: dict[str, Any]) -> None:
    """Send messages with a single write (so the host reads them in one chunk)."""
    write_raw(b"".join(encode(m) for m in messages))


def result(rid: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def update(session_id: str, upd: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": upd},
    }


def chunk(session_id: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    upd: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    if message_id is not None:
        upd["messageId"] = message_id
    return update(session_id, upd)


def eprint(text: str) -> None:
    os.write(2, (text + "\n").encode())


def messages() -> Iterator[dict[str, Any]]:
    """Messages from stdin until EOF."""
    for line in _stdin:
        line = line.strip()
        if line:
            yield json.loads(line)


def handle_setup(msg: dict[str, Any], *, version: Any = PROTOCOL_VERSION) -> bool:
    """Answer ``initialize`` and ``session/new``; True if ``msg`` was one of them."""
    method = msg.get("method")
    if method == "initialize":
        send(result(msg["id"], {"protocolVersion": version, "agentCapabilities": {}}))
        return True
    if method == "session/new":
        sid = f"sess_{os.getpid()}_{handle_setup.count}"  # type: ignore[attr-defined]
        handle_setup.count += 1  # type: ignore[attr-defined]
        send(result(msg["id"], {"sessionId": sid}))
        return True
    return False


handle_setup.count = 1  # type: ignore[attr-defined]


def handle_setup_v2(msg: dict[str, Any], name: str) -> bool:
    """Answer ``initialize`` in v2's shape (named ``name``) and ``session/new`` (session ``s1``);
    True if ``msg`` was one of them."""
    method = msg.get("method")
    if method == "initialize":
        info = {"name": name, "version": "0"}
        send(result(msg["id"], {"protocolVersion": 2, "capabilities": {}, "info": info}))
        return True
    if method == "session/new":
        send(result(msg["id"], {"sessionId": "s1"}))
        return True
    return False


def next_prompt(stream: Iterator[dict[str, Any]]) -> dict[str, Any] | None:
    """Serve setup messages until a ``session/prompt`` arrives; None at EOF."""
    for msg in stream:
        if handle_setup(msg):
            continue
        if msg.get("method") == "session/prompt":
            return msg
    return None
