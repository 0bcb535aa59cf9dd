"""Signals and ``--turn-timeout`` for a command's whole life: start, turns, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from ..aio import Clock, LoopClock, Timer
from ..core import Rung
from ..driver import AgentHandle, PromptTurn
from ._codes import EXIT_ERROR
from ._render import Output
from ._signals import Routed

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that end (or, in ``chat``, interrupt) a command: each behaves like Ctrl-C (but
one the command inherited ignored stays ignored: ``_signals``)."""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # pragma: no cover - only the SIGNALS above are handled
        return f"signal {signum}"


class Controller:
    """Signals and ``--turn-timeout`` for a command's whole life: start, turns, shutdown.

    The handlers stay installed from before the agent is spawned until it is reaped, so no signal
    is ever lost and none can interrupt the agent's shutdown half-way (which would orphan it). A
    signal the command inherited ignored (``nohup``, a background job) gets no handler: it stays
    ignored, as in every command (``_signals``).

    - A turn is running: the first signal cancels it through the ladder, the next one kills the
      agent. In ``chat`` a Ctrl-C cancels only the turn; SIGTERM and SIGHUP end the chat too.
    - The agent is starting (spawn, ``initialize``, ``authenticate``, ``session/new``): the start
      is aborted and the agent's group gets SIGTERM; a second signal sends SIGKILL.
    - Waiting at the chat prompt: the chat ends.
    - Shutting down: SIGTERM to the agent's group, then SIGKILL; the shutdown itself runs on and
      reaps the agent either way.

    A command ended by a signal exits with 128 + the signal's number. Stdout that cannot be
    written any more (a full disk, an I/O error) ends the command the same way, with exit 1.
    Once the agent is reaped (``uninstall``) the signals are ignored: the command only has its
    exit code left to give, and a late signal must not replace it by a death.
    """

    def __init__(self, output: Output, *, chat: bool = False, clock: Clock | None = None) -> None:
        self.output = output
        self.chat = chat
        self.phase = "starting"
        """``starting``, ``turn``, ``idle`` (the chat prompt) or ``closing``."""
        self.turn: PromptTurn | None = None
        self.reason: str | None = None
        self.agent: AgentHandle | None = None
        """Set as soon as the agent process exists (before ``initialize`` is answered)."""
        self.startup: asyncio.Task[Any] | None = None
        self.signum: int | None = None
        """The first signal that ends the command (exit code 128 + signum)."""
        self.idle_interrupt: Callable[[], object] | None = None
        self.turn_timeout: float | None = None
        self.lost_output: str | None = None
        """Why stdout cannot be written (the command then exits 1)."""
        self._cancel_task: asyncio.Task[Any] | None = None
        self._cancel_started = 0.0
        self._stops = 0
        self._loop = asyncio.get_running_loop()
        self._given_clock = clock
        self._clock: Clock = clock or LoopClock()
        """What the turn timeout and the reported ladder steps are timed on: the one given, else
        each turn's agent's clock (the ladder's own, set at ``start``)."""
        self._timer: Timer | None = None
        self._deadline = 0.0
        self._timeout_left: float | None = None
        """The turn timeout's time left, while the user is asked a question (the timer paused)."""
        self._asking = 0
        self._asked_at = 0.0
        self.user_time = 0.0
        """The turn's time spent waiting for the user's answer to a permission question: not
        the turn's (``--turn-timeout`` does not count it, the result line names it apart)."""
        self._routed: Routed | None = None
        self._on_terminal = [fd for fd in (0, 1, 2) if _isatty(fd)]
        """stdin/stdout/stderr on a terminal (known now: once it hangs up, isatty() says no)."""

    def took(self, agent: AgentHandle) -> None:
        """``launch(on_spawn=...)``: the agent process exists; signals now reach it."""
        self.agent = agent

    # ------------------------------------------------------------------ installation

    def install(self) -> None:
        self._routed = Routed(self._loop, self.on_signal, SIGNALS)

    def uninstall(self) -> None:
        """The agent is reaped: from now on a signal changes nothing (the default action would
        kill the CLI before it gives its exit code)."""
        if self._routed is not None:
            self._routed.ignore()
        self.clear_timer()

    def exit_code(self, code: int) -> int:
        if self.signum is not None:
            return 128 + self.signum
        if self.lost_output is not None:
            return EXIT_ERROR
        return code

    # ------------------------------------------------------------------ turns

    def start(self, turn: PromptTurn, timeout: float | None) -> None:
        self.turn = turn
        self.reason = None
        self._cancel_task = None
        self.phase = "turn"
        self.turn_timeout = timeout
        self.user_time = 0.0
        self._timeout_left = None
        if self._given_clock is None:
            self._clock = turn.agent.clock  # one clock: the timeout's and the ladder it starts
        if timeout is not None:
            self._deadline = self._clock.now() + timeout
            self._timer = self._clock.call_at(self._deadline, self._timeout)

    def clear_timer(self) -> None:
        self._timeout_left = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def asking(self, active: bool) -> None:
        """A permission question is put to the user (True) or answered (False): the turn's
        clock stops meanwhile (questions at once count once)."""
        now = self._clock.now()
        if active:
            self._asking += 1
            if self._asking > 1:
                return
            self._asked_at = now
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
                self._timeout_left = max(self._deadline - now, 0.0)
            return
        if self._asking == 0:
            return
        self._asking -= 1
        if self._asking:
            return
        self.user_time += now - self._asked_at
        left = self._timeout_left
        if left is not None and self.phase == "turn" and self._cancel_task is None:
            self._timeout_left = None
            self._deadline = now + left
            self._timer = self._clock.call_at(self._deadline, self._timeout)

    def _timeout(self) -> None:
        self._timer = None
        trace_event(self.agent, "timeout", after=self.turn_timeout)
        if self.turn is not None and not self.turn.done and self._cancel_task is None:
            self._cancel("timeout")

    def _cancel(self, reason: str) -> None:
        assert self.turn is not None
        self.reason = reason
        self._cancel_started = self._clock.now()
        self.say(self.output.cancelling, reason)
        self._cancel_task = self._loop.create_task(self.turn.cancel())

    def on_step(self, turn: PromptTurn, rung: Rung) -> None:
        self.say(self.output.ladder_step, rung, self._clock.now() - self._cancel_started)

    async def finish(self) -> None:
        self.clear_timer()
        if self._cancel_task is not None:
            with contextlib.suppress(Exception):
                await self._cancel_task

    # ------------------------------------------------------------------ signals

    def on_signal(self, signum: int) -> None:
        trace_event(self.agent, "signal", name=signal_name(signum), to="host", phase=self.phase)
        if signum == signal.SIGHUP:
            detach(self._on_terminal)
        ends = not (self.chat and signum == signal.SIGINT)  # chat: Ctrl-C cancels only the turn
        what = "Ctrl-C" if signum == signal.SIGINT else signal_name(signum)
        reason = "interrupt" if signum == signal.SIGINT else signal_name(signum)
        self._interrupt(lambda: self._ends(signum), ends, what, reason)

    def on_output_lost(self, why: str) -> None:
        """Stdout failed (not a reader gone: that is SIGPIPE): say so once on stderr, then end the
        command as a signal would; it exits 1."""
        if self.lost_output is not None:
            return
        self.lost_output = why
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(f"acp-driver: error: {why}\n")
            sys.stderr.flush()
        self._interrupt(lambda: None, True, "stdout failed", "stdout failed")

    def _interrupt(self, end: Callable[[], None], ends: bool, what: str, reason: str) -> None:
        turn = self.turn
        if self.phase == "turn" and turn is not None and not turn.done:
            if ends:
                end()
            if self._cancel_task is None:
                self._cancel(reason)
            else:
                self.say(self.output.note, f"{what} again: killing the agent")
                turn.kill()
            return
        end()
        if self.phase == "idle" and self.idle_interrupt is not None:
            self.idle_interrupt()
            return
        self._stop_agent()

    def _ends(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum

    def _stop_agent(self) -> None:
        """No turn to cancel: abort the start, and end the agent's group (TERM, then KILL)."""
        self._stops += 1
        if self.startup is not None and not self.startup.done():
            self.startup.cancel()
        agent = self.agent
        if agent is None:
            return
        if self._stops == 1:
            what = "closing the connection" if agent.remote else "SIGTERM"
            self.say(self.output.note, f"stopping the agent ({what}; signal again to kill it)")
            agent.terminate_peer()
        else:
            what = "aborting the connection" if agent.remote else "SIGKILL"
            self.say(self.output.note, f"killing the agent ({what})")
            agent.kill_peer()

    def say(self, what: Callable[..., None], *args: Any) -> None:
        # Reporting must never stop the signal's effect (a closed terminal, a closed pipe).
        with contextlib.suppress(OSError, ValueError):
            what(*args)


def trace_event(agent: AgentHandle | None, kind: str, **fields: Any) -> None:
    """Record what the command saw (a signal, its turn timeout) in the agent's trace, if any."""
    if agent is not None and agent.trace is not None:
        agent.trace.event(kind, **fields)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def detach(fds: list[int]) -> None:
    """SIGHUP: the terminal is gone; ``fds`` that were on it now read and write nothing (a write
    to a hung-up terminal fails, and would stop the cancel and the shutdown half-way)."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)
