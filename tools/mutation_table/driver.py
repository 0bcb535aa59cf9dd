"""Mutations of the host driver (v1): turns, fences, permissions, the ladder's rungs."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "host-permission-cancelled-on-cancel",
        "spec MUST (prompt-turn.mdx): the client answers pending permission requests cancelled",
        "driver/_routing.py",
        '            if request.cancelled_by_turn:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n            if session.life',
        "            if session.life",
        ("tests/driver/test_reference_behaviors.py::test_cancel_answers_pending_permission",),
    ),
    Mutation(
        "host-permission-cancel-wins-over-a-withdrawal-read-first",
        "spec MUST: a permission pending at our cancel is answered cancelled, even when the agent's "
        "withdrawal is read before the dialog unwinds (uvloop, a fast agent)",
        "driver/_routing.py",
        '            if request.cancelled_by_turn:\n                return {"outcome"',
        "            if request.cancelled_by_turn and not (ctx and ctx.cancel_requested):\n"
        '                return {"outcome"',
        (
            "tests/driver/test_reference_behaviors.py"
            "::test_a_withdrawal_read_while_the_cancel_unwinds_still_gets_cancelled",
        ),
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
        "fence-answered-prompt",
        "an update after its turn's prompt was answered is late, never the turn's",
        "driver/_prompt_turn.py",
        "        self.session.life.sent(self, answer.done)\n",
        "        self.session.life.sent(self, lambda: False)\n",
        ("tests/driver/test_faults.py::test_update_in_the_same_read_as_an_error_answer_is_late",),
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
        "otel-trace-context-in-meta",
        "OpenTelemetry: the turn's trace context goes to the agent in the prompt's _meta",
        "driver/_prompt_turn.py",
        '            params["_meta"] = meta  # W3C trace context (spec: extensibility.mdx, _meta)\n',
        "            pass\n",
        ("tests/trace/test_otel.py::test_both_sides_of_a_cancelled_turn_in_one_trace",),
    ),
    Mutation(
        "permission-policy-swallowing-the-cancel",
        "spec MUST (prompt-turn.mdx): a pending permission is answered cancelled even when the policy swallows the cancel",
        "driver/_routing.py",
        "        if request.cancelled_by_turn:  # a policy that swallowed the cancel and answered anyway\n"
        '            return {"outcome": dict(CANCELLED_OUTCOME)}\n        return {"outcome": validate_outcome(outcome, request)}\n',
        '        return {"outcome": validate_outcome(outcome, request)}\n',
        (
            "tests/driver/test_reference_behaviors.py::test_a_policy_that_swallows_the_cancel_still_answers_cancelled",
        ),
    ),
    Mutation(
        "update-kind-no-string-delivered",
        "an update whose discriminator is no string is of no known kind: kept, and its run goes on",
        "driver/_session.py",
        '            if type(kind) is not str:\n                kind = "unknown"  # a discriminator that is no string: an update of no known kind\n',
        "",
        (
            "tests/driver/test_hostile_output.py::test_an_update_whose_kind_is_no_string_is_kept_and_the_run_goes_on",
        ),
    ),
    Mutation(
        "update-kind-no-string-viewed",
        "the view of an update whose discriminator is no string is an UnknownUpdate (never a TypeError)",
        "driver/_updates.py",
        "        cls = UPDATE_TYPES.get(kind, UnknownUpdate) if type(kind) is str else UnknownUpdate\n",
        "        cls = UPDATE_TYPES.get(kind, UnknownUpdate)\n",
        (
            "tests/driver/test_hostile_output.py::test_an_update_whose_kind_is_no_string_is_kept_and_the_run_goes_on",
        ),
    ),
    Mutation(
        "unknown-update-kind-is-the-sessions",
        "an update of a kind the version does not know is kept as the session's, never late",
        "driver/_session.py",
        "            if kind in turn_kinds:\n",
        '            if kind in turn_kinds or update.kind == "unknown":\n',
        ("tests/driver/test_faults.py::test_updates_after_the_response_are_late",),
    ),
    Mutation(
        "host-close-marks-the-hosts-cancel",
        "host: the turns a session.close() cancels were cancelled by the host (cancelled_by), not the agent",
        "driver/_session.py",
        "                turn.closed_by_host()\n",
        "                pass\n",
        ("tests/driver/test_v2_host.py::test_a_turn_ended_by_the_hosts_close_was_cancelled_by_the_host",),
    ),
    Mutation(
        "cancel-agent-shutdown-on-the-ladders-schedule",
        "cancel('agent'): the shutdown keeps to the ladder's schedule from the cancel (SIGTERM at 3/4, SIGKILL at the budget)",
        "driver/_agent.py",
        "        await self.shutdown(\n            max(0.0, terminate_at - spent), term_grace=max(0.0, policy.budget - max(spent, terminate_at))\n        )\n",
        "        await self.shutdown()\n",
        (
            "tests/driver/test_ladder_fake_time.py::test_cancel_agent_shuts_an_idle_agent_down_on_the_ladders_schedule",
        ),
    ),
    Mutation(
        "shutdown-grace-on-the-clock",
        "shutdown: the wait for the agent's own exit runs on the agent's clock",
        "driver/_process_peer.py",
        "                async with timeout_on(self.process.clock, grace):\n",
        "                async with timeout_on(None, grace):\n",
        (
            "tests/driver/test_ladder_fake_time.py::test_cancel_agent_shuts_an_idle_agent_down_on_the_ladders_schedule",
        ),
    ),
    Mutation(
        "agent-process-on-the-agents-clock",
        "a launched agent's SIGTERM -> SIGKILL graces (reap) run on the agent's clock",
        "driver/_process_peer.py",
        "        self.process.clock = agent.clock  # its SIGTERM -> SIGKILL graces run on the agent's clock\n",
        "",
        (
            "tests/driver/test_ladder_fake_time.py::test_cancel_agent_shuts_an_idle_agent_down_on_the_ladders_schedule",
        ),
    ),
]
