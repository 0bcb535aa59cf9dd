"""A small stand-alone ACP v2 agent (plain JSON-RPC over stdio) with the deviations a v2 audit must
catch, one flag each (the reference agent keeps the lifecycle in its runtime and cannot break it).

By default it follows the v2 rules: a prompt is answered ``{messageId}`` at insertion, after its
``user_message`` and ``running``; a prompt sent while the session works is held and inserted in
order; ``session/cancel`` answers the held prompts ``-32800`` and ends the work with the idle
``cancelled``; ``$/cancel_request`` on a held prompt answers it ``-32800``; a permission pending at
the cancel is withdrawn; ``session/close`` ends the work (idle ``cancelled``), then answers;
``session/resume`` replays the history (``replayFrom: start``), sends the state snapshot, answers.

Prompts: ``hello`` (or anything else): one chunk, ``end_turn``; ``/stream N MS``: N chunks MS
apart; a prompt with ``permission`` in it asks permission for a tool call.

    --answer-at-end          a prompt is answered {messageId} only after its work's idle
    --answer-at-cancel       a prompt is answered {messageId} only when its work ends (before the
                             idle)
    --auth METHOD            advertise METHOD; session/new fails until auth/login(METHOD)
    --ask-mode MODE          ask permission only in this mode: the "mode" config option (offered
                             by session/new: values "default" and MODE), set with
                             session/set_config_option (a value of type "id", as the schema says;
                             another value is refused -32602)
    --no-message-id          a prompt is answered {} (no messageId)
    --unreported-tool-call   a permission question is about a tool call never reported in an update
    --reuse-reply-id         every reply's chunks carry the same messageId "reply" (as
                             claude-agent-acp does behind a model server with fixed ids)
    --no-user-message        no user_message for an inserted prompt
    --no-running             no running state_update when the work starts
    --late-update            a cancelled work sends one more chunk after its idle
    --race                   a busy prompt streams one chunk and ends end_turn: the first one when
                             the cancel arrives, later ones at once
    --no-hold                a prompt sent while the session works runs at once, alongside
    --lifo                   held prompts are inserted newest first
    --withdraw-ends-work     $/cancel_request on a held prompt also cancels the running work
    --keep-held-on-cancel    session/cancel leaves held prompts held (they run afterwards)
    --cancel-later           the cancelled work takes 200 ms to end, and a prompt arriving
                             meanwhile is answered -32800 as well
    --permission-waits       a cancel does not withdraw the pending permission: the work waits
                             for its answer, then ends cancelled
    --permission-proceeds    a cancel withdraws the permission and runs the tool anyway
                             (tool_call_update completed), then ends cancelled
    --no-requires-action     no requires_action while a permission request waits
    --close-answer-first     session/close answers {} before the idle cancelled
    --close-late             an update of the session after the session/close answer
    --close-unknown-error    session/close of an unknown session answers -32602
    --no-snapshot            session/resume sends no state snapshot
    --snapshot-after-answer  session/resume sends the snapshot after its answer
    --snapshot-before-replay session/resume sends the snapshot before the replay
    --idle-snapshot          the resume snapshot says idle, even while work runs
    --unknown-method-code N  an unknown method is answered with error N (not -32601)
    --resume-loses-work      session/resume of a session whose work runs starts it afresh: the
                             running work is forgotten, so a later session/cancel misses it
                             (codex-acp#186)
    --late-stop-reason       a cancelled work's late idle end_turn comes when the next prompt
                             arrives, before that prompt's own span (claude-agent-acp#551)
    --work-after-cancel      a cancelled work goes on after its idle: a tool call and its
                             completion, and an fs/write_text_file request (Lody#196)
    --ready-idle             before inserting a prompt, a state_update idle without a stopReason
                             (it ends no work: none runs; the schema allows a snapshot any time)
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import threading
import time
from typing import Any

lock = threading.Lock()
ids = itertools.count(1)


def send(message: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()


def update(sid: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": sid, "update": body}})


def cancelled_error(rid: Any) -> None:
    send({"id": rid, "error": {"code": -32800, "message": "Request cancelled"}})


class Work:
    def __init__(self, rid: Any, text: str) -> None:
        self.rid = rid
        self.text = text
        self.cancelled = threading.Event()


class Session:
    def __init__(self, sid: str) -> None:
        self.id = sid
        self.works: list[Work] = []
        self.held: collections.deque[tuple[Any, str]] = collections.deque()
        self.history: list[dict[str, Any]] = []
        self.cancelling = False
        self.closed = False
        self.owed = False
        self.mode = "default"
        self.idle = threading.Condition(lock=threading.Lock())


class Agent:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.sessions: dict[str, Session] = {}
        self.guard = threading.Lock()
        self.answers: dict[Any, Any] = {}
        self.answered = threading.Condition()
        self.authenticated = opts.auth is None

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:  # an answer to our permission request
            with self.answered:
                self.answers[msg.get("id")] = msg
                self.answered.notify_all()
            return
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if "id" not in msg:
            self.notification(method, params)
            return
        rid = msg["id"]
        if method == "initialize":
            if params.get("protocolVersion", 0) < 2:
                error = {"code": -32022, "message": "Unsupported protocol version"}
                send(
                    {
                        "id": rid,
                        "error": {
                            **error,
                            "data": {"requested": params.get("protocolVersion"), "supported": [2]},
                        },
                    }
                )
                return
            result = {
                "protocolVersion": 2,
                "info": {"name": "quirky-v2-agent", "version": "1"},
                "capabilities": {"session": {}},
                "authMethods": [{"id": self.opts.auth, "name": "Test login"}] if self.opts.auth else [],
            }
            send({"id": rid, "result": result})
        elif method == "auth/login":
            self.authenticated = params.get("methodId") == self.opts.auth
            send(
                {"id": rid, "result": {}}
                if self.authenticated
                else {"id": rid, "error": {"code": -32602, "message": "unknown method"}}
            )
        elif method == "session/new":
            if not self.authenticated:
                send({"id": rid, "error": {"code": -32000, "message": "Authentication required"}})
                return
            sid = f"s{len(self.sessions) + 1}"
            self.sessions[sid] = Session(sid)
            result: dict[str, Any] = {"sessionId": sid}
            if self.opts.ask_mode is not None:
                values = ["default", self.opts.ask_mode]
                result["configOptions"] = [
                    {
                        "configId": "mode",
                        "name": "Mode",
                        "type": "select",
                        "currentValue": "default",
                        "options": [{"value": v, "name": v} for v in values],
                    }
                ]
            send({"id": rid, "result": result})
        elif method == "session/set_config_option":
            session = self.sessions.get(params.get("sessionId", ""))
            typed = params.get("configId") == "mode" and params.get("type") == "id"
            if session is None or not typed or params.get("value") not in ("default", self.opts.ask_mode):
                send({"id": rid, "error": {"code": -32602, "message": "Invalid params"}})
                return
            session.mode = str(params.get("value"))
            send({"id": rid, "result": {"configOptions": []}})
        elif method == "session/prompt":
            self.prompt(rid, params)
        elif method == "session/close":
            threading.Thread(target=self.close, args=(rid, params), daemon=True).start()
        elif method == "session/resume":
            self.resume(rid, params)
        else:
            code = self.opts.unknown_method_code
            send({"id": rid, "error": {"code": code, "message": "Method not found", "data": method}})

    # ------------------------------------------------------------------ prompts

    def prompt(self, rid: Any, params: dict[str, Any]) -> None:
        session = self.sessions[params["sessionId"]]
        text = " ".join(b.get("text", "") for b in params.get("prompt", []))
        with self.guard:
            if session.cancelling and self.opts.cancel_later:
                cancelled_error(rid)
                return
            if (session.works or session.held) and not self.opts.no_hold:
                session.held.append((rid, text))
                return
            work = Work(rid, text)
            session.works.append(work)
        threading.Thread(target=self.run, args=(session, work), daemon=True).start()

    def run(self, session: Session, work: Work) -> None:
        sid = session.id
        if session.owed:  # --late-stop-reason: the cancelled work's late end
            session.owed = False
            update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
        if self.opts.ready_idle:
            update(sid, {"sessionUpdate": "state_update", "state": "idle"})
        mid = f"u{next(ids)}"
        user = {
            "sessionUpdate": "user_message",
            "messageId": mid,
            "content": [{"type": "text", "text": work.text}],
        }
        session.history.append(user)
        if not self.opts.no_user_message:
            update(sid, user)
        if not self.opts.no_running:
            update(sid, {"sessionUpdate": "state_update", "state": "running"})
        answer = {"id": work.rid, "result": {} if self.opts.no_message_id else {"messageId": mid}}
        if not (self.opts.answer_at_end or self.opts.answer_at_cancel):
            send(answer)
        reply = "reply" if self.opts.reuse_reply_id else f"a{next(ids)}"
        asks = self.opts.ask_mode is None or session.mode == self.opts.ask_mode
        if "permission" in work.text and asks:
            stop = self.permission(session, work)
        elif work.text.startswith("/stream"):
            _, count, delay = [*work.text.split(), "100", "50"][:3]
            stop = self.stream(sid, reply, work, int(count), int(delay) / 1000)
        else:
            self.chunk(sid, reply, work.text)
            stop = "end_turn"
        if stop == "cancelled" and self.opts.cancel_later:
            time.sleep(0.2)
        session.history.append({"sessionUpdate": "agent_message", "messageId": reply, "content": []})
        if self.opts.answer_at_cancel:
            send(answer)
        if stop == "cancelled" and self.opts.late_stop_reason:
            session.owed = True  # before the idle: the next prompt may come right behind it
        with self.guard:  # idle from here on (a resume snapshot says so)
            if work in session.works:
                session.works.remove(work)
        update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop})
        if self.opts.answer_at_end:
            send(answer)
        if stop == "cancelled" and self.opts.late_update:
            self.chunk(sid, reply, "late")
        if stop == "cancelled" and self.opts.work_after_cancel:
            call = {"toolCallId": "late-1", "title": "Write y.txt", "kind": "edit", "status": "in_progress"}
            update(sid, {"sessionUpdate": "tool_call", **call})
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "late-1", "status": "completed"})
            params = {"sessionId": sid, "path": "/tmp/never-written-y.txt", "content": "y"}
            send({"id": f"late-{next(ids)}", "method": "fs/write_text_file", "params": params})
        self.finish(session, work)

    def stream(self, sid: str, reply: str, work: Work, count: int, delay: float) -> str:
        if self.opts.race:
            self.chunk(sid, reply, "done")
            if not getattr(self, "raced", False):
                self.raced = True
                work.cancelled.wait(10)
            return "end_turn"
        for i in range(count):
            if work.cancelled.wait(delay):
                return "cancelled"
            self.chunk(sid, reply, f"chunk {i} ")
        return "end_turn"

    def chunk(self, sid: str, reply: str, text: str) -> None:
        body = {
            "sessionUpdate": "agent_message_chunk",
            "messageId": reply,
            "content": {"type": "text", "text": text},
        }
        update(sid, body)

    def finish(self, session: Session, work: Work) -> None:
        with self.guard:
            if work in session.works:
                session.works.remove(work)
            session.cancelling = False
            start = None
            if not session.works and session.held and not session.closed:
                rid, text = session.held.pop() if self.opts.lifo else session.held.popleft()
                start = Work(rid, text)
                session.works.append(start)
        with session.idle:
            session.idle.notify_all()
        if start is not None:
            threading.Thread(target=self.run, args=(session, start), daemon=True).start()

    def permission(self, session: Session, work: Work) -> str:
        sid = session.id
        call = {"toolCallId": "t1", "title": "Write x.txt", "kind": "edit", "status": "pending"}
        if self.opts.unreported_tool_call:
            call["toolCallId"] = "never-reported"
        else:
            update(sid, {"sessionUpdate": "tool_call_update", **call})
        if not self.opts.no_requires_action:
            update(sid, {"sessionUpdate": "state_update", "state": "requires_action"})
        pid = 1000 + next(ids)
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        params = {
            "sessionId": sid,
            "title": "Write x.txt",
            "subject": {"type": "tool_call", "toolCall": call},
            "options": options,
        }
        send({"id": pid, "method": "session/request_permission", "params": params})
        with self.answered:
            while pid not in self.answers and not work.cancelled.is_set():
                self.answered.wait(0.01)
        if work.cancelled.is_set() and pid not in self.answers:
            if self.opts.permission_waits:
                with self.answered:
                    self.answered.wait_for(lambda: pid in self.answers)
            else:
                send({"method": "$/cancel_request", "params": {"requestId": pid}})
                if self.opts.permission_proceeds:
                    update(
                        sid, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}
                    )
            return "cancelled"
        outcome = (self.answers[pid].get("result") or {}).get("outcome", {})
        update(sid, {"sessionUpdate": "state_update", "state": "running"})
        allowed = outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow"
        update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed" if allowed else "failed",
            },
        )
        return "end_turn"

    # ------------------------------------------------------------------ cancels

    def notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            session = self.sessions.get(params.get("sessionId", ""))
            if session is not None:
                self.cancel(session)
        elif method == "$/cancel_request":
            for session in self.sessions.values():
                with self.guard:
                    entry = next((h for h in session.held if h[0] == params.get("requestId")), None)
                    if entry is not None:
                        session.held.remove(entry)
                if entry is not None:
                    cancelled_error(entry[0])
                    if self.opts.withdraw_ends_work:
                        for work in session.works:
                            work.cancelled.set()

    def cancel(self, session: Session) -> None:
        with self.guard:
            held = [] if self.opts.keep_held_on_cancel else list(session.held)
            if not self.opts.keep_held_on_cancel:
                session.held.clear()
            if session.works:
                session.cancelling = True
            works = list(session.works)
        for rid, _text in held:
            cancelled_error(rid)
        for work in works:
            work.cancelled.set()

    def close(self, rid: Any, params: dict[str, Any]) -> None:
        session = self.sessions.get(params.get("sessionId", ""))
        if session is None:
            if self.opts.close_unknown_error:
                send({"id": rid, "error": {"code": -32602, "message": "Invalid params: unknown session"}})
            else:
                send({"id": rid, "error": {"code": -32002, "message": "Resource not found"}})
            return
        if self.opts.close_answer_first:
            send({"id": rid, "result": {}})
        self.cancel(session)
        with self.guard:
            session.closed = True
        with session.idle:
            session.idle.wait_for(lambda: not session.works, timeout=5)
        if not self.opts.close_answer_first:
            send({"id": rid, "result": {}})
        if self.opts.close_late:
            update(session.id, {"sessionUpdate": "session_info_update", "title": "closed"})

    def resume(self, rid: Any, params: dict[str, Any]) -> None:
        session = self.sessions[params["sessionId"]]
        state = "running" if session.works and not self.opts.idle_snapshot else "idle"
        if self.opts.resume_loses_work:  # a fresh session object: the running work is forgotten
            fresh = Session(session.id)
            fresh.history = session.history
            self.sessions[session.id] = session = fresh
        snapshot = {"sessionUpdate": "state_update", "state": state}
        replay = params.get("replayFrom") == {"type": "start"}
        if self.opts.snapshot_before_replay:
            update(session.id, snapshot)
        for entry in list(session.history) if replay else []:
            update(session.id, entry)
        if not (self.opts.no_snapshot or self.opts.snapshot_after_answer or self.opts.snapshot_before_replay):
            update(session.id, snapshot)
        send({"id": rid, "result": {}})
        if self.opts.snapshot_after_answer:
            update(session.id, snapshot)


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in (
        "--answer-at-end",
        "--answer-at-cancel",
        "--no-message-id",
        "--no-user-message",
        "--no-running",
        "--late-update",
        "--race",
        "--no-hold",
        "--lifo",
        "--withdraw-ends-work",
        "--keep-held-on-cancel",
        "--cancel-later",
        "--permission-waits",
        "--permission-proceeds",
        "--no-requires-action",
        "--close-answer-first",
        "--close-late",
        "--close-unknown-error",
        "--no-snapshot",
        "--snapshot-after-answer",
        "--snapshot-before-replay",
        "--idle-snapshot",
        "--reuse-reply-id",
        "--unreported-tool-call",
        "--resume-loses-work",
        "--late-stop-reason",
        "--work-after-cancel",
        "--ready-idle",
    ):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--unknown-method-code", type=int, default=-32601)
    parser.add_argument("--auth", default=None)
    parser.add_argument("--ask-mode", default=None)
    opts = parser.parse_args()
    agent = Agent(opts)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(msg, dict):
            agent.handle(msg)


if __name__ == "__main__":
    main()
