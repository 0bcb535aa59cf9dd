"""Mutations of the reference agent, the trace, services and the benchmarks' self-checks."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "reference-sleep-invalid-params",
        "reference agent: _acp_driver/sleep with a non-number ms is -32602, not -32603",
        "reference_agent.py",
        "    if type(ms) not in (int, float) or not 0 <= ms < 86_400_000:  # bool and NaN are not ms\n",
        "    if False:\n",
        ("tests/agent/test_odd_text.py::test_sleep_with_a_bad_ms_is_invalid_params",),
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
        "    return html.escape(_visible(str(text)), quote=True)\n",
        "    return _visible(str(text))\n",
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
        "trace-page-bidi-shown",
        "timeline page: bidirectional overrides and invisible format characters are shown, never obeyed",
        "trace/_html.py",
        '    return _INVISIBLE.sub(lambda m: f"\\\\u{ord(m.group()):04x}", text)\n',
        "    return text\n",
        ("tests/trace/test_hostile_page.py::test_no_script_of_it_runs_and_every_field_shows_it_as_text",),
    ),
    Mutation(
        "trace-summary-lines-safe",
        "trace summary: every line is safe for a terminal, whichever field the agent's text came through",
        "trace/_summary.py",
        '    return "\\n".join(_safe(line) for line in lines) + "\\n"\n',
        '    return "\\n".join(lines) + "\\n"\n',
        ("tests/trace/test_hostile_page.py::test_the_summary_and_the_export_keep_it_as_data",),
    ),
    Mutation(
        "trace-page-no-due-after-end",
        "timeline page: no rung is drawn as due after its turn was over",
        "trace/_html.py",
        "                if due is not None and offset > 0 and due <= finish:  # none after the turn was over\n",
        "                if due is not None and offset > 0:\n",
        (
            "tests/trace/test_lifecycle.py::test_the_page_brackets_each_cancel_and_draws_no_due_line_after_the_turn_was_over",
        ),
    ),
    Mutation(
        "trace-page-markers-stack",
        "timeline page: markers of one moment stack instead of covering each other",
        "trace/_html.py",
        "            step: float = 11 * lane.level(self.x(moment.t))\n",
        "            step: float = 0\n",
        (
            "tests/trace/test_timeline_browser.py::test_markers_at_the_same_moment_stack_and_the_legend_shows_each_shape",
        ),
    ),
    Mutation(
        "trace-v2-permission-title",
        "trace reader: a v2 permission request is named by its own title",
        "trace/_model.py",
        '                title = params.get("title")\n',
        "                title = None\n",
        ("tests/trace/test_lifecycle.py::test_a_v2_permission_request_is_named_by_its_title",),
    ),
    Mutation(
        "otel-v2-agent-turn-to-idle",
        "OpenTelemetry: a v2 agent's turn span ends at the idle, not at the prompt's insertion",
        "trace/_otel.py",
        "        if self._profile.answer_ends_turn or not isinstance(result, dict):\n",
        "        if True:\n",
        ("tests/trace/test_otel.py::test_both_sides_of_a_cancelled_turn_in_one_trace",),
    ),
    Mutation(
        "otel-cancel-duration-recorded",
        "OpenTelemetry: each cancelled turn's cancel-to-resolution time is recorded in the histogram",
        "trace/_otel.py",
        "            self._cancel_duration.record(max(0.0, self._clock() - turn.cancelled_at), attributes)\n",
        "            pass\n",
        (
            "tests/trace/test_otel.py::test_a_run_is_one_trace_whose_turns_follow_the_genai_agent_conventions",
            "tests/trace/test_otel.py::test_both_sides_of_a_cancelled_turn_in_one_trace",
        ),
    ),
    Mutation(
        "trace-late-tool-call",
        "trace reader: an update of an earlier turn's tool call is late, as the driver says",
        "core/_lifecycle.py",
        "            elif owner != turn:\n                return None  # a tool call of the finished turn the running one never announced\n",
        "",
        (
            "tests/trace/test_lifecycle.py::test_updates_after_the_answer_are_late_on_the_turn_they_came_after",
        ),
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
        "bench-v2-cancel-confirmed-acp",
        "benchmarks: acp-driver's v2 cancel row counts a cancel only when the idle says cancelled",
        "../../benchmarks/runners/acp_driver_host_v2.py",
        '            cancelled += (\n                result.stop_reason == "cancelled"\n'
        "                and outcome.resolution is Resolution.CANCELLED\n"
        '                and outcome.resolved_by == "session_cancel"\n            )\n',
        "            cancelled += 1\n",
        ("tests/test_benchmarks_smoke.py::test_a_v2_cancel_counts_only_when_the_idle_says_cancelled",),
    ),
    Mutation(
        "bench-v2-cancel-confirmed-ceiling",
        "benchmarks: the ceiling's v2 cancel row counts a cancel only when the idle says cancelled",
        "../../benchmarks/runners/ceiling_host_v2.py",
        '            cancelled += stop_reason == "cancelled"\n',
        "            cancelled += 1\n",
        ("tests/test_benchmarks_smoke.py::test_a_v2_cancel_counts_only_when_the_idle_says_cancelled",),
    ),
    Mutation(
        "bench-v2-stream-counts-chunks-acp",
        "benchmarks: acp-driver's v2 stream row counts the agent_message_chunk updates the app saw",
        "../../benchmarks/runners/acp_driver_host_v2.py",
        '            chunks += update.kind == "agent_message_chunk"\n',
        "            chunks += 0\n",
        ("tests/test_benchmarks_smoke.py::test_every_column_does_the_same_work",),
    ),
    Mutation(
        "bench-v2-stream-counts-chunks-ceiling",
        "benchmarks: the ceiling's v2 stream row counts the agent_message_chunk updates it read",
        "../../benchmarks/runners/ceiling_host_v2.py",
        "            self.chunks += 1\n",
        "",
        ("tests/test_benchmarks_smoke.py::test_every_column_does_the_same_work",),
    ),
    Mutation(
        "bench-v2-stream-end-turn",
        "benchmarks: the v2 stream row is a number only when its turn idled with end_turn",
        "../../benchmarks/runners/acp_driver_host_v2.py",
        '        assert result.stop_reason == "end_turn", result\n',
        "",
        ("tests/test_benchmarks_smoke.py::test_a_v2_stream_must_end_in_an_idle_end_turn",),
    ),
    Mutation(
        "terminal-kill-grace",
        "terminal/kill: a command that ignores SIGTERM is SIGKILLed at kill_grace (the time asserted, not only the outcome)",
        "services/_terminal.py",
        "        await self.process.reap(term_timeout=kill_grace)\n",
        "        await self.process.reap(term_timeout=kill_grace * 50)\n",
        (
            "tests/services/test_terminals.py::test_a_command_ignoring_sigterm_is_sigkilled_at_kill_grace_on_the_clock",
        ),
    ),
    Mutation(
        "terminal-kill-grace-on-the-clock",
        "terminals: the SIGTERM -> SIGKILL grace runs on the service's injected clock",
        "services/_terminal.py",
        "        process.clock = clock\n",
        "",
        (
            "tests/services/test_terminals.py::test_a_command_ignoring_sigterm_is_sigkilled_at_kill_grace_on_the_clock",
        ),
    ),
    Mutation(
        "reap-grace-on-the-clock",
        "ProcessGroup.reap: SIGKILL after term_timeout measured on the process's clock",
        "aio/_process.py",
        "                    async with timeout_on(self.clock, term_timeout):\n",
        "                    async with timeout_on(None, term_timeout):\n",
        (
            "tests/services/test_terminals.py::test_a_command_ignoring_sigterm_is_sigkilled_at_kill_grace_on_the_clock",
        ),
    ),
    Mutation(
        "package-logger-null-handler",
        "the package logger has a NullHandler: a library never prints through logging's last resort",
        "_log.py",
        "    PACKAGE_LOGGER.addHandler(logging.NullHandler())\n",
        "    pass\n",
        ("tests/test_logging_quiet.py::test_a_warning_prints_nothing_without_logging_configured",),
    ),
]
