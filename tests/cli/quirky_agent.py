"""A small stand-alone ACP agent (plain JSON-RPC over stdio) with the quirks real agents have.

Used by the ``check`` tests: each flag reproduces a deviation seen in a real agent, so that the
audit's verdict on it can be tested against a real process over real pipes.

    --stream N MS           a prompt streams N chunks MS apart ("hello": one chunk, at once)
    --warm-up MS            before streaming, send available_commands_update and wait MS: a
                            session/cancel in that window is lost (the model was not called yet)
    --silent                the turn sends no update at all while it works
    --race                  a busy turn sends one chunk and ends end_turn: the first one only once
                            the cancel arrived (as if it was ending as the cancel came), later
                            ones at once
    --ignore-cancel-request $/cancel_request is ignored (the turn runs to its end)
    --idless-replies        every notification it does not handle is answered with an error
                            object without an "id" (and so is $/cancel_request)
    --idless-parse-error    a malformed line is answered -32700 without an "id"
    --permission-end-turn   a permission answered "cancelled" ends the turn with end_turn
    --ask-mode MODE         only ask permission in this session mode (set with session/set_mode)
    --auth METHOD           advertise METHOD; session/new fails until authenticate(METHOD)
    --in-flight             like --race, but the first turn's second chunk comes right after the
                            cancel, with the end_turn (as if both were on their way already)
    --refuse-cancel CODE    session/cancel is answered with an id-less error CODE naming it an
                            unknown method (codex-acp and others have answered -32601/-32603)
    --late-update           a cancelled turn's answer and one more chunk go out in one write
    --stall                 a prompt gets no update and no answer until it is cancelled (a model
                            that cannot be reached); a cancel is answered at once
    --poison-idle-cancel    a session/cancel on an idle session makes that session's next prompt
                            never answered (other sessions are fine)
    --answer-at-cancel      a permission turn answers the prompt cancelled as soon as the cancel
                            arrives, leaving its permission request pending (not withdrawn)
    --ask-with-terminal PIDFILE  ask permission only when the client offers terminals, having
                            started one first: ``sh -c 'echo $$ > PIDFILE; exec sleep 600'``
    --name NAME             the agentInfo name it reports
    --refuse-v2             an initialize asking another version than 1 is answered -32022
                            naming 1 as the only version spoken (as the v2 schema says)
    --echo-version          initialize is answered with the client's own protocolVersion (as
                            many v1 agents do), in v1's field names; it still speaks v1
    --message-id ID         every message chunk carries messageId ID (the same in every turn)
    --close-stdout          a prompt makes it close its stdout and keep running (until SIGTERM)
    --fail-after N          with --pidfile: exit at once (status 3) if N pids are in it already
    --slow-answer METHOD MS the answer to every METHOD request (initialize, session/new) comes MS
                            late, the agent reading nothing meanwhile (a slow start: a runtime
                            warming up, npx fetching the agent); repeatable
    --resume-loses-turn     advertise loadSession; session/load of a session whose turn runs
                            forgets the turn, so a later session/cancel misses it (codex-acp#186)
    --late-stop-reason      a cancelled turn is answered cancelled at once, but its late
                            end_turn answers the session's next prompt at once, whose own work
                            comes after that answer (claude-agent-acp#551)
    --work-after-cancel     a cancelled turn's work goes on after its answer: a tool call, its
                            completion and an fs/write_text_file request (Lody#196)
    --log PATH              append every message received (one JSON per line)
    --pidfile PATH          append this process's pid
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()


def update(sid: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": sid, "update": body}})


MESSAGE_ID: str | None = None


def chunk(sid: str, text: str) -> None:
    body: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    if MESSAGE_ID is not None:
        body["messageId"] = MESSAGE_ID
    update(sid, body)


class Agent:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.authenticated = opts.auth is None
        self.modes: dict[str, str] = {}
        self.turns: dict[str, tuple[Any, threading.Event]] = {}  # session -> (prompt id, cancelled)
        self.permission_answers: dict[Any, Any] = {}
        self.answered = threading.Condition()
        self.next_id = 1000
        self.raced = False
        self.terminal = False
        self.poisoned: set[str] = set()
        self.slow = {method: int(ms) for method, ms in opts.slow_answer}
        self.owed: set[str] = set()  # sessions whose cancelled turn's late end_turn is pending

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:  # a response (to our permission request)
            with self.answered:
                self.permission_answers[msg.get("id")] = msg
                self.answered.notify_all()
            return
        params = msg.get("params") or {}
        if "id" not in msg:
            self.notification(method, params)
            return
        rid = msg["id"]
        if method in self.slow:
            time.sleep(self.slow[method] / 1000)
        if method == "initialize":
            if self.opts.refuse_v2 and params.get("protocolVersion") != 1:
                data = {"requested": params.get("protocolVersion"), "supported": [1]}
                send(
                    {
                        "id": rid,
                        "error": {"code": -32022, "message": "Unsupported protocol version", "data": data},
                    }
                )
                return
            caps = params.get("clientCapabilities") or {}
            self.terminal = caps.get("terminal") is True
            methods = [{"id": self.opts.auth, "name": "Test login"}] if self.opts.auth else []
            send(
                {
                    "id": rid,
                    "result": {
                        "protocolVersion": params.get("protocolVersion") if self.opts.echo_version else 1,
                        "agentCapabilities": {"loadSession": True} if self.opts.resume_loses_turn else {},
                        "authMethods": methods,
                        "agentInfo": {"name": self.opts.name, "version": "1"},
                    },
                }
            )
        elif method == "authenticate":
            if params.get("methodId") == self.opts.auth:
                self.authenticated = True
                send({"id": rid, "result": {}})
            else:
                send({"id": rid, "error": {"code": -32602, "message": "unknown auth method"}})
        elif method == "session/new":
            if not self.authenticated:
                send({"id": rid, "error": {"code": -32000, "message": "Authentication required"}})
                return
            sid = f"s{len(self.modes) + 1}"
            self.modes[sid] = "default"
            send({"id": rid, "result": {"sessionId": sid}})
            update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": []})
        elif method == "session/load":
            self.turns.pop(params.get("sessionId", ""), None)  # --resume-loses-turn: the turn is lost
            send({"id": rid, "result": {}})
        elif method == "session/set_mode":
            self.modes[params["sessionId"]] = params["modeId"]
            send({"id": rid, "result": {}})
        elif method == "session/prompt":
            if params.get("sessionId") in self.poisoned:
                return  # never answered
            if self.opts.close_stdout:
                with lock:
                    sys.stdout.flush()
                    os.close(1)
                time.sleep(3600)
            sid = params["sessionId"]
            if sid in self.owed:  # the cancelled turn's late stop reason answers this prompt
                self.owed.discard(sid)
                send({"id": rid, "result": {"stopReason": "end_turn"}})
                rid = None
            cancelled = threading.Event()
            self.turns[sid] = (rid, cancelled)
            text = " ".join(b.get("text", "") for b in params.get("prompt", []))
            threading.Thread(target=self.turn, args=(sid, rid, text, cancelled), daemon=True).start()
        else:
            send({"id": rid, "error": {"code": -32601, "message": "Method not found", "data": method}})

    def notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            if self.opts.refuse_cancel is not None:
                error = {"code": self.opts.refuse_cancel, "message": "Unknown method: session/cancel"}
                send({"error": error})
            turn = self.turns.get(params.get("sessionId", ""))
            if turn is not None:
                turn[1].set()
            elif self.opts.poison_idle_cancel:
                self.poisoned.add(params.get("sessionId", ""))
            return
        if (
            method == "$/cancel_request"
            and not self.opts.ignore_cancel_request
            and not self.opts.idless_replies
        ):
            for rid, cancelled in self.turns.values():
                if rid == params.get("requestId"):
                    cancelled.set()
            return
        if self.opts.idless_replies:
            send({"error": {"code": -32601, "message": "Method not found", "data": method}})

    def turn(self, sid: str, rid: Any, text: str, cancelled: threading.Event) -> None:
        stop = "end_turn"
        if self.opts.stall:
            cancelled.wait()
            stop = "cancelled"
        elif text == "hello":
            chunk(sid, "hello")
        elif "permission" in text:
            stop = self.permission_turn(sid, cancelled)
        else:
            if self.opts.warm_up:
                update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": []})
                time.sleep(self.opts.warm_up / 1000)
                cancelled.clear()  # a cancel before the model call is lost
            count, ms = self.opts.stream
            if self.opts.race or self.opts.in_flight:
                chunk(sid, "done")
                if not self.raced:
                    self.raced = True
                    cancelled.wait(10)
                    if self.opts.in_flight:
                        chunk(sid, "already on its way")
                count = 0
            for i in range(count):
                if cancelled.wait(ms / 1000):
                    stop = "cancelled"
                    break
                if not self.opts.silent:
                    chunk(sid, f"chunk {i} ")
        self.turns.pop(sid, None)
        if self.opts.late_update and stop == "cancelled":
            body = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}}
            late = {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": sid, "update": body},
            }
            with lock:  # both in one write: they arrive together
                answer = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": stop}}
                sys.stdout.write(json.dumps(answer) + "\n" + json.dumps(late) + "\n")
                sys.stdout.flush()
            return
        if rid is not None:
            send({"id": rid, "result": {"stopReason": stop}})
        if stop == "cancelled" and self.opts.late_stop_reason:
            self.owed.add(sid)
        if stop == "cancelled" and self.opts.work_after_cancel:
            call = {"toolCallId": "late-1", "title": "Write y.txt", "kind": "edit", "status": "in_progress"}
            update(sid, {"sessionUpdate": "tool_call", **call})
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "late-1", "status": "completed"})
            params = {"sessionId": sid, "path": "/tmp/never-written-y.txt", "content": "y"}
            send({"id": 9999, "method": "fs/write_text_file", "params": params})

    def permission_turn(self, sid: str, cancelled: threading.Event) -> str:
        call = {"toolCallId": "t1", "title": "Write x.txt", "kind": "edit", "status": "pending"}
        if self.opts.ask_with_terminal and self.terminal:
            line = f"echo $$ > {self.opts.ask_with_terminal}.tmp && mv {self.opts.ask_with_terminal}.tmp {self.opts.ask_with_terminal}; exec sleep 600"
            with self.answered:
                tid = self.next_id
                self.next_id += 1
            params = {"sessionId": sid, "command": "sh", "args": ["-c", line]}
            send({"id": tid, "method": "terminal/create", "params": params})
        unasked = self.opts.ask_mode is not None and self.modes.get(sid) != self.opts.ask_mode
        if unasked or (self.opts.ask_with_terminal and not self.terminal):
            update(sid, {"sessionUpdate": "tool_call", **call})
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
            return "end_turn"
        update(sid, {"sessionUpdate": "tool_call", **call})
        with self.answered:
            pid = self.next_id
            self.next_id += 1
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        send(
            {
                "id": pid,
                "method": "session/request_permission",
                "params": {"sessionId": sid, "toolCall": call, "options": options},
            }
        )
        if self.opts.answer_at_cancel:
            cancelled.wait(30)
            return "cancelled"
        with self.answered:
            self.answered.wait_for(lambda: pid in self.permission_answers)
            answer = self.permission_answers.pop(pid)
        outcome = (answer.get("result") or {}).get("outcome", {}).get("outcome")
        if outcome == "cancelled" and not self.opts.permission_end_turn:
            return "cancelled"
        if cancelled.is_set() and not self.opts.permission_end_turn:
            return "cancelled"
        return "end_turn"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", nargs=2, type=int, default=(100, 50), metavar=("N", "MS"))
    parser.add_argument("--warm-up", type=int, default=0)
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--race", action="store_true")
    parser.add_argument("--ignore-cancel-request", action="store_true")
    parser.add_argument("--idless-replies", action="store_true")
    parser.add_argument("--idless-parse-error", action="store_true")
    parser.add_argument("--permission-end-turn", action="store_true")
    parser.add_argument("--ask-mode", default=None)
    parser.add_argument("--auth", default=None)
    parser.add_argument("--name", default="quirky-agent")
    parser.add_argument("--refuse-v2", action="store_true")
    parser.add_argument("--echo-version", action="store_true")
    parser.add_argument("--in-flight", action="store_true")
    parser.add_argument("--refuse-cancel", type=int, default=None)
    parser.add_argument("--stall", action="store_true")
    parser.add_argument("--late-update", action="store_true")
    parser.add_argument("--poison-idle-cancel", action="store_true")
    parser.add_argument("--answer-at-cancel", action="store_true")
    parser.add_argument("--ask-with-terminal", default=None, metavar="PIDFILE")
    parser.add_argument("--message-id", default=None)
    parser.add_argument("--close-stdout", action="store_true")
    parser.add_argument("--log", default=None)
    parser.add_argument("--pidfile", default=None)
    parser.add_argument("--fail-after", type=int, default=None)
    parser.add_argument("--resume-loses-turn", action="store_true")
    parser.add_argument("--late-stop-reason", action="store_true")
    parser.add_argument("--work-after-cancel", action="store_true")
    parser.add_argument("--slow-answer", nargs=2, action="append", default=[], metavar=("METHOD", "MS"))
    opts = parser.parse_args()
    global MESSAGE_ID
    MESSAGE_ID = opts.message_id
    if opts.pidfile and opts.fail_after is not None and os.path.exists(opts.pidfile):
        with open(opts.pidfile) as f:
            if len(f.read().split()) >= opts.fail_after:
                sys.exit(3)
    if opts.pidfile:
        with open(opts.pidfile, "a") as f:
            f.write(f"{os.getpid()}\n")
    if opts.log:
        with open(opts.log, "a") as f:
            f.write(json.dumps({"processCwd": os.getcwd()}) + "\n")
    agent = Agent(opts)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            error = {"code": -32700, "message": "Parse error"}
            send({"error": error} if opts.idless_parse_error else {"id": None, "error": error})
            continue
        if opts.log:
            with open(opts.log, "a") as f:
                f.write(json.dumps(msg) + "\n")
        agent.handle(msg)


if __name__ == "__main__":
    main()
