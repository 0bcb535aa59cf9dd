"""A bare ACP agent on stdio (no acp_driver code) that misbehaves on demand, for the CLI tests.

--pidfile PATH        write the pid at start
--hang-initialize     never answer ``initialize``
--ignore-eof          keep running after stdin EOF (writes PATH.eof when it sees it)
--ignore-term         ignore SIGTERM
--auth METHOD         advertise authMethods (METHOD, a terminal login, an env_var method
                      reading STUB_KEY, like codex-acp's); ``session/new`` answers -32000 until
                      ``authenticate`` with METHOD (or stub-key, with STUB_KEY set)
--terminal LINE       each prompt runs LINE with ``terminal/create {"command": LINE}`` (no args,
                      as Claude Code's adapters do), reports its output, releases it
--updates FILE        each prompt writes FILE's lines to stdout as they are (raw JSON text:
                      lone-surrogate escapes, control characters), then ends the turn
--permission-from FILE  each prompt asks permission for the tool call in FILE (one JSON
                      object: its title, kind...), then ends the turn with the answer as text
--withdraw-when PATH  with --permission-from: withdraw the request ($/cancel_request) once
                      PATH exists (the test creates it when the question is on screen)

A prompt starting with ``/sleep`` says "sleeping" and waits for ``session/cancel``; any other is
echoed back.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

opts = argparse.ArgumentParser()
opts.add_argument("--pidfile")
opts.add_argument("--hang-initialize", action="store_true")
opts.add_argument("--ignore-eof", action="store_true")
opts.add_argument("--ignore-term", action="store_true")
opts.add_argument("--auth")
opts.add_argument("--terminal")
opts.add_argument("--updates")
opts.add_argument("--permission-from")
opts.add_argument("--withdraw-when")
args = opts.parse_args()

if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if args.pidfile:
    with open(args.pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(args.pidfile + ".tmp", args.pidfile)


LOCK = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with LOCK:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()


def chunk(session_id: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send({"method": "session/update", "params": {"sessionId": session_id, "update": update}})


AUTH_METHODS = [
    {"id": args.auth, "name": "Secret login", "description": "the stub's own login"},
    {"id": "terminal-login", "name": "Log in from a terminal", "type": "terminal", "args": ["--login"]},
    {"id": "stub-key", "name": "Use STUB_KEY", "type": "env_var", "vars": [{"name": "STUB_KEY"}]},
]
authenticated = False
prompt_id: Any = None
session_id = "stub-session"
terminal_id: str | None = None
next_id = 1000


def request(method: str, params: dict[str, Any]) -> None:
    global next_id
    next_id += 1
    send({"id": next_id, "method": method, "params": {"sessionId": session_id, **params}})
    waiting[next_id] = method


waiting: dict[int, str] = {}


def end_turn(reason: str) -> None:
    global prompt_id
    if prompt_id is not None:
        send({"id": prompt_id, "result": {"stopReason": reason}})
        prompt_id = None


def on_response(message: dict[str, Any]) -> None:
    global terminal_id
    method = waiting.pop(message["id"], None)
    if "error" in message:
        chunk(session_id, f"{method} failed: {message['error'].get('message')}\n")
        end_turn("end_turn")
    elif method == "terminal/create":
        terminal_id = message["result"]["terminalId"]
        chunk(session_id, "terminal started\n")
        request("terminal/wait_for_exit", {"terminalId": terminal_id})
    elif method == "terminal/wait_for_exit":
        request("terminal/output", {"terminalId": terminal_id})
    elif method == "terminal/output":
        chunk(session_id, message["result"]["output"])
        request("terminal/release", {"terminalId": terminal_id})
    elif method == "terminal/release":
        end_turn("end_turn")
    elif method == "session/request_permission":
        chunk(session_id, f"permission: {json.dumps(message.get('result'))}\n")
        end_turn("end_turn")


for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method is None:
        on_response(msg)
    elif method == "initialize":
        if not args.hang_initialize:
            result: dict[str, Any] = {"protocolVersion": 1, "agentInfo": {"name": "stub", "version": "1"}}
            if args.auth:
                result["authMethods"] = AUTH_METHODS
            send({"id": msg["id"], "result": result})
    elif method == "authenticate":
        if msg["params"].get("methodId") == args.auth:
            authenticated = True
            send({"id": msg["id"], "result": {}})
        elif msg["params"].get("methodId") == "stub-key" and not os.environ.get("STUB_KEY"):
            send({"id": msg["id"], "error": {"code": -32603, "message": "Internal error"}})  # as codex-acp
        elif msg["params"].get("methodId") == "stub-key":
            authenticated = True
            send({"id": msg["id"], "result": {}})
        else:
            send({"id": msg["id"], "error": {"code": -32602, "message": "unknown method id"}})
    elif method == "session/new":
        if args.auth and not authenticated:
            send({"id": msg["id"], "error": {"code": -32000, "message": "Authentication required"}})
        else:
            send({"id": msg["id"], "result": {"sessionId": session_id}})
    elif method == "session/prompt":
        prompt_id = msg["id"]
        text = "".join(b.get("text", "") for b in msg["params"]["prompt"])
        if args.updates:
            with open(args.updates, "rb") as raw:
                for line in raw.read().splitlines():
                    sys.stdout.buffer.write(line + b"\n")
            sys.stdout.flush()
            end_turn("end_turn")
        elif args.permission_from:
            with open(args.permission_from) as f:
                tool_call = json.load(f)
            options = [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
            request("session/request_permission", {"toolCall": tool_call, "options": options})
            if args.withdraw_when:

                def withdraw(asked: int = next_id) -> None:
                    while not os.path.exists(args.withdraw_when):
                        time.sleep(0.01)
                    send({"method": "$/cancel_request", "params": {"requestId": asked}})

                threading.Thread(target=withdraw, daemon=True).start()
        elif args.terminal:
            request("terminal/create", {"command": args.terminal})
        elif text.startswith("/sleep"):
            chunk(session_id, "sleeping\n")
        else:
            chunk(session_id, text + "\n")
            end_turn("end_turn")
    elif method == "session/cancel":
        end_turn("cancelled")
    elif "id" in msg:
        send({"id": msg["id"], "error": {"code": -32601, "message": f"no {method}"}})

if args.ignore_eof:
    if args.pidfile:
        with open(args.pidfile + ".eof", "w") as f:
            f.write("eof")
    while True:
        time.sleep(3600)
