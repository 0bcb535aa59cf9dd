"""Mutations of the asyncio connection: serving, requesting, deadlines, pipes, processes."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "resolved-runner-drops-hooks",
        "a resolved ladder runner drops its owner's hooks: an ended turn is freed without the collector",
        "aio/_ladder_runner.py",
        "            self.on_rung = self.on_resolved = None\n",
        "",
        ("tests/driver/test_garbage.py",),
    ),
    Mutation(
        "pipes-attached-before-reading",
        "a connection is attached before its pipe is read (uvloop reads during connect_read_pipe)",
        "aio/_ndjson.py",
        "    conn.attach(transport)\n    try:\n        if _pollable(read_pipe.fileno()):\n"
        "            rt = await connect_read_pipe(lambda: _ReadProtocol(transport), read_pipe)\n",
        "    try:\n        if _pollable(read_pipe.fileno()):\n"
        "            rt = await connect_read_pipe(lambda: _ReadProtocol(transport), read_pipe)\n"
        "            conn.attach(transport)\n",
        ("tests/driver/test_uvloop.py",),
    ),
    Mutation(
        "pipe-read-size-only-where-the-transport-has-it",
        "the pipe's read size is set only on a transport that has it (CPython's; not uvloop's)",
        "aio/_ndjson.py",
        '        if hasattr(rt, "max_size"):\n',
        "        if True:\n",
        ("tests/driver/test_uvloop.py",),
    ),
    Mutation(
        "pipe-connect-never-abandoned-half-way",
        "a cancelled connect_read_pipe still closes its pipe once, file object and descriptor (uvloop)",
        "aio/_stderr.py",
        "        transport, _ = await asyncio.shield(connecting)\n",
        "        transport, _ = await connecting\n",
        (
            "tests/driver/test_uvloop.py::test_a_pipe_connect_cancelled_half_way_closes_the_pipe",
            "tests/services/test_terminals.py::test_create_cancelled_midway_leaves_nothing",
        ),
    ),
    Mutation(
        "pipes-write-side-never-abandoned-half-way",
        "open_pipes takes its write pipe through the shielded connect (uvloop's cancelled one closes the fd only)",
        "aio/_ndjson.py",
        "        wt = await connect_write_pipe(lambda: _WriteProtocol(conn), write_pipe)\n",
        "        wt, _ = await asyncio.get_running_loop().connect_write_pipe(lambda: _WriteProtocol(conn), write_pipe)\n",
        ("tests/driver/test_uvloop.py::test_open_pipes_cancelled_half_way_leaves_nothing_open",),
    ),
    Mutation(
        "pipes-failed-read-side-ends-the-connection",
        "open_pipes whose read side fails closes the connection it attached (none left open, never reading)",
        "aio/_ndjson.py",
        "        transport.close()\n        conn.feed_eof()\n        raise\n",
        "        raise\n",
        ("tests/driver/test_uvloop.py::test_open_pipes_that_cannot_read_raises_and_leaves_nothing_open",),
    ),
    Mutation(
        "stdout-protected",
        "spec MUST (transports.mdx): nothing but ACP messages on the agent's stdout",
        "aio/_ndjson.py",
        "    if protect_stdout:\n        sys.stdout.flush()\n        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())\n",
        "",
        ("tests/agent/test_runtime.py::test_a_stray_print_never_reaches_the_wire",),
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
        "run-ends-before-answer",
        "a run of updates is handled before the message that ends it (the prompt's answer fences the turn)",
        "aio/_connection.py",
        "            if run is not None:\n                self._handle_run(run_method, run)  # before the message that ends the run\n                run = None\n            if type(event) is Response:\n",
        "            if type(event) is Response:\n",
        ("tests/aio", "tests/driver"),
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
    Mutation(
        "request-deadlines-on-the-injected-clock",
        "issue 23: request deadlines run on the connection's injected clock (testable on fake time)",
        "aio/_deadlines.py",
        "        if clock is not None:  # an injected clock (tests run it on fake time)\n",
        "        if False:\n",
        ("tests/aio/test_requests.py::test_deadlines_and_graces_run_on_an_injected_clock",),
    ),
    Mutation(
        "grace-timers-on-the-injected-clock",
        "issue 23: grace timers (a cancelled or timed-out request waiting for the answer) run on the injected clock",
        "aio/_requesting.py",
        "        if clock is not None:\n            return clock.call_at(clock.now() + delay, callback)\n",
        "",
        ("tests/aio/test_requests.py::test_deadlines_and_graces_run_on_an_injected_clock",),
    ),
    Mutation(
        "tracer-failure-contained",
        "a host's tracer that raises never breaks the read loop or a send (logged, the message goes on)",
        "aio/_connection.py",
        "            tracer=None if tracer is None else _guarded(tracer, name),\n",
        "            tracer=tracer,\n",
        ("tests/driver/test_faults.py::test_a_tracer_that_raises_never_breaks_the_connection",),
    ),
    Mutation(
        "handler-timeout-cascades",
        "a handler whose own timeout fired cancels the requests it made ($/cancel_request), also from a task of its own",
        "aio/_serving.py",
        "                    if not scope.expired():\n                        raise\n                    self._cascade(entry)\n",
        "                    if not scope.expired():\n                        raise\n",
        ("tests/aio/test_handler_timeout.py",),
    ),
    Mutation(
        "handler-timeout-on-the-injected-clock",
        "a handler's timeout (-32800) runs on the connection's injected clock",
        "aio/_serving.py",
        "                    async with timeout_on(self.clock, timeout) as scope:\n",
        "                    async with timeout_on(None, timeout) as scope:\n",
        ("tests/aio/test_handler_timeout.py",),
    ),
]
