"""Mutations of the agent runtime (v1): the cancelled answer, the fence, stdout."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "ended-agent-turn-drops-its-task",
        "agent runtime: an ended turn drops its task, so a cancelled turn is freed without the collector",
        "agent/_turn.py",
        "            self.task = None\n",
        "            pass\n",
        ("tests/agent/test_garbage.py",),
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
]
