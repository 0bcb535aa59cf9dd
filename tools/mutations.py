"""Mutation check: deleting the line that enforces a rule must make a (non-interop) test fail.

Each entry names a rule, the code that enforces it and the tests that guard it. For each, the
script replaces that code, runs the tests, expects a failure, and puts the code back.

    python tools/mutations.py            # all
    python tools/mutations.py fence      # entries whose name contains "fence"

Exit status 1 if any mutation survived (the tests still passed).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "acp_driver"


@dataclass(frozen=True)
class Mutation:
    name: str
    rule: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    Mutation(
        "stdout-protected",
        "spec MUST (transports.mdx): nothing but ACP messages on the agent's stdout",
        "aio/_ndjson.py",
        "    if protect_stdout:\n        sys.stdout.flush()\n        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())\n",
        "",
        ("tests/agent/test_runtime.py::test_a_stray_print_never_reaches_the_wire",),
    ),
    Mutation(
        "fence-update",
        "agent runtime: nothing of a turn is sent after its response (updates)",
        "agent/_turn.py",
        '        if self.ended:\n            raise TurnEndedError(f"turn of session {self.session.id} has ended; update not sent")\n',
        "",
        ("tests/agent/test_runtime.py::test_swallowed_cancel_is_fenced_after_the_response",),
    ),
    Mutation(
        "fence-request",
        "agent runtime: nothing of a turn is sent after its response (requests)",
        "agent/_turn.py",
        '        if self.ended:  # the fence (see ``update``)\n            raise TurnEndedError(f"turn of session {self.session.id} has ended; {method} not sent")\n',
        "",
        ("tests/agent/test_runtime.py::test_swallowed_cancel_is_fenced_after_the_response",),
    ),
    Mutation(
        "agent-cancelled-stop-reason",
        "spec MUST (prompt-turn.mdx): the agent answers a cancelled turn with stopReason cancelled",
        "agent/_runtime.py",
        "                return self._cancelled_answer(turn)\n",
        "",
        ("tests/agent/test_runtime.py",),
    ),
    Mutation(
        "same-read-cancel-request",
        "$/cancel_request on a prompt read together with it answers stopReason cancelled",
        "agent/_runtime.py",
        "        if ctx is not None and ctx.cancel_requested and self.connection.honours_cancel_request:",
        "        if False:",
        (
            "tests/agent/test_runtime.py::test_cancel_request_in_the_same_read_as_the_prompt_answers_cancelled",
        ),
    ),
    Mutation(
        "host-permission-cancelled-on-cancel",
        "spec MUST (prompt-turn.mdx): the client answers pending permission requests cancelled",
        "driver/_routing.py",
        '            if turn is not None and turn.cancel_requested and ctx is not None and not ctx.cancel_requested:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n',
        "",
        ("tests/driver/test_reference_behaviors.py::test_cancel_answers_pending_permission",),
    ),
    Mutation(
        "host-permission-cancelled-after-cancel",
        "spec MUST: a permission request arriving after the cancel is answered cancelled",
        "driver/_routing.py",
        '        # Spec: pending permission requests of a cancelled turn are answered "cancelled".\n        if turn is not None and turn.cancel_requested:\n            return {"outcome": dict(CANCELLED_OUTCOME)}\n',
        "",
        ("tests/driver/test_ladder_fake_time.py",),
    ),
    Mutation(
        "cleanup-not-refused",
        "an agent cleaning up during a cancel is not refused (terminal output/wait/kill/release)",
        "driver/_routing.py",
        "        if turn is None or method in CLEANUP_METHODS:",
        "        if turn is None:",
        (
            "tests/driver/test_ladder_fake_time.py::test_the_agent_cleans_up_its_terminals_while_its_turn_is_cancelled",
        ),
    ),
    Mutation(
        "cleanup-terminals-kept",
        "a cancelled turn's terminals are killed at once but kept for the agent's cleanup",
        "driver/_turn.py",
        '            kill_owner = getattr(terminals, "kill_owner", None)',
        "            kill_owner = None",
        (
            "tests/driver/test_ladder_fake_time.py::test_the_agent_cleans_up_its_terminals_while_its_turn_is_cancelled",
        ),
    ),
    Mutation(
        "answer-once",
        "JSON-RPC: a request is answered at most once (the ledger refuses a second answer)",
        "core/_ledger.py",
        "        if entry is None:\n            stone = self._tombstones.get(id)",
        "        if entry is None:\n            return InFlight(id, 'x')\n            stone = self._tombstones.get(id)",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "answer-cancelled-before-start",
        "every request gets a response: one cancelled before its handler ran still gets -32800",
        "aio/_serving.py",
        '            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled")\n        elif task.exception() is not None:',
        "            pass\n        elif task.exception() is not None:",
        ("tests/aio",),
    ),
    Mutation(
        "cancel-request-on-give-up",
        "a caller that gives up sends $/cancel_request",
        "aio/_requesting.py",
        "            if self.is_open and self._core.send_cancel_request(rid):\n                self._outbox.schedule()  # ask the peer to stop\n",
        "",
        ("tests/aio",),
    ),
    Mutation(
        "cascade",
        "cancelling a request cancels the requests made while serving it",
        "aio/_serving.py",
        "        except asyncio.CancelledError:\n            self._cascade(entry)\n",
        "        except asyncio.CancelledError:\n",
        ("tests/aio", "tests/agent"),
    ),
    Mutation(
        "no-answer-to-notification",
        "JSON-RPC: a notification is never answered",
        "core/_receiving.py",
        "        if rid is _MISSING:\n            if method == CANCEL_REQUEST_METHOD:",
        "        if rid is _MISSING:\n            self._reply_error(None, ErrorCode.INVALID_REQUEST, 'x', batch, None)\n            if method == CANCEL_REQUEST_METHOD:",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "ladder-kill",
        "a turn whose agent ignores every cancel is ended by SIGKILL of the agent's group",
        "driver/_remote_agent.py",
        "        self.signalled = True\n        self.process.kill()\n",
        "        self.signalled = True\n",
        ("tests/driver/test_ladder_fake_time.py",),
    ),
    Mutation(
        "ladder-session-cancel",
        "the ladder starts with session/cancel",
        "driver/_turn.py",
        '                    conn.notify_nowait(p.SESSION_CANCEL, {"sessionId": self.session.id})\n',
        "                    pass\n",
        ("tests/driver/test_ladder_fake_time.py",),
    ),
    Mutation(
        "serve-session-cancel-on-disconnect",
        "serve: a connection that ends mid-turn sends session/cancel for the live prompt",
        "remote/_served.py",
        '                    self._send_to_agent(\n                        {"jsonrpc": "2.0", "method": p.SESSION_CANCEL, "params": {"sessionId": sid}}\n                    )\n',
        "                    pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_closing_the_websocket_mid_turn_cancels_it_and_reaps_the_agent",
        ),
    ),
    Mutation(
        "serve-cancel-request-rung",
        "serve: $/cancel_request for a prompt still unanswered at half the budget",
        "remote/_served.py",
        '                self._send_to_agent(\n                    {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": request.id}}\n                )\n',
        "                pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "serve-sigterm-rung",
        "serve: SIGTERM to the agent's group at 3/4 of the budget",
        "remote/_served.py",
        "            backend.terminate()\n",
        "",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "serve-sigkill-rung",
        "serve: SIGKILL to the agent's group at the budget",
        "remote/_served.py",
        "            backend.kill()\n",
        "            pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_an_agent_that_ignores_the_cancel_is_killed_within_the_budget",
        ),
    ),
    Mutation(
        "serve-eof-when-no-prompt",
        "serve: the agent's input closed once no prompt is in flight",
        "remote/_served.py",
        "                    backend.close_input()\n                    input_closed = True\n",
        "                    input_closed = True\n",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "serve-end-on-delete",
        "serve: DELETE ends the connection through the ladder",
        "remote/_http.py",
        '    http.conn.end("the client ended the connection (DELETE)")\n',
        "",
        ("tests/remote/test_serve_http.py::test_delete_mid_turn_cancels_it_and_reaps_the_agent",),
    ),
    Mutation(
        "serve-end-on-shutdown",
        "serve: shutdown ends every connection through the ladder",
        "remote/_server.py",
        '                conn.end("the server is shutting down", WS_GOING_AWAY)\n            await asyncio.gather',
        "                pass\n            await asyncio.gather",
        ("tests/remote/test_serve_cli.py::test_a_signal_ends_every_connection_and_reaps_every_agent",),
    ),
    Mutation(
        "serve-permission-cancelled",
        "spec MUST (prompt-turn.mdx), for a client that is gone: pending permission requests answered cancelled",
        "remote/_inflight.py",
        '        return {"jsonrpc": "2.0", "id": request.id, "result": {"outcome": {"outcome": "cancelled"}}}\n',
        "        pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_a_pending_permission_is_answered_cancelled_when_the_client_goes",
        ),
    ),
    Mutation(
        "serve-answer-pending-requests",
        "serve: the agent's pending requests are answered when the client is gone",
        "remote/_served.py",
        "            self._answer_for_client()\n            for sid",
        "            for sid",
        (
            "tests/remote/test_serve_websocket.py::test_the_agents_other_pending_requests_get_an_error_when_the_client_goes",
        ),
    ),
    Mutation(
        "serve-token",
        "serve: --token is required on every request (401)",
        "remote/_server.py",
        '            return 401, "missing or wrong bearer token", [(b"www-authenticate", b\'Bearer realm="acp"\')]\n',
        "            pass\n",
        ("tests/remote/test_serve_security.py::test_token_required_on_every_request",),
    ),
    Mutation(
        "serve-origin",
        "serve: cross-origin requests refused (403)",
        "remote/_server.py",
        '            return 403, "cross-origin request refused (see --allow-origin)", []\n',
        "            pass\n",
        ("tests/remote/test_serve_security.py::test_cross_origin_requests_are_refused_unless_allowed",),
    ),
    Mutation(
        "serve-413",
        "serve: a body over --max-message-bytes gets 413",
        "remote/_http.py",
        '        await respond_error(send, 413, f"message larger than {limit} bytes")\n        return\n',
        "        pass\n",
        ("tests/remote/test_serve_security.py::test_a_body_over_the_limit_gets_413",),
    ),
    Mutation(
        "serve-1009",
        "serve: a frame over --max-message-bytes (in UTF-8 bytes) closes 1009",
        "remote/_websocket.py",
        '                conn.end(f"a message of {len(data)} bytes (limit {limit})", WS_TOO_BIG)\n',
        "                pass\n",
        ("tests/remote/test_serve_security.py::test_the_limit_counts_bytes_not_characters",),
    ),
    Mutation(
        "serve-max-connections",
        "serve: --max-connections refuses more with 503",
        "remote/_server.py",
        '            raise Refused(503, f"the server holds its maximum of {self.settings.max_connections} connections")\n',
        "            pass\n",
        ("tests/remote/test_serve_security.py::test_too_many_connections_get_503",),
    ),
    Mutation(
        "serve-idle",
        "serve: an idle connection is ended through the ladder",
        "remote/_server.py",
        '                conn.end(f"idle for {idle:g} s", WS_POLICY)\n',
        "                pass\n",
        ("tests/remote/test_serve_security.py::test_an_idle_websocket_is_closed_1008_and_its_agent_reaped",),
    ),
    Mutation(
        "serve-idle-http-agent-output",
        "serve: over HTTP, an agent's output (to nobody) does not keep a vanished client's connection alive",
        "remote/_served.py",
        '        if self.kind == "websocket":\n',
        "        if True:\n",
        (
            "tests/remote/test_serve_http.py::"
            "test_an_agent_streaming_to_nobody_does_not_keep_a_vanished_client_alive",
        ),
    ),
    Mutation(
        "serve-idle-not-during-initialize",
        "serve: a connection whose initialize awaits the agent is not idle",
        "remote/_server.py",
        "                if now - conn.last_activity < idle or conn.inflight.initializing:\n",
        "                if now - conn.last_activity < idle:\n",
        ("tests/remote/test_serve_security.py::test_an_agent_slow_to_answer_initialize_is_not_idle",),
    ),
    Mutation(
        "serve-loopback-without-token",
        "serve: a non-loopback bind without --token is refused",
        "remote/_server.py",
        "        if not is_loopback(self.host) and not self.token:\n",
        "        if False:\n",
        (
            "tests/remote/test_serve_security.py::test_settings_refuse_what_cannot_work",
            "tests/remote/test_serve_security.py::test_cli_refuses_a_public_bind_without_a_token",
        ),
    ),
    Mutation(
        "serve-stream-bound",
        "serve: a stream nobody reads is bounded (the connection ends)",
        "remote/_http.py",
        '            self.conn.end(f"{stream} is not read (over {self.max_buffered} bytes waiting)", WS_POLICY)\n',
        "            pass\n",
        ("tests/remote/test_serve_http.py::test_a_stream_nobody_reads_is_bounded",),
    ),
    Mutation(
        "serve-input-backlog-bound",
        "serve: an agent that does not read its input is bounded (the connection ends)",
        "remote/_served.py",
        '            self.end(f"the agent does not read its input (over {self.max_backlog} bytes waiting)", 1008)\n',
        "            pass\n",
        ("tests/remote/test_serve_websocket.py::test_an_agent_that_does_not_read_its_input_is_bounded",),
    ),
    Mutation(
        "remote-cookie-returned",
        "RFD (remote transports): the client returns the server's cookies, WebSocket handshake included",
        "remote/_client_ws.py",
        '        sent["Cookie"] = cookie\n',
        "        pass\n",
        ("tests/remote/test_connect_credentials.py::test_a_caller_jar_carries_cookies_across_reconnects",),
    ),
    Mutation(
        "remote-post-refused-fails-request",
        "a POST the server refuses fails the request it carried (exactly one outcome, never a hang)",
        "remote/_client_http.py",
        "            self.receiver.feed_messages([orjson.dumps(error)])\n",
        "            pass\n",
        ("tests/remote/test_connect_credentials.py::test_a_refused_post_fails_its_request_once",),
    ),
    Mutation(
        "remote-ladder-close-rung",
        "the ladder's TERMINATE rung closes a remote agent's connection",
        "remote/_connect.py",
        '        self.spawn(self.transport.aclose(self.close_grace), "close the connection")\n',
        "        pass\n",
        (
            "tests/remote/test_connect_profiles.py::test_an_agent_ignoring_cancel_is_disconnected_at_the_close_rung",
        ),
    ),
    Mutation(
        "remote-disconnected",
        "a remote agent's lost connection resolves its turns disconnected",
        "core/_turn.py",
        "            if self.remote:\n                return Resolution.DISCONNECTED\n",
        "",
        ("tests/remote/test_connect_machine.py", "tests/remote/test_connect_profiles.py"),
    ),
    Mutation(
        "serve-flow-control",
        "serve: a client reading slower than its agent writes pauses the agent's output",
        "remote/_served.py",
        "                self.backend.pause_output()\n",
        "                pass\n",
        ("tests/remote/test_serve_backpressure.py",),
    ),
    Mutation(
        "serve-flow-control-in-process",
        "serve: an agent served in-process is paused too (its updates wait for the client)",
        "remote/_inprocess.py",
        "        self.connection.pause_writing()\n",
        "        pass\n",
        ("tests/remote/test_serve_backpressure.py",),
    ),
    Mutation(
        "stdio-unwatchable",
        "an agent whose stdin epoll cannot watch (/dev/null) reads it in a thread and sees its end",
        "aio/_ndjson.py",
        "    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))\n",
        "    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)\n",
        ("tests/agent/test_stdio_kinds.py",),
    ),
    Mutation(
        "reader-thread-holds-file",
        "the reader thread keeps the file it reads open (its caller's reference may go first)",
        "aio/_ndjson.py",
        "    def run() -> None:\n        fd = file.fileno()\n",
        "    fd = file.fileno()\n\n    def run() -> None:\n",
        ("tests/aio/test_files.py",),
    ),
    Mutation(
        "serve-output-stall",
        "serve: a client that reads none of the agent's output for the idle timeout is ended",
        "remote/_server.py",
        "                if conn.paused_since is not None and now - conn.paused_since >= idle:\n"
        '                    conn.end(f"the client read none of the agent\'s output for {idle:g} s", WS_POLICY)\n'
        "                    continue\n",
        "",
        (
            "tests/remote/test_serve_backpressure.py::test_a_client_that_reads_nothing_is_ended_after_the_idle_timeout",
        ),
    ),
    Mutation(
        "fast-notification-no-answer",
        "JSON-RPC: a notification is never answered (the receive loop's notification fast path)",
        "core/_receiving.py",
        "                    event = Notification(method, params)\n",
        "                    self._reply_error(None, ErrorCode.INVALID_REQUEST, 'x', None, None)\n"
        "                    event = Notification(method, params)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-notification-jsonrpc",
        "a notification without jsonrpc 2.0 is invalid (the fast path leaves it to the checks)",
        "core/_receiving.py",
        '                    and message.get("jsonrpc") == "2.0"\n                    and method != CANCEL_REQUEST_METHOD\n',
        "                    and method != CANCEL_REQUEST_METHOD\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-notification-cancel-request",
        "$/cancel_request is not a plain notification (the fast path leaves it to the cancel checks)",
        "core/_receiving.py",
        "                    and method != CANCEL_REQUEST_METHOD\n",
        "",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-result-in-flight",
        "a result answers only a request of ours in flight (the fast path leaves others to the checks)",
        "core/_receiving.py",
        "                    and close_if_open(rid, Outcome.RESULT) is not None\n",
        "                    and (close_if_open(rid, Outcome.RESULT) is not None or True)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-result-tombstone",
        "an answered request leaves a tombstone (close_if_open's inlined ring), so a second answer is recognised",
        "core/_ledger.py",
        "                    ring.append(entry)\n                    tombstones[id] = entry\n",
        "                    ring.append(entry)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "run-ends-before-answer",
        "a run of updates is handled before the message that ends it (the prompt's answer fences the turn)",
        "aio/_connection.py",
        "            if run is not None:\n                self._handle_run(run_method, run)  # before the message that ends the run\n                run = None\n            if type(event) is Response:\n",
        "            if type(event) is Response:\n",
        ("tests/aio", "tests/driver"),
    ),
    Mutation(
        "fence-answered-prompt",
        "an update after its turn's prompt was answered is late, never the turn's",
        "driver/_session.py",
        "            elif answer.done():\n",
        "            elif False:\n",
        ("tests/driver/test_faults.py::test_update_in_the_same_read_as_an_error_answer_is_late",),
    ),
    Mutation(
        "run-handler-failure-contained",
        "a failing notification (run) handler never breaks the read loop",
        "aio/_serving.py",
        "        try:\n            self._notification_runs[method](run)\n        except Exception:\n",
        "        if True:\n            self._notification_runs[method](run)\n        if False:\n",
        ("tests/aio",),
    ),
    Mutation(
        "agent-session-cancel-before-its-turn",
        "session/cancel read together with the prompt it cancels (no turn yet) still cancels that turn",
        "agent/_runtime.py",
        "            return self._session_cancel_later(params)\n",
        "            return None\n",
        (
            "tests/agent/test_runtime.py::test_session_cancel_in_the_same_read_as_the_prompt_answers_cancelled",
        ),
    ),
    Mutation(
        "agent-cancel-wakes-the-prompt",
        "agent runtime: a cancelled turn is answered once it unwinds (or at cancel_timeout), not when it ends",
        "agent/_turn.py",
        "        self._settle()  # after the task's cancel: the task unwinds before the runtime looks\n",
        "",
        ("tests/agent/test_runtime.py::test_swallowed_cancel_is_fenced_after_the_response",),
    ),
    Mutation(
        "reference-agent-command-words",
        "the reference agent splits a command line as shlex does (quotes keep words together)",
        "reference_agent.py",
        "    if line.isascii() and _NOT_PLAIN.isdisjoint(line):\n",
        "    if line.isascii():\n",
        ("tests/agent/test_reference_commands.py",),
    ),
    Mutation(
        "on-result-as-read",
        "on_result is called as the result is read, before the next message of the same read",
        "aio/_connection.py",
        "                    if fut.on_result is not None:\n"
        "                        self._result_read(fut, event.result)  # first: what it wakes runs first\n",
        "",
        (
            "tests/aio/test_requests.py::test_on_result_is_called_as_the_result_is_read_before_the_next_message",
        ),
    ),
    Mutation(
        "on-result-never-breaks-the-read",
        "a failing on_result callback is logged; the read loop goes on (a peer never crashes it)",
        "aio/_requesting.py",
        "        try:\n            on_result(result)\n        except Exception:\n",
        "        if True:\n            on_result(result)\n        if False:\n",
        ("tests/aio/test_requests.py::test_a_failing_on_result_is_logged_and_the_read_goes_on",),
    ),
    Mutation(
        "on-result-before-the-future",
        "what on_result wakes resumes before the tasks awaiting the future (the turn's caller first)",
        "aio/_connection.py",
        "                    if fut.on_result is not None:\n"
        "                        self._result_read(fut, event.result)  # first: what it wakes runs first\n"
        "                    fut.set_result(event.result)\n",
        "                    fut.set_result(event.result)\n"
        "                    if fut.on_result is not None:\n"
        "                        self._result_read(fut, event.result)\n",
        (
            "tests/aio/test_requests.py::test_what_on_result_wakes_resumes_before_the_tasks_awaiting_the_future",
        ),
    ),
    Mutation(
        "on-result-no-cycle",
        "a request's on_result is dropped once called: its owner and the future are freed without the collector",
        "aio/_requesting.py",
        "        fut.on_result = None  # called once; and no cycle left for the collector (its owner holds fut)\n",
        "",
        ("tests/aio/test_requests.py::test_on_result_leaves_no_reference_cycle",),
    ),
]


def run(mutation: Mutation) -> bool:
    """True if the tests caught the mutation (failed)."""
    path = SRC / mutation.path
    original = path.read_text()
    if original.count(mutation.old) != 1:
        print(f"  ?? {mutation.name}: the code to mutate was not found once in {mutation.path}")
        return False
    path.write_text(original.replace(mutation.old, mutation.new))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        path.write_text(original)
    return proc.returncode != 0


def main() -> int:
    wanted = sys.argv[1:]
    survived = []
    for mutation in MUTATIONS:
        if wanted and not any(w in mutation.name for w in wanted):
            continue
        caught = run(mutation)
        print(f"{'caught  ' if caught else 'SURVIVED'} {mutation.name}: {mutation.rule}", flush=True)
        if not caught:
            survived.append(mutation.name)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
