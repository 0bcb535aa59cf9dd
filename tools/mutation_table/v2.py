"""Mutations of ACP v2 in both roles: spans, held prompts, idle cancelled, resume, close."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "v2-spans-forget-their-turns",
        "v2 host: a forgotten turn is held by no id table (a long session keeps no ended turn alive)",
        "core/_lifecycle.py",
        "        for table, ident in self._ids_of.pop(key, ()):\n            table[ident] = None  # seen, of a turn that ended (and no turn is held by the table)\n",
        "",
        (
            "tests/core/test_lifecycle.py::test_a_forgotten_turn_is_held_nowhere_and_its_late_updates_stay_the_sessions",
            "tests/driver/test_garbage.py::test_an_ended_turn_is_freed_once_the_next_one_ends",
        ),
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
        "v2-host-fallback-to-v1",
        "v2 host: auto falls back to v1 after a -32022 naming 1",
        "core/_negotiation.py",
        '    if wanted != "auto" or code != refusal_code or not isinstance(supported, list):\n',
        "    if True:\n",
        (
            "tests/driver/test_v2_host.py::test_an_agent_refusing_the_version_with_its_list_is_asked_again",
            "tests/cli/test_check_v2.py::test_auto_audits_a_v1_agent_by_the_v1_rules",
        ),
    ),
    Mutation(
        "v2-host-held-prompt-is-not-ended-by-an-earlier-idle",
        "v2 host: an idle ends only the turns inserted (and worked) before it",
        "core/_lifecycle.py",
        "            if key in self._worked\n",
        "            if True\n",
        (
            "tests/core/test_lifecycle.py",
            "tests/driver/test_v2_host.py::test_held_prompts_are_turns_of_their_own_in_order",
        ),
    ),
    Mutation(
        "v2-host-resume-snapshot-not-a-completion",
        "v2 host: a resume's idle snapshot never ends a turn",
        "core/_lifecycle.py",
        "        if self.resuming:\n            return  # an idle snapshot",
        "        if False:\n            return  # an idle snapshot",
        ("tests/core/test_lifecycle.py::test_while_resuming_state_updates_are_snapshots",),
    ),
    Mutation(
        "v2-host-withdraw-held",
        "v2 host: cancelling a held prompt withdraws it ($/cancel_request), no session/cancel",
        "core/_profile.py",
        "            Rung.WITHDRAW: (Action.CANCEL_REQUEST,),\n            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),\n            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),\n            Rung.TERMINATE: (Action.TERMINATE,),\n            Rung.KILL: (Action.KILL,),\n        }\n    ),\n    shapes=V2_SHAPES,",
        "            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),\n            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),\n            Rung.TERMINATE: (Action.TERMINATE,),\n            Rung.KILL: (Action.KILL,),\n        }\n    ),\n    shapes=V2_SHAPES,",
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
        '            if session.life.profile.withdrawn_question_cancelled and ctx is not None and ctx.cancel_requested:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n',
        "",
        ("tests/driver/test_v2_host.py",),
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
        "v2-resume-replay-of-a-held-session",
        "v2 agent runtime: a resume of a session it holds gives the agent that resume's params "
        "(its replayFrom: the history is replayed before the snapshot)",
        "agent/_spans.py",
        "                session.params = params  # what the agent reads: replayFrom, the roots\n",
        "                pass\n",
        ("tests/agent/test_v2_runtime.py::test_resume_replays_then_snapshots_then_answers",),
    ),
    Mutation(
        "v2-host-withdrawal-waits-for-the-answer",
        "v2 host: a held prompt's withdrawal waits for the agent's answer (an agent may ignore it and insert the prompt)",
        "driver/_prompt_turn.py",
        "            life.withdraw(self)\n            self._observe(_WITHDRAW)\n",
        "            self.prompt_answer.cancel() if self.prompt_answer is not None else None\n",
        (
            "tests/driver/test_v2_host.py::test_a_held_prompt_the_agent_will_not_withdraw_is_cancelled_once_inserted",
        ),
    ),
    Mutation(
        "v2-host-withdrawn-prompt-inserted-is-cancelled",
        "v2 host: a prompt inserted although the host withdrew it is cancelled at once (session/cancel)",
        "core/_lifecycle.py",
        "    (PromptState.WITHDRAWING, Event.INSERTED): (PromptState.CANCELLING, Decision.CANCEL_SPAN),\n",
        "    (PromptState.WITHDRAWING, Event.INSERTED): (PromptState.LIVE, Decision.INSERTED),\n",
        (
            "tests/driver/test_v2_host.py::test_a_held_prompt_the_agent_will_not_withdraw_is_cancelled_once_inserted",
        ),
    ),
    Mutation(
        "v2-host-collateral-prompts-sent-again",
        "v2 host: a cancel never touches a prompt sent after it (held prompts its session/cancel refused are sent again)",
        "core/_lifecycle.py",
        "                    self.prompts[other] = PromptState.COLLATERAL\n",
        "                    pass\n",
        (
            "tests/driver/test_v2_host.py::test_a_held_prompt_the_agent_will_not_withdraw_is_cancelled_once_inserted",
        ),
    ),
    Mutation(
        "host-v2-config-value-type",
        "v2 host: session/set_config_option carries the value's type (the schema requires it)",
        "driver/_session.py",
        '            params["type"] = "boolean" if isinstance(value, bool) else "id"\n',
        "            pass\n",
        (
            "tests/cli/test_run_reports.py::test_run_mode_in_v2_sets_the_mode_config_option_as_the_schema_types_it",
        ),
    ),
    Mutation(
        "negotiation-shape-over-echo",
        "auto: an agent that echoes 2 in v1's shape (agentCapabilities/agentInfo) speaks v1",
        "core/_negotiation.py",
        "        profile, note = V1, ECHO_NOTE\n",
        "        note = ECHO_NOTE\n",
        ("tests/driver/test_v2_host.py::test_auto_speaks_v1_with_an_agent_that_echoes_2_in_v1s_shape",),
    ),
    Mutation(
        "negotiation-auto-sends-v1-client-capabilities",
        "auto: initialize carries v1's clientCapabilities (fs, terminal) too, for a v1 agent to read",
        "core/_negotiation.py",
        "    for profile in PROFILES.values() if both else (PROFILES[version],):\n",
        "    for profile in (PROFILES[version],):\n",
        ("tests/driver/test_v2_host.py::test_auto_speaks_v1_with_an_agent_that_echoes_2_in_v1s_shape",),
    ),
    Mutation(
        "v2-host-reused-message-id-is-the-working-turns",
        "v2 host: a message id of an ended turn means nothing: an agent reusing it streams the working turn",
        "core/_lifecycle.py",
        "            # Unseen, or of an ended turn (agents reuse message ids): the working turn's.\n",
        "            if message_id in self.message_of:\n                return None\n",
        (
            "tests/core/test_lifecycle.py::test_a_forgotten_turn_is_held_nowhere_and_its_late_updates_stay_the_sessions",
            "tests/cli/test_cli.py::test_chat_v2_shows_every_turn_when_the_agent_reuses_one_message_id",
        ),
    ),
    Mutation(
        "v2-host-answer-in-wire-order",
        "v2 host: a prompt's answer is handled as it is read, before the lines that came with it",
        "driver/_prompt_turn.py",
        "on_sent=self._sent, on_result=self._answered",
        "on_sent=self._sent",
        (
            "tests/driver/test_v2_host.py::test_an_answer_and_the_lines_that_came_with_it_are_handled_in_wire_order",
        ),
    ),
    Mutation(
        "v2-host-malformed-answer-is-an-error",
        "v2 host: a prompt answered without a string messageId fails the turn with a protocol error",
        "core/_lifecycle.py",
        '            why = f"session/prompt answered without a messageId (v2): {answer!r:.200}"\n            return [Decided(Decision.REFUSED, key, error=why)]\n',
        "            return []\n",
        ("tests/driver/test_v2_host.py::test_a_malformed_prompt_answer_is_a_clear_protocol_error",),
    ),
    Mutation(
        "v2-host-held-withdrawal-resolves-at-the-budget",
        "v2 host: a held prompt's withdrawal unconfirmed within the budget resolves the turn then",
        "core/_host_turn.py",
        "        self._give_up_at = now + self.policy.budget\n",
        "        self._give_up_at = now + self.policy.budget * 50\n",
        (
            "tests/driver/test_v2_host.py::test_a_held_prompt_whose_withdrawal_is_never_confirmed_resolves_at_the_budget",
        ),
    ),
    Mutation(
        "v2-host-wedged-prompt-climbs-the-ladder",
        "v2 host: a prompt nothing runs ahead of, never answered, is cancelled by the full ladder",
        "core/_lifecycle.py",
        "        if state in _HELD_STATES and (self.live or self.busy):\n",
        "        if state in _HELD_STATES:\n",
        (
            "tests/driver/test_v2_host.py::test_a_prompt_nothing_runs_ahead_of_and_the_agent_never_answers_climbs_the_ladder",
        ),
    ),
    Mutation(
        "v2-host-withdrawal-confirmed-is-the-hosts-cancel",
        "v2 host: the -32800 of a withdrawal the host asked for is the host's cancel, timed from cancel()",
        "driver/_prompt_turn.py",
        "            life.withdraw(self)\n            self._observe(_WITHDRAW)\n            return\n",
        "            life.withdraw(self)\n            self.agent.connection.cancel_request(self.request_id)\n            return\n",
        (
            "tests/driver/test_v2_host.py::test_cancelling_a_held_prompt_withdraws_it_and_touches_nothing_else",
        ),
    ),
    Mutation(
        "v2-host-speaks-v1-when-answered-the-v1-way",
        "negotiation: a v2 prompt answered with a stop reason and no messageId means the agent speaks v1",
        "core/_lifecycle.py",
        "        if answers_like_v1(self.profile, answer):\n",
        "        if False:\n",
        (
            "tests/driver/test_v2_host.py::test_an_agent_that_answers_a_v2_prompt_the_v1_way_is_spoken_to_in_v1",
        ),
    ),
    Mutation(
        "v2-host-error-stop-reason-is-an-error",
        "v2: an idle with stop reason error resolves the turn ERROR (run exits 4, as v1)",
        "core/_profile.py",
        '    error_stop_reasons=frozenset({"error"}),\n',
        "    error_stop_reasons=frozenset(),\n",
        ("tests/cli/test_cli.py::test_agent_error_exits_4_in_v2_too",),
    ),
    Mutation(
        "v2-host-question-withdrawn-before-the-policy",
        "v2 host: a permission request withdrawn before the policy ran is answered with the cancelled outcome",
        "driver/_routing.py",
        '            if session.life.profile.withdrawn_question_cancelled:\n                return {"outcome": dict(CANCELLED_OUTCOME)}\n            raise RequestCancelledError',
        "            raise RequestCancelledError",
        (
            "tests/driver/test_v2_host.py::test_a_question_withdrawn_before_the_policy_ran_is_answered_by_the_versions_rule",
        ),
    ),
    Mutation(
        "v2-agent-params-by-v2s-schema",
        "v2 agent: a client's params are judged by v2's schema (session/new needs only cwd), not v1's",
        "agent/_params.py",
        "    required = profile.requirements.methods.get(method)\n",
        '    required = __import__("acp_driver.core", fromlist=["V1"]).V1.requirements.methods.get(method)\n',
        (
            "tests/agent/test_v2_runtime.py::test_a_v2_session_needs_only_a_cwd",
            "tests/agent/test_v2_runtime.py::test_v2_params_are_checked_against_v2s_schema",
        ),
    ),
    Mutation(
        "agent-prompt-block-members",
        "agent: a prompt content block without the members its type requires (a number as text) is -32602, never a crash",
        "agent/_params.py",
        '                problem = _members_problem(f"{method}: prompt[{i}] ({kind})", block, members)\n',
        "                problem = None\n",
        (
            "tests/agent/test_v2_runtime.py::test_v2_params_are_checked_against_v2s_schema",
            "tests/agent/test_runtime.py::test_params_without_the_required_shape_are_invalid_params",
            "tests/agent/test_params_property.py::test_any_prompt_blocks_get_an_answer_never_an_internal_error",
        ),
    ),
    Mutation(
        "v2-agent-withdrawn-released-prompt-releases-the-next",
        "v2 agent: a held prompt withdrawn in the iteration that released it releases the next held one (never strands it)",
        "agent/_spans.py",
        "                    session.held.remove(entry)\n"
        "                # Also when its gate was opened already (the cancel was read in the iteration that\n"
        "                # released it): it was next, so the one after it is now.\n"
        "                self._release_next(session)\n",
        "                    session.held.remove(entry)\n                    self._release_next(session)\n",
        (
            "tests/agent/test_v2_in_process.py::test_a_withdrawal_read_as_its_prompt_is_released_does_not_strand_the_next",
        ),
    ),
    Mutation(
        "v2-agent-swallowed-cancel-idle-at-cancel-timeout",
        "v2 agent: a handler that swallows its cancel still gets the idle cancelled at cancel_timeout (on the runtime's clock)",
        "agent/_spans.py",
        "            if not task.done() and not await wait_on(runtime.clock, (task,), runtime.cancel_timeout):\n",
        "            if not task.done() and not await wait_on(runtime.clock, (task,), runtime.cancel_timeout * 50):\n",
        (
            "tests/agent/test_v2_in_process.py::test_a_swallowed_cancel_still_ends_the_span_cancelled_at_cancel_timeout",
        ),
    ),
    Mutation(
        "v2-agent-running-again-after-permission",
        "v2 agent: running is reported again once a permission question is answered",
        "agent/_turn.py",
        '                    await spans.set_state(self.session, "running")\n',
        "                    pass\n",
        ("tests/agent/test_v2_runtime.py::test_running_is_reported_again_once_a_permission_is_answered",),
    ),
    Mutation(
        "v2-agent-nothing-after-close-session-updates",
        "v2 agent (CloseSessionRequest): nothing of a session is sent after session/close's answer (its session updates)",
        "agent/_turn.py",
        '        if self.closed:\n            raise TurnEndedError(f"session {self.id} is closed; update not sent")\n',
        "",
        ("tests/agent/test_v2_in_process.py::test_nothing_of_a_session_is_sent_after_its_close_is_answered",),
    ),
    Mutation(
        "v2-agent-close-marks-the-session-closed",
        "v2 agent (CloseSessionRequest): session/close marks the session closed before its answer (nothing of it after)",
        "agent/_spans.py",
        "        session.closed = True\n",
        "        pass\n",
        ("tests/agent/test_v2_in_process.py::test_nothing_of_a_session_is_sent_after_its_close_is_answered",),
    ),
    Mutation(
        "v2-agent-idle-to-a-closed-connection",
        "v2 agent: a span ending after its client left ends quietly (no task error left behind)",
        "agent/_spans.py",
        "        except ConnectionClosedError:  # the client is gone: no one to tell (and no task error left)\n"
        '            logger.debug("connection closed before the idle of %s", session.id)\n',
        "",
        ("tests/agent/test_v2_in_process.py::test_a_span_ending_after_its_client_left_leaves_no_task_error",),
    ),
]
