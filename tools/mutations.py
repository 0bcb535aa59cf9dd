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
        '            if turn is not None and turn.cancel_requested and not withdrawn:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n',
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
        "driver/_prompt_turn.py",
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
        "driver/_process_peer.py",
        "    def kill(self) -> None:\n        self.process.kill()\n",
        "    def kill(self) -> None:\n        pass\n",
        ("tests/driver/test_ladder_fake_time.py",),
    ),
    Mutation(
        "ladder-session-cancel",
        "the ladder starts with session/cancel",
        "driver/_peer.py",
        '                conn.notify_nowait(p.SESSION_CANCEL, {"sessionId": session_id})\n',
        "                pass\n",
        ("tests/driver/test_ladder_fake_time.py",),
    ),
    Mutation(
        "serve-session-cancel-on-disconnect",
        "serve: a connection that ends mid-turn sends session/cancel for the live prompt",
        "remote/_served.py",
        '        self._send_to_agent(\n            {"jsonrpc": "2.0", "method": p.SESSION_CANCEL, "params": {"sessionId": session_id}}\n        )\n',
        "        pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_closing_the_websocket_mid_turn_cancels_it_and_reaps_the_agent",
        ),
    ),
    Mutation(
        "serve-cancel-request-rung",
        "serve: $/cancel_request for a prompt still unanswered at half the budget",
        "remote/_served.py",
        '        self._send_to_agent(\n            {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": request_id}}\n        )\n',
        "        pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "serve-sigterm-rung",
        "serve: SIGTERM to the agent's group at 3/4 of the budget",
        "remote/_served.py",
        "    def terminate(self) -> None:\n        self.backend.terminate()\n",
        "    def terminate(self) -> None:\n        pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "serve-sigkill-rung",
        "serve: SIGKILL to the agent's group at the budget",
        "remote/_served.py",
        "    def kill(self) -> None:\n        self.backend.kill()\n",
        "    def kill(self) -> None:\n        pass\n",
        (
            "tests/remote/test_serve_websocket.py::test_an_agent_that_ignores_the_cancel_is_killed_within_the_budget",
        ),
    ),
    Mutation(
        "serve-eof-when-no-prompt",
        "serve: the agent's input closed once no prompt is in flight",
        "core/_connection_end.py",
        "        if close and not self.input_closed:\n",
        "        if False:\n",
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
        "remote/_relay_ledger.py",
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
        "        if rung is Rung.SESSION_CANCEL:\n            self._answer_for_client()\n",
        "        if rung is Rung.SESSION_CANCEL:\n            pass\n",
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
        '            conn.end(f"idle for {idle:g} s", WS_POLICY)\n',
        "            pass\n",
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
        "            if now - conn.last_activity < idle or conn.inflight.initializing:\n",
        "            if now - conn.last_activity < idle:\n",
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
        "net/_client_ws.py",
        '        sent["Cookie"] = cookie\n',
        "        pass\n",
        ("tests/remote/test_connect_credentials.py::test_a_caller_jar_carries_cookies_across_reconnects",),
    ),
    Mutation(
        "remote-post-refused-fails-request",
        "a POST the server refuses fails the request it carried (exactly one outcome, never a hang)",
        "net/_client_http.py",
        "            self.receiver.feed_messages([orjson.dumps(error)])\n",
        "            pass\n",
        ("tests/remote/test_connect_credentials.py::test_a_refused_post_fails_its_request_once",),
    ),
    Mutation(
        "remote-ladder-close-rung",
        "the ladder's TERMINATE rung closes a remote agent's connection",
        "driver/_network_peer.py",
        '        self._agent.spawn(self.transport.aclose(self.close_grace), "close the connection")\n',
        "        pass\n",
        (
            "tests/remote/test_connect_profiles.py::test_an_agent_ignoring_cancel_is_disconnected_at_the_close_rung",
        ),
    ),
    Mutation(
        "remote-disconnected",
        "a remote agent's lost connection resolves its turns disconnected",
        "core/_host_turn.py",
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
        "            if conn.paused_since is not None and now - conn.paused_since >= idle:\n"
        '                conn.end(f"the client read none of the agent\'s output for {idle:g} s", WS_POLICY)\n'
        "                continue\n",
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
        "driver/_prompt_turn.py",
        "        return answer is None or answer.done()\n",
        "        return answer is None\n",
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
        "serve-host-check",
        "serve: a request whose Host does not name this server is refused (DNS rebinding)",
        "remote/_server.py",
        "        if not self.hosts.admits(host):\n",
        "        if False:\n",
        ("tests/remote/test_serve_security.py::test_dns_rebinding_is_refused_on_both_profiles",),
    ),
    Mutation(
        "serve-origin-port-and-scheme",
        "serve: an Origin differing from the server's only in port or scheme is another site",
        "remote/_guard.py",
        "        return own is not None and normal == own\n",
        '        return own is not None and normal.split("://")[1].split(":")[0] == own.split("://")[1].split(":")[0]\n',
        (
            "tests/remote/test_serve_security.py::test_an_origin_differing_only_in_port_or_scheme_is_another_site",
        ),
    ),
    Mutation(
        "serve-bearer-whole",
        "serve: the bearer token matches whole, not as a prefix",
        "remote/_guard.py",
        "    return hmac.compare_digest(value.strip(), token)\n",
        "    return value.strip().startswith(token)\n",
        ("tests/remote/test_serve_security.py::test_a_bearer_token_must_match_whole",),
    ),
    Mutation(
        "serve-token-env-not-inherited",
        "serve: the token from the environment is not passed on to the agent",
        "cli/_serve.py",
        "    from_env = os.environ.pop(TOKEN_ENV, None)\n",
        "    from_env = os.environ.get(TOKEN_ENV)\n",
        (
            "tests/remote/test_serve_security.py::test_the_token_from_a_file_or_the_environment_never_on_the_command_line",
        ),
    ),
    Mutation(
        "relay-lone-surrogates-from-agent",
        "serve: an agent's line with a lone-surrogate escape (valid JSON) is relayed, not dropped",
        "remote/_served.py",
        "            message = parse_json(item)\n",
        "            message = orjson.loads(item)\n",
        (
            "tests/remote/test_serve_websocket.py::test_lone_surrogates_are_relayed_both_ways",
            "tests/remote/test_serve_http.py::test_lone_surrogates_are_relayed_both_ways",
        ),
    ),
    Mutation(
        "relay-lone-surrogates-from-client",
        "serve: a client's frame with a lone-surrogate escape (valid JSON) reaches the agent",
        "remote/_websocket.py",
        "                message = parse_json(data)\n",
        "                message = __import__('orjson').loads(data)\n",
        ("tests/remote/test_serve_websocket.py::test_lone_surrogates_are_relayed_both_ways",),
    ),
    Mutation(
        "own-text-no-lone-surrogate",
        "we never send a lone surrogate of our own (U+FFFD instead), nor fail a request for one",
        "core/_connection.py",
        '        except TypeError:  # a lone surrogate in a string: U+FFFD instead (core/_json.py)\n            return _dumps_own(message, self._default) + b"\\n"\n',
        "        except TypeError:\n            raise\n",
        ("tests/agent/test_odd_text.py::test_a_lone_surrogate_in_a_prompt_is_read_and_echoed_as_u_fffd",),
    ),
    Mutation(
        "reference-sleep-invalid-params",
        "reference agent: _acp_driver/sleep with a non-number ms is -32602, not -32603",
        "reference_agent.py",
        "    if type(ms) not in (int, float) or not 0 <= ms < 86_400_000:  # bool and NaN are not ms\n",
        "    if False:\n",
        ("tests/agent/test_odd_text.py::test_sleep_with_a_bad_ms_is_invalid_params",),
    ),
    Mutation(
        "serve-quiet-shutdown",
        "serve: SIGTERM with a client that never answers the close frame prints no traceback",
        "remote/_server.py",
        "            with _quiet_cancelled_streams():\n",
        "            with contextlib.nullcontext():\n",
        (
            "tests/remote/test_serve_cli.py::test_sigterm_with_a_client_that_never_answers_the_close_frame_is_quiet",
        ),
    ),
    # ---------------------------------------------------------------- the CLI (issue 22)
    Mutation(
        "cli-text-controls-one-line",
        "CLI: an agent's one-line text (titles, kinds, statuses, names) shows controls as pictures",
        "cli/_text.py",
        "    return printable(text).translate(_ONE_LINE)\n",
        "    return printable(text)\n",
        ("tests/cli/test_agent_text.py",),
    ),
    Mutation(
        "cli-text-controls-multi-line",
        "CLI: an agent's message and thought text: lone surrogates replaced, controls shown as pictures",
        "cli/_text.py",
        '        return printable(text.replace("\\r\\n", "\\n")).translate(_MULTI_LINE)\n',
        "        return text\n",
        ("tests/cli/test_agent_text.py",),
    ),
    Mutation(
        "cli-text-never-markup",
        "CLI: the console renders rich Text built from the agent's strings, never markup",
        "cli/_render.py",
        "    return Text.assemble(*parts)\n",
        '    return Text.from_markup("".join(p if isinstance(p, str) else p[0] for p in parts))\n',
        ("tests/cli/test_agent_text.py::test_markup_and_escapes_from_the_agent_are_shown_as_text",),
    ),
    Mutation(
        "cli-text-message-chunk",
        "CLI: a message chunk is shown by the text rule (stdout)",
        "cli/_render.py",
        '            text = shown(update.text, lines=True)  # type: ignore[attr-defined]\n            if self._stream != "message":',
        '            text = update.text  # type: ignore[attr-defined]\n            if self._stream != "message":',
        ("tests/cli/test_agent_text.py::test_lone_surrogates_are_shown_replaced_and_kept_exact_in_json",),
    ),
    Mutation(
        "cli-text-tool-kind-status",
        "CLI: a tool call's kind and status are shown by the text rule",
        "cli/_render.py",
        '(f"({shown(kind)}, {shown(status)})", "dim")',
        '(f"({kind}, {status})", "dim")',
        ("tests/cli/test_agent_text.py::test_markup_and_escapes_from_the_agent_are_shown_as_text",),
    ),
    Mutation(
        "cli-text-permission-question",
        "CLI: the permission question shows the agent's title by the text rule",
        "cli/_permissions.py",
        "asks permission: {shown(request.title)}",
        "asks permission: {request.title}",
        ("tests/cli/test_agent_text.py::test_a_permission_question_shows_the_agents_title_as_text",),
    ),
    Mutation(
        "cli-text-error-line",
        "CLI: an error line (which quotes the agent's stderr) is shown by the text rule",
        "cli/_render.py",
        '_text(("error:", "bold red"), f" {shown(message, lines=True)}")',
        '_text(("error:", "bold red"), f" {message}")',
        ("tests/cli/test_agent_text.py::test_an_agents_stderr_and_exit_are_reported_as_text",),
    ),
    Mutation(
        "cli-text-log-lines",
        "CLI: log lines (-v, -vv: the agent's stderr) are shown by the text rule",
        "cli/_text.py",
        "        return shown(super().format(record), lines=True)\n",
        "        return super().format(record)\n",
        ("tests/cli/test_agent_text.py::test_an_agents_stderr_and_exit_are_reported_as_text",),
    ),
    Mutation(
        "cli-text-check-table",
        "CLI: check's table shows the agent's name by the text rule",
        "cli/_check.py",
        '    name = shown(info.get("title") or info.get("name") or argv[0])\n',
        '    name = str(info.get("title") or info.get("name") or argv[0])\n',
        ("tests/cli/test_agent_text.py::test_check_shows_agent_text_as_text",),
    ),
    Mutation(
        "cli-json-exact",
        "CLI: --json writes the agent's text exactly (lone surrogates escaped), never a crash",
        "cli/_render.py",
        '        self._out.write(json_text(obj) + "\\n")\n',
        '        self._out.write(__import__("orjson").dumps(obj).decode() + "\\n")\n',
        ("tests/cli/test_agent_text.py::test_lone_surrogates_are_shown_replaced_and_kept_exact_in_json",),
    ),
    Mutation(
        "cli-json-c1",
        "CLI: JSON output writes C1 controls as escapes",
        "cli/_text.py",
        "    return _C1.sub(_escape, text)\n",
        "    return text\n",
        ("tests/cli/test_agent_text.py::test_json_output_keeps_the_agents_text_exact_and_inert",),
    ),
    Mutation(
        "cli-url-usable",
        "CLI: an agent URL no transport can use is a usage error (exit 2), not a traceback",
        "cli/_main.py",
        '    check_url(parser, opts.agent_url, "--agent")\n',
        "",
        ("tests/cli/test_clear_errors.py::test_an_unusable_agent_url_is_a_usage_error",),
    ),
    Mutation(
        "cli-remote-extra",
        "CLI: a remote agent without the remote extra says how to install it",
        "cli/_main.py",
        '        require_remote_extra("a remote agent (--agent URL)")\n',
        "        pass\n",
        ("tests/cli/test_clear_errors.py::test_the_remote_extra_missing_says_how_to_install_it",),
    ),
    Mutation(
        "cli-stdout-write-error",
        "CLI: a write to stdout that fails (a full disk) is one line and exit 1, not a traceback",
        "cli/_stdout.py",
        "            return int(self._stream.write(text))\n        except OSError as exc:",
        "            return int(self._stream.write(text))\n        except BrokenPipeError as exc:",
        ("tests/cli/test_clear_errors.py::test_a_full_stdout_is_one_line_and_exit_1",),
    ),
    Mutation(
        "cli-stdout-failure-cancels",
        "CLI: a failed stdout cancels the turn (nobody can see it) like a signal",
        "cli/_run.py",
        "    stdout.on_failed = controller.on_output_lost\n    controller.install()\n    try:\n        try:\n            started",
        "    controller.install()\n    try:\n        try:\n            started",
        ("tests/cli/test_clear_errors.py::test_a_full_stdout_is_one_line_and_exit_1",),
    ),
    Mutation(
        "cli-stdout-closed",
        "CLI: a closed stdout is refused before anything starts",
        "cli/_main.py",
        "        if 1 in closed:\n",
        "        if False:\n",
        ("tests/cli/test_clear_errors.py::test_a_closed_stdout_is_refused_before_anything_starts",),
    ),
    Mutation(
        "cli-deleted-cwd",
        "CLI: a deleted current directory is a usage error",
        "cli/_main.py",
        "        return os.getcwd()\n    except OSError as exc:  # deleted while we were in it",
        "        return os.getcwd()\n    except ZeroDivisionError as exc:  # deleted while we were in it",
        ("tests/cli/test_clear_errors.py::test_a_deleted_current_directory_is_a_usage_error",),
    ),
    Mutation(
        "cli-agent-closed-fds",
        "acp-driver agent without stdin or stdout says so",
        "cli/_agent_cmd.py",
        "        if _closed(fd):",
        "        if False:",
        ("tests/cli/test_clear_errors.py::test_the_reference_agent_without_stdin_or_stdout_says_so",),
    ),
    Mutation(
        "start-names-exit-status",
        "an agent that exits at once is reported with its exit status, whatever failed first",
        "driver/_agent.py",
        "                why = self._exit_reason if isinstance(exc, AgentExitedError) and self._exit_reason else exc\n",
        "                why = exc\n",
        ("tests/cli/test_clear_errors.py::test_an_agent_that_exits_at_once_is_reported_with_its_status",),
    ),
    Mutation(
        "start-aborted-abandons-initialize",
        "a start aborted by a signal leaves no unretrieved initialize answer (no asyncio report)",
        "driver/_agent.py",
        "                _abandon(answer)  # the start was aborted (a signal): nobody reads this answer\n",
        "",
        ("tests/cli/test_signals.py::test_a_signal_while_the_agent_initializes_aborts_at_once",),
    ),
    Mutation(
        "cli-late-signal-run",
        "run/chat: a signal once the agent is reaped keeps the exit code (no death by the default action)",
        "cli/_controller.py",
        "            signal.signal(signum, signal.SIG_IGN)\n",
        "            signal.signal(signum, signal.SIG_DFL)\n",
        ("tests/cli/test_signals.py::test_a_signal_once_the_agent_is_reaped_keeps_the_exit_code",),
    ),
    Mutation(
        "cli-late-signal-check",
        "check: a signal once every agent is reaped keeps the exit code",
        "cli/_main.py",
        "            signal.signal(sig, signal.SIG_IGN)\n",
        "            signal.signal(sig, signal.SIG_DFL)\n",
        ("tests/cli/test_signals.py::test_check_keeps_its_exit_code_when_a_signal_comes_at_its_end",),
    ),
    Mutation(
        "check-in-flight",
        "check: an update in flight when the cancel went out is not activity after it",
        "cli/_check_turns.py",
        "probe.first_activity(busy.sent + IN_FLIGHT) is None",
        "probe.first_activity(busy.sent) is None",
        (
            "tests/cli/test_check_wire.py::test_an_update_in_flight_when_the_cancel_went_out_is_not_activity_after_it",
        ),
    ),
    Mutation(
        "check-refusal-session-cancel",
        "check: an 'unknown method' answer to session/cancel is a verdict, not a race",
        "cli/_check_rules.py",
        "    refused = refusal(probe, busy.sent, p.SESSION_CANCEL)\n",
        "    refused = None\n",
        ("tests/cli/test_check_wire.py::test_an_agent_answering_the_cancel_unknown_method_is_a_verdict",),
    ),
    Mutation(
        "check-refusal-cancel-request",
        "check: an 'unknown method' answer to $/cancel_request is a verdict",
        "cli/_check_rules.py",
        "    refused = refusal(probe, busy.sent, p.CANCEL_REQUEST)\n",
        "    refused = None\n",
        ("tests/cli/test_check.py::test_id_less_replies_to_notifications_fail",),
    ),
    Mutation(
        "check-after-answer-wire-order",
        "check: an update behind the prompt's answer on the wire is after it (even in the same read)",
        "cli/_check_rules.py",
        "    late = probe.updates_after_answer(ids[0], sid)\n",
        "    late = probe.updates_after(time.monotonic(), sid)\n",
        ("tests/cli/test_check_wire.py::test_an_update_right_behind_the_answer_is_after_it",),
    ),
    Mutation(
        "check-permission-hold-ends-with-the-turn",
        "check: the permission hold ends when the turn does; its latency is the agent's, not the hold",
        "cli/_check_rules.py",
        "    await _first(probe, task, withdrawn, min(opts.timeout, PERMISSION_HOLD))\n",
        "    with contextlib.suppress(TimeoutError):\n        async with asyncio.timeout(min(opts.timeout, PERMISSION_HOLD)):\n            await withdrawn.wait()\n",
        ("tests/cli/test_check_wire.py::test_permission_latency_is_taken_off_the_wire",),
    ),
    Mutation(
        "check-permission-latency-from-the-answer",
        "check: an agent that waits for its permission answer is timed from that answer, not the hold",
        "cli/_check_rules.py",
        '        since, cause = released, "the audit answered the permission request cancelled"\n',
        '        since, cause = sent, "the audit answered the permission request cancelled"\n',
        (
            "tests/cli/test_check_wire.py::test_an_agent_that_waits_for_the_permission_answer_is_timed_from_that_answer",
        ),
    ),
    Mutation(
        "check-setup-failure-untested",
        "check: a rule whose fresh agent cannot start is not tested (SKIP), not failed",
        "cli/_check.py",
        'CheckResult(rule, level, SKIP, f"{NOT_SET_UP}: {exc}")',
        'CheckResult(rule, level, FAIL, f"{NOT_SET_UP}: {exc}")',
        ("tests/cli/test_check_wire.py::test_a_fresh_agent_that_cannot_start_leaves_its_rules_untested",),
    ),
    Mutation(
        "check-idle-control-turn",
        "check: a next turn that times out is judged against a control turn on a fresh session",
        "cli/_check_rules.py",
        '    if control_kind == "result" and stop_reason(control_kind, control_value) != "cancelled":\n',
        "    if True:\n",
        ("tests/cli/test_check_wire.py::test_a_next_turn_that_never_ends_is_inconclusive_when_no_turn_ends",),
    ),
    Mutation(
        "check-terminal-offered",
        "check --terminal: terminals are offered in initialize",
        "cli/_probe.py",
        '                    "terminal": self.terminal,\n',
        '                    "terminal": False,\n',
        ("tests/cli/test_check_wire.py::test_terminal_offers_real_terminals_for_agents_that_ask_only_then",),
    ),
    Mutation(
        "check-terminals-reaped",
        "check --terminal: the agent's terminals are killed with their probe",
        "cli/_probe.py",
        "            await self.terminals.aclose()\n",
        "            pass\n",
        ("tests/cli/test_check_wire.py::test_a_terminal_is_killed_with_its_probe",),
    ),
    Mutation(
        "run-cancelled-by-host",
        "run --json: cancelledBy is host when the ladder ended the turn by force",
        "cli/_render.py",
        '            "cancelledBy": cancelled_by(result),\n',
        '            "cancelledBy": result.cancelled_by,\n',
        ("tests/cli/test_run_reports.py::test_a_turn_the_ladder_ended_by_force_was_cancelled_by_the_host",),
    ),
    Mutation(
        "run-permission-withdrawn-by-whom",
        "run: a question this host cancelled is not said withdrawn by the agent",
        "cli/_permissions.py",
        "            if ctx is not None and ctx.cancel_requested:  # the agent's $/cancel_request\n",
        "            if True:  # the agent's $/cancel_request\n",
        ("tests/cli/test_tty.py::test_ctrl_c_closes_an_open_permission_question",),
    ),
    Mutation(
        "run-permission-withdrawn-by-the-agent",
        "run: a question the agent withdrew is said withdrawn by the agent",
        "cli/_permissions.py",
        "            if ctx is not None and ctx.cancel_requested:  # the agent's $/cancel_request\n",
        "            if False:  # the agent's $/cancel_request\n",
        (
            "tests/cli/test_run_reports.py::test_a_question_the_agent_withdraws_is_said_withdrawn_by_the_agent",
        ),
    ),
    Mutation(
        "run-mode",
        "run/chat --mode: session/set_mode before the first prompt",
        "cli/_start.py",
        "            await session.set_mode(mode)\n",
        "            pass\n",
        ("tests/cli/test_run_reports.py::test_mode_sets_the_session_mode_before_the_first_prompt",),
    ),
    Mutation(
        "chat-separate-turns",
        "chat off a terminal: each answer ends its line",
        "cli/_render.py",
        " or (turn_over and self.separate_turns)",
        "",
        ("tests/cli/test_run_reports.py::test_chat_off_a_terminal_keeps_answers_apart",),
    ),
    Mutation(
        "serve-ladder-on-the-clock",
        "one clock: a served connection's ladder runs on the server's injected clock",
        "remote/_served.py",
        "        self.clock: Clock = clock if clock is not None else LoopClock()\n",
        "        self.clock: Clock = LoopClock()\n",
        ("tests/remote/test_serve_fake_time.py::test_a_wedged_agent_gets_every_rung_at_its_moment",),
    ),
    Mutation(
        "serve-idle-sweep-on-the-clock",
        "one clock: serve's idle sweep runs on the server's injected clock",
        "remote/_server.py",
        "        self._sweeper = self.clock.call_at(self.clock.now() + interval, self._sweep_idle)\n",
        "        self._sweeper = LoopClock().call_at(LoopClock().now() + interval, self._sweep_idle)\n",
        ("tests/remote/test_serve_fake_time.py::test_the_idle_sweep_runs_on_the_clock",),
    ),
    Mutation(
        "runtime-cancel-timeout-on-the-clock",
        "one clock: the agent runtime's cancel timeout runs on its injected clock",
        "agent/_runtime.py",
        "        if not await wait_on(self.clock, (task,), timeout):\n",
        "        if not await wait_on(LoopClock(), (task,), timeout):\n",
        (
            "tests/remote/test_serve_fake_time.py::test_an_in_process_turn_that_ignores_its_cancel_is_answered_at_the_cancel_timeout",
        ),
    ),
    Mutation(
        "trace-redact-secret-keys",
        "trace: a value under a key naming a secret never reaches the file",
        "trace/_redact.py",
        "            if isinstance(key, str) and _SECRET_KEY.search(key) and not _is_count(item):\n",
        "            if False:\n",
        ("tests/trace/test_recorder.py::test_credentials_and_environments_never_reach_the_file",),
    ),
    Mutation(
        "trace-redact-auth-params",
        "trace: an authentication request keeps only its methodId",
        "trace/_redact.py",
        '        out["params"] = {**kept, **{k: REDACTED for k in params if k != "methodId"}}\n',
        "",
        ("tests/trace/test_recorder.py::test_credentials_and_environments_never_reach_the_file",),
    ),
    Mutation(
        "trace-redact-auth-answer",
        "trace: the answer to an authentication request is replaced whole",
        "trace/_recorder.py",
        '                    message = {**message, "result": REDACTED} if "result" in message else message\n',
        "                    pass\n",
        ("tests/trace/test_recorder.py::test_credentials_and_environments_never_reach_the_file",),
    ),
    Mutation(
        "trace-redact-environment",
        "trace: environments and headers keep their names, never their values",
        "trace/_redact.py",
        '            elif key in ("env", "environment", "headers"):\n',
        "            elif False:\n",
        ("tests/trace/test_recorder.py::test_credentials_and_environments_never_reach_the_file",),
    ),
    Mutation(
        "trace-redact-argv",
        "trace: the value after a command-line option naming a secret is replaced",
        "trace/_redact.py",
        "            hide_next = True\n",
        "            hide_next = False\n",
        ("tests/trace/test_recorder.py::test_credentials_and_environments_never_reach_the_file",),
    ),
    Mutation(
        "trace-size-cap",
        "trace: the file stops at its size cap, with a note",
        "trace/_recorder.py",
        "        if self._written + len(line) > self.max_bytes - _NOTE_ROOM:\n",
        "        if False:\n",
        ("tests/trace/test_recorder.py::test_the_file_stops_at_its_size_cap_with_a_note",),
    ),
    Mutation(
        "trace-written-per-event",
        "trace: each event is written when it happens (a killed recorder loses nothing)",
        "trace/_recorder.py",
        "            view = memoryview(line)\n            while view:\n                view = view[os.write(fd, view) :]\n",
        "            self.__dict__.setdefault('held', []).append(line)\n",
        (
            "tests/trace/test_recorder.py::test_every_line_written_survives_the_recording_process_being_killed",
        ),
    ),
    Mutation(
        "trace-page-escapes-text",
        "timeline page: what the agent sent is text, never markup",
        "trace/_html.py",
        "    return html.escape(str(text), quote=True)\n",
        "    return str(text)\n",
        (
            "tests/trace/test_lifecycle.py::test_the_page_holds_agent_text_as_text",
            "tests/trace/test_timeline_browser.py::test_the_page_renders_without_errors_network_or_agent_code",
        ),
    ),
    Mutation(
        "trace-page-escapes-data",
        "timeline page: the hover data cannot close its script element",
        "trace/_html.py",
        '    data = data.replace(b"<", b"\\\\u003c").replace(b">", b"\\\\u003e").replace(b"&", b"\\\\u0026")\n',
        "",
        ("tests/trace/test_timeline_browser.py::test_the_page_renders_without_errors_network_or_agent_code",),
    ),
    Mutation(
        "trace-late-tool-call",
        "trace reader: an update of an earlier turn's tool call is late, as the driver says",
        "trace/_model.py",
        "            if isinstance(call, str) and call not in turn.tool_calls and earlier:\n",
        "            if False:\n",
        (
            "tests/trace/test_lifecycle.py::test_updates_after_the_answer_are_late_on_the_turn_they_came_after",
        ),
    ),
    Mutation(
        "trace-exit-recorded",
        "trace: the agent's exit is recorded with its status",
        "aio/_process.py",
        '            self.trace.event("exit", pid=self.pid, status=code, description=exit_description(code))\n',
        "            pass\n",
        (
            "tests/trace/test_lifecycle.py::test_the_trace_records_every_message_and_the_lifecycle_of_the_cancels",
        ),
    ),
    Mutation(
        "trace-signal-recorded",
        "trace: each signal sent to the agent's group is recorded",
        "aio/_process.py",
        '                self.trace.event("signal", name=signal.Signals(sig).name, to="agent", pid=self.pgid)\n',
        "                pass\n",
        (
            "tests/trace/test_lifecycle.py::test_the_trace_records_every_message_and_the_lifecycle_of_the_cancels",
        ),
    ),
    Mutation(
        "trace-check-verdict-linked",
        "check --trace: each verdict names its event in the trace",
        "cli/_check.py",
        "                result.trace_event = probe.trace.event(\n",
        "                probe.trace.event(\n",
        ("tests/trace/test_trace_cli.py::test_check_links_each_verdict_to_the_moments_that_prove_it",),
    ),
    Mutation(
        "otel-trace-context-in-meta",
        "OpenTelemetry: the turn's trace context goes to the agent in the prompt's _meta",
        "driver/_prompt_turn.py",
        '            params["_meta"] = meta  # W3C trace context (spec: extensibility.mdx, _meta)\n',
        "            pass\n",
        ("tests/trace/test_otel.py::test_the_trace_context_crosses_the_wire_in_meta",),
    ),
    Mutation(
        "close-leftovers-cancelled",
        "internal cancellation answers -32800: handlers ignoring their cancellation at close",
        "aio/_serving.py",
        '            self._answer_error(entry, ErrorCode.REQUEST_CANCELLED, "Request cancelled: connection closing")\n',
        '            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, "Request cancelled: connection closing")\n',
        (
            "tests/aio/test_serving_edges.py::test_handlers_ignoring_their_cancellation_at_close_are_answered_cancelled",
        ),
    ),
    Mutation(
        "request-while-closing-cancelled",
        "internal cancellation answers -32800: a request read while the connection closes",
        "aio/_serving.py",
        '                core.send_cancelled(event.id, "Request cancelled: connection closing")\n',
        '                core.send_error(event.id, ErrorCode.INTERNAL_ERROR, "closing")\n',
        ("tests/aio/test_serving_edges.py::test_a_request_read_while_closing_is_answered_cancelled",),
    ),
    Mutation(
        "inline-handler-raises-answered",
        "every request gets exactly one answer: a plain def handler that raises",
        "aio/_serving.py",
        '        except Exception as exc:\n            self._answer_exception(entry, exc)\n        except BaseException:\n            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")\n            raise\n        else:\n            if type(result)',
        '        except Exception:\n            pass\n        except BaseException:\n            self._answer_error(entry, ErrorCode.INTERNAL_ERROR, f"Internal error in {entry.method}")\n            raise\n        else:\n            if type(result)',
        ("tests/aio/test_serving_edges.py::test_a_plain_def_handler_that_raises_is_answered_once",),
    ),
    Mutation(
        "permission-policy-swallowing-the-cancel",
        "spec MUST (prompt-turn.mdx): a pending permission is answered cancelled even when the policy swallows the cancel",
        "driver/_routing.py",
        '        if turn is not None and turn.cancel_requested:\n            return {"outcome": dict(CANCELLED_OUTCOME)}\n        return {"outcome": validate_outcome(outcome, request)}\n',
        '        return {"outcome": validate_outcome(outcome, request)}\n',
        (
            "tests/driver/test_reference_behaviors.py::test_a_policy_that_swallows_the_cancel_still_answers_cancelled",
        ),
    ),
    Mutation(
        "serve-reaps-the-agents-group-unsupervised",
        "no orphans: serve releasing an agent kills what is left of its group (unsupervised, off Linux)",
        "remote/_relay.py",
        "        code = await self.process.reap(term_timeout=0)\n",
        "        code = await self.process.wait()\n",
        (
            "tests/remote/test_serve_websocket.py::test_unsupervised_an_agents_leftover_group_is_killed_at_release",
        ),
    ),
    Mutation(
        "process-group-stragglers-killed",
        "no orphans: reaping a process group kills the members that outlived its leader",
        "aio/_process.py",
        "        code = await self.wait()\n        self._kill_stragglers()\n",
        "        code = await self.wait()\n",
        (
            "tests/remote/test_serve_websocket.py::test_unsupervised_an_agents_leftover_group_is_killed_at_release",
        ),
    ),
    Mutation(
        "unknown-update-kind-is-the-sessions",
        "an update of a kind the version does not know is kept as the session's, never late",
        "driver/_session.py",
        "            if update.kind not in turn_kinds:  # about the session (or unknown): valid any time\n",
        '            if update.kind not in turn_kinds and update.kind != "unknown":\n',
        ("tests/driver/test_faults.py::test_updates_after_the_response_are_late",),
    ),
    Mutation(
        "v2-agent-cancelled-whatever-the-handler-did",
        "spec MUST (v2 prompt-lifecycle.mdx): a cancelled span ends with an idle stopReason cancelled",
        "agent/_spans.py",
        '            stop = "cancelled"\n        else:\n',
        '            stop = self._stop_reason(task.result()) if task.done() and not task.cancelled() and task.exception() is None else "cancelled"\n        else:\n',
        ("tests/agent/test_v2_runtime.py::test_a_cancelled_span_ends_cancelled_whatever_the_handler_does",),
    ),
    Mutation(
        "v2-agent-held-prompts-cancelled",
        "v2: session/cancel answers every prompt held at that moment -32800",
        "agent/_spans.py",
        "            if task is not None and not task.done():\n                task.cancel(reason)\n",
        "            pass\n",
        ("tests/agent/test_v2_runtime.py::test_held_prompts_cancels_and_withdrawals",),
    ),
    Mutation(
        "v2-agent-close-idle-before-answer",
        "v2 (CloseSessionRequest): the idle cancelled comes before session/close's answer",
        "agent/_spans.py",
        "        if turn is not None and turn.span is not None:\n            await wait_on(\n",
        "        if False:\n            await wait_on(\n",
        (
            "tests/agent/test_v2_runtime.py::test_close_sends_the_idle_cancelled_before_its_answer_and_nothing_after",
        ),
    ),
    Mutation(
        "v2-agent-resume-snapshot",
        "v2 (ResumeSessionResponse): a state snapshot after the replay, before the answer",
        "agent/_spans.py",
        "        await self.snapshot(session)\n        return extra\n",
        "        return extra\n",
        ("tests/agent/test_v2_runtime.py::test_resume_replays_then_snapshots_then_answers",),
    ),
    Mutation(
        "v2-agent-requires-action",
        "v2: requires_action while a permission question is pending",
        "agent/_turn.py",
        '            await spans.set_state(self.session, "requires_action")\n',
        "            pass\n",
        (
            "tests/agent/test_v2_runtime.py::test_a_permission_makes_the_state_requires_action_and_a_cancel_withdraws_it",
        ),
    ),
    Mutation(
        "v2-agent-error-stop-reason",
        "v2: a handler that raises ends its span with stopReason error, never a JSON-RPC error",
        "agent/_spans.py",
        '                stop, error = "error", exc.to_error()\n',
        "                raise\n",
        (
            "tests/agent/test_v2_runtime.py::test_a_handler_that_raises_ends_its_span_with_error_not_a_json_rpc_error",
        ),
    ),
    Mutation(
        "negotiate-zero-gets-one",
        "initialize asking a version below every one spoken gets 1, never its own 0",
        "core/_profile.py",
        "    return PROFILES[max(below) if below else min(spoken)]\n",
        "    return PROFILES[max(below) if below else max(spoken)]\n",
        ("tests/agent/test_v2_runtime.py::test_version_negotiation",),
    ),
    Mutation(
        "v2-host-fallback-to-v1",
        "v2 host: auto falls back to v1 after a -32022 naming 1",
        "driver/_agent.py",
        "            response = await self._ask_initialize(self._initialize_params(spoken[-1], both=False), timeout)\n",
        "            raise AgentStartError(str(exc)) from exc\n",
        ("tests/driver/test_v2_host.py::test_an_agent_refusing_the_version_with_its_list_is_asked_again",),
    ),
    Mutation(
        "v2-host-held-prompt-is-not-ended-by-an-earlier-idle",
        "v2 host: an idle ends only the turns inserted (and worked) before it",
        "core/_spans.py",
        "            if key in self._worked\n",
        "            if True\n",
        (
            "tests/core/test_spans.py",
            "tests/driver/test_v2_host.py::test_held_prompts_are_turns_of_their_own_in_order",
        ),
    ),
    Mutation(
        "v2-host-resume-snapshot-not-a-completion",
        "v2 host: a resume's idle snapshot never ends a turn",
        "core/_spans.py",
        "        if self.resuming:\n            return  # an idle snapshot",
        "        if False:\n            return  # an idle snapshot",
        ("tests/core/test_spans.py::test_while_resuming_state_updates_are_snapshots",),
    ),
    Mutation(
        "v2-host-withdraw-held",
        "v2 host: cancelling a held prompt withdraws it ($/cancel_request), no session/cancel",
        "driver/_prompt_turn.py",
        "                self.prompt_answer.cancel()  # $/cancel_request: the prompt is withdrawn\n",
        "                pass\n",
        (
            "tests/driver/test_v2_host.py::test_cancelling_a_held_prompt_withdraws_it_and_touches_nothing_else",
        ),
    ),
    Mutation(
        "v2-host-agent-gone-ends-the-turn",
        "v2 host: an agent gone mid-span ends its turns (the prompt was answered at insertion)",
        "driver/_agent.py",
        "                turn.gone(self.peer.error(reason))\n",
        "                pass\n",
        ("tests/driver/test_v2_host.py::test_an_agent_gone_mid_span_resolves_the_turn",),
    ),
    Mutation(
        "v2-host-withdrawn-permission-cancelled-outcome",
        "v2 host: a permission the agent withdraws is answered with the cancelled outcome",
        "driver/_routing.py",
        '            if session.spans is not None and withdrawn:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n',
        "",
        ("tests/driver/test_v2_host.py",),
    ),
    Mutation(
        "serve-v2-working-session-is-live",
        "serve: a v2 session whose state says work runs is cancelled when the connection ends",
        "remote/_relay_ledger.py",
        "            self.working.add(sid)\n",
        "            pass\n",
        ("tests/remote/test_serve_v2.py",),
    ),
    Mutation(
        "v2-host-tool-call-cancel-only-where-advertised",
        "v2 (CancelToolCallRequest): clients MUST NOT send tool_call/cancel unless the tool call advertises it",
        "driver/_session.py",
        "        if not self.cancellable.get(entity_id):\n",
        "        if False:\n",
        ("tests/driver/test_v2_host.py::test_a_tool_call_advertising_cancel_is_cancelled_alone",),
    ),
    Mutation(
        "client-token-from-the-environment",
        "the CLI sends $ACP_DRIVER_AGENT_TOKEN as a bearer token to a remote agent",
        "cli/_remote_options.py",
        '        headers["Authorization"] = f"Bearer {token.strip()}"\n',
        "        pass\n",
        (
            "tests/remote/test_serve_security.py::test_a_client_gives_its_token_from_the_environment_not_the_command_line",
        ),
    ),
    Mutation(
        "v2-resume-replay-of-a-held-session",
        "v2 agent runtime: a resume of a session it holds gives the agent that resume's params "
        "(its replayFrom: the history is replayed before the snapshot)",
        "agent/_spans.py",
        "                session.params = params  # what the agent reads: replayFrom, the roots\n",
        "                pass\n",
        (
            "tests/agent/test_runtime_v2.py::test_resume_of_a_held_session_replays_then_snapshots_then_answers",
        ),
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
            [
                sys.executable,
                "-m",
                "pytest",
                "-n",
                "0",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                *mutation.tests,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        path.write_text(original)
    # Only a test failure counts (exit status 1): a collection or usage error (2-5) would call a
    # mutation caught that no test ever ran against. One process (-n 0): under xdist, -x turns a
    # failure into exit status 2 (interrupted).
    if proc.returncode not in (0, 1):
        print(f"  ?? {mutation.name}: pytest exited {proc.returncode} (not a test failure)")
        print(proc.stdout[-2000:], proc.stderr[-2000:])
    return proc.returncode == 1


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
