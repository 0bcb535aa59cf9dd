"""Mutations of ``acp-driver proxy``: the guarantees its guard adds to serve's relay."""

from __future__ import annotations

from ._base import Mutation

CANCEL = "tests/proxy/test_proxy_cancel.py"
GUARANTEES = "tests/proxy/test_proxy_guarantees.py"

MUTATIONS = [
    Mutation(
        "proxy-channel-end-before-start-reported",
        "proxy: a channel backend (conductor, remote agent) whose channel ended before start reports it at start",
        "proxy/_channel.py",
        "        if self._ended.is_set():\n            gone()\n",
        "",
        ("tests/proxy/test_channel_backend.py",),
    ),
    Mutation(
        "proxy-editor-cancel-starts-the-ladder",
        "proxy: the editor's session/cancel starts the ladder (an agent that ignores it is escalated)",
        "proxy/_guard.py",
        '            self._cancel(sid, forwarded=True, why="the editor cancelled")\n',
        "            pass\n",
        (f"{CANCEL}::test_the_editors_cancel_lands_within_the_budget[v1-ignore-cancel]",),
    ),
    Mutation(
        "proxy-v1-end-turn-after-cancel-is-cancelled",
        "proxy: a v1 turn the agent ends end_turn after the cancel ends cancelled for the editor",
        "core/_endings.py",
        '            return Observation(Seen.ANSWERED, stop_reason=reason), {**message, "result": fixed}\n',
        "            return Observation(Seen.ANSWERED, stop_reason=reason), None\n",
        (f"{CANCEL}::test_the_editors_cancel_lands_within_the_budget[v1-end-turn-on-cancel]",),
    ),
    Mutation(
        "proxy-v1-error-after-cancel-is-cancelled",
        "proxy: a v1 turn the agent ends with an error after the cancel ends cancelled for the editor",
        "core/_endings.py",
        '        return observation, {"jsonrpc": "2.0", "id": message.get("id"), "result": {"stopReason": "cancelled"}}\n',
        "        return observation, None\n",
        (f"{CANCEL}::test_the_editors_cancel_lands_within_the_budget[v1-error-on-cancel]",),
    ),
    Mutation(
        "proxy-v2-idle-after-cancel-is-cancelled",
        "proxy: a v2 idle with another stop reason after the cancel reaches the editor as cancelled",
        "core/_endings.py",
        '            "params": {**params, "update": fixed},\n',
        '            "params": params,\n',
        (f"{CANCEL}::test_the_editors_cancel_lands_within_the_budget[v2-end-turn-on-cancel]",),
    ),
    Mutation(
        "proxy-withdrawn-request-answered",
        "proxy: a request the editor withdrew and the agent does not answer is answered -32800 after the grace",
        "proxy/_guard.py",
        "        self._answer_editor(\n"
        '            key, rpc_error(request.id, -32800, "request cancelled (the agent did not answer)")\n'
        "        )\n",
        "        pass\n",
        (f"{GUARANTEES}::test_a_request_the_editor_withdrew_is_answered_once_when_the_agent_does_not",),
    ),
    Mutation(
        "proxy-late-answer-dropped",
        "proxy: the agent's late answer to a request answered by the proxy is dropped (one answer)",
        "proxy/_guard.py",
        "        if key in self._answered_editor:\n            self._answered_editor.discard(key)\n",
        "        if False:\n            self._answered_editor.discard(key)\n",
        (f"{GUARANTEES}::test_a_request_the_editor_withdrew_is_answered_once_when_the_agent_does_not",),
    ),
    Mutation(
        "proxy-permission-closed-after-grace",
        "proxy: a permission request still open a grace after the editor's cancel is answered cancelled",
        "proxy/_guard.py",
        '                self._answer_agent(key, request, "the turn was cancelled")\n',
        "                pass\n",
        (f"{GUARANTEES}::test_a_permission_left_open_after_the_editors_cancel_is_closed_both_ways",),
    ),
    Mutation(
        "proxy-editors-late-answer-dropped",
        "proxy: the editor's late answer to a request the proxy answered for it never reaches the agent",
        "proxy/_guard.py",
        "            if key is not None and key in self._answered_agent:\n",
        "            if False:\n",
        (f"{GUARANTEES}::test_a_permission_left_open_after_the_editors_cancel_is_closed_both_ways",),
    ),
    Mutation(
        "proxy-late-output-fenced",
        "proxy: a cancelled turn's updates after its end do not reach the editor",
        "proxy/_guard.py",
        "        if sid in self._fenced and kind in self.profile.turn_updates:\n",
        "        if False:\n",
        (f"{GUARANTEES}::test_a_cancelled_turns_late_output_is_fenced_and_session_updates_pass",),
    ),
    Mutation(
        "proxy-silence-cancels",
        "proxy: --silence-timeout cancels a turn from which nothing came",
        "proxy/_guard.py",
        '                self._cancel(sid, forwarded=False, why=f"silent for {timeout:g} s")\n',
        "                pass\n",
        (f"{GUARANTEES}::test_a_silent_turn_is_cancelled_after_the_silence_timeout",),
    ),
    Mutation(
        "proxy-agent-gone-answers-the-editor",
        "proxy: when the agent is gone, every request the editor still waits for is answered",
        "proxy/_guard.py",
        "            self._answer_editor(\n                key, self._gone_answer(request.id, request.method, request.session_id, reason)\n            )\n",
        "            pass\n",
        (f"{GUARANTEES}::test_when_the_agent_dies_every_open_request_is_answered_and_the_proxy_exits_1",),
    ),
    Mutation(
        "proxy-eof-reaps-the-agent",
        "proxy: the end of the editor's input ends the relay, which reaps the agent's whole tree",
        "proxy/_front.py",
        '        self._proxy.stop("the editor closed the connection")\n',
        "        pass\n",
        (
            "tests/proxy/test_proxy_no_orphans.py::test_the_editor_closing_its_input_mid_turn_reaps_the_whole_tree",
        ),
    ),
]
MUTATIONS += [
    Mutation(
        "proxy-respawn-resumes-sessions",
        "proxy: a restarted agent gets each open session re-opened under its id",
        "proxy/_front.py",
        "                guard.reopening.add(sid)\n",
        "                book.lose(sid, 'mutated')\n                continue\n",
        ("tests/proxy/test_proxy_respawn.py::test_a_killed_agent_is_restarted_and_the_session_goes_on",),
    ),
    Mutation(
        "proxy-lost-session-answered",
        "proxy: a request for a session the restarted agent could not re-open gets an error naming why",
        "proxy/_guard.py",
        "        if sid is not None and sid in self.book.lost:\n",
        "        if False:\n",
        (
            "tests/proxy/test_proxy_respawn.py::"
            "test_a_session_the_restarted_agent_cannot_reopen_is_lost_with_a_clear_error",
        ),
    ),
    Mutation(
        "proxy-respawn-bounded",
        "proxy: an agent that keeps dying is restarted at most --max-respawns times",
        "proxy/_front.py",
        "            if self.in_chain or self.respawns >= self.settings.max_respawns:\n",
        "            if self.in_chain:\n",
        (
            "tests/proxy/test_proxy_respawn.py::test_an_agent_that_keeps_dying_is_restarted_at_most_max_respawns_times",
            "tests/proxy/test_proxy_guarantees.py::test_when_the_agent_dies_every_open_request_is_answered_and_the_proxy_exits_1",
        ),
    ),
]
CHAIN = "tests/proxy/test_proxy_in_a_chain.py"
MUTATIONS += [
    Mutation(
        "proxy-chain-cancel-hop-by-hop",
        "proxy in a chain: a $/cancel_request for a successor request goes out plain, under our own id",
        "proxy/_conductor.py",
        "                self._write(encode_relayed(cancel))\n",
        "                pass\n",
        (CHAIN,),
    ),
    Mutation(
        "proxy-chain-initialize",
        "proxy in a chain: _proxy/initialize (and proxy/initialize) is relayed on as the successor's initialize",
        "proxy/_front.py",
        '                message["method"] = p.INITIALIZE  # the chain\'s initialize: ours to relay on\n',
        "                pass\n",
        (CHAIN,),
    ),
]
MUTATIONS += [
    Mutation(
        "proxy-remote-agent-lost-connection-ends-it",
        "proxy with a remote agent: a lost connection is the agent's end (answered, reconnected, resumed)",
        "proxy/_network.py",
        "    def feed_eof(self) -> None:\n        self._backend.ended()\n",
        "    def feed_eof(self) -> None:\n        pass\n",
        ("tests/proxy/test_proxy_remote_agent.py",),
    ),
    Mutation(
        "proxy-ladder-on-the-injected-clock",
        "proxy: the ladder behind the editor's cancel runs on the injected clock (its rungs asserted by time)",
        "proxy/_front.py",
        "            clock=self.settings.clock,\n",
        "",
        (
            "tests/proxy/test_proxy_fake_time.py::test_the_editors_cancel_is_answered_at_the_rung_that_ended_the_turn",
        ),
    ),
]
