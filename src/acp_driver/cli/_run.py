"""``acp-driver run`` and ``acp-driver chat``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ..core import DEFAULT_BUDGET, AcpError, LadderPolicy, Resolution, RpcError, Rung
from ..driver import (
    AgentExitedError,
    AgentStartError,
    ClientServices,
    PermissionRequest,
    PromptTurn,
    RemoteAgent,
    TurnResult,
    launch,
)
from . import _main as codes
from ._render import ConsoleOutput, JsonOutput, Output


class StdinLines:
    """Lines from stdin, read without blocking the loop (and so cancellable)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._buf = b""
        self._fd = sys.stdin.fileno()
        self._eof = False
        self._loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        import os

        try:
            data = os.read(self._fd, 65536)
        except OSError:
            data = b""
        if not data:
            self._eof = True
            self._loop.remove_reader(self._fd)
            if self._buf:
                self._lines.put_nowait(self._buf.decode("utf-8", "replace"))
                self._buf = b""
            self._lines.put_nowait(None)
            return
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self._lines.put_nowait(line.decode("utf-8", "replace"))

    async def readline(self) -> str | None:
        """The next line, or None at end of input."""
        if self._eof and self._lines.empty():
            return None
        return await self._lines.get()

    def close(self) -> None:
        if not self._eof:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


class Permissions:
    """The CLI's permission policy: --yes / --deny, else ask on a TTY, else deny."""

    def __init__(
        self, opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
    ) -> None:
        self._output = output
        self._lines = lines
        if opts.yes:
            self.mode = "yes"
        elif opts.deny or lines is None:
            self.mode = "deny"
        else:
            self.mode = "ask"

    async def __call__(self, request: PermissionRequest) -> dict[str, Any]:
        if self.mode == "yes":
            outcome = request.allow()
            self._output.permission(request, outcome, "--yes")
            return outcome
        if self.mode == "deny":
            outcome = request.reject()
            self._output.permission(request, outcome, "--deny" if self._lines is not None else "not a TTY")
            return outcome
        try:
            outcome = await self._ask(request)
        except asyncio.CancelledError:
            self._output.note("permission request withdrawn (turn cancelled)")
            raise
        self._output.permission(request, outcome, "you")
        return outcome

    async def _ask(self, request: PermissionRequest) -> dict[str, Any]:
        assert self._lines is not None
        output = self._output
        output.waiting(False)
        options = [o for o in request.options if isinstance(o.get("optionId"), str)]
        err = sys.stderr
        err.write(f"\nThe agent asks permission: {request.title}\n")
        for i, option in enumerate(options, 1):
            err.write(f"  {i}) {option.get('name', option['optionId'])} [{option.get('kind', '')}]\n")
        reader = self._lines()
        while True:
            err.write(f"choose 1-{len(options)}: ")
            err.flush()
            line = await reader.readline()
            if line is None:
                return request.reject()
            choice = line.strip()
            if choice.isdigit() and 1 <= int(choice) <= len(options):
                return request.select(str(options[int(choice) - 1]["optionId"]))


def _services(
    opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
) -> ClientServices:
    from ..services import LocalFileSystem, LocalTerminals

    return ClientServices(
        permission=Permissions(opts, output, lines),
        fs=None if opts.no_fs else LocalFileSystem(),
        terminals=None if opts.no_terminal else LocalTerminals(),
    )


class TurnController:
    """Ctrl-C and --turn-timeout for the running turn: first cancels, second kills."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.turn: PromptTurn | None = None
        self.reason: str | None = None
        self._cancel_task: asyncio.Task[Any] | None = None
        self._cancel_started = 0.0
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self.idle_interrupt: Callable[[], None] | None = None

    def install(self) -> None:
        self._loop.add_signal_handler(signal.SIGINT, self.interrupt)

    def uninstall(self) -> None:
        with contextlib.suppress(Exception):
            self._loop.remove_signal_handler(signal.SIGINT)
        self.clear_timer()

    def start(self, turn: PromptTurn, timeout: float | None) -> None:
        self.turn = turn
        self.reason = None
        self._cancel_task = None
        if timeout is not None:
            self._timer = self._loop.call_later(timeout, self._timeout)

    def clear_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def interrupt(self) -> None:
        turn = self.turn
        if turn is None or turn.done:
            if self.idle_interrupt is not None:
                self.idle_interrupt()
            return
        if self._cancel_task is None:
            self._cancel("interrupt")
        else:
            self.output.note("second Ctrl-C: killing the agent")
            turn.kill()

    def _timeout(self) -> None:
        self._timer = None
        if self.turn is not None and not self.turn.done and self._cancel_task is None:
            self._cancel("timeout")

    def _cancel(self, reason: str) -> None:
        assert self.turn is not None
        self.reason = reason
        self._cancel_started = time.monotonic()
        self.output.cancelling(reason)
        self._cancel_task = self._loop.create_task(self.turn.cancel())

    def on_step(self, turn: PromptTurn, rung: Rung) -> None:
        self.output.ladder_step(rung, time.monotonic() - self._cancel_started)

    async def finish(self) -> None:
        self.clear_timer()
        if self._cancel_task is not None:
            with contextlib.suppress(Exception):
                await self._cancel_task


def _exit_code(result: TurnResult, reason: str | None) -> int:
    if reason == "interrupt":
        return codes.EXIT_INTERRUPTED
    if reason == "timeout":
        return codes.EXIT_TIMEOUT
    if result.resolution in (Resolution.AGENT_EXITED, Resolution.KILLED):
        return codes.EXIT_AGENT_EXITED
    if result.resolution is Resolution.ERROR:
        return codes.EXIT_AGENT_ERROR
    return codes.EXIT_OK


async def _start_agent(
    opts: argparse.Namespace, argv: list[str], cwd: str, output: Output, services: ClientServices
) -> RemoteAgent | None:
    budget = DEFAULT_BUDGET if opts.cancel_grace is None else opts.cancel_grace
    try:
        agent = await launch(argv, cwd=cwd, services=services, ladder=LadderPolicy(budget=budget))
    except AgentStartError as exc:
        output.error(f"agent failed to start: {exc}")
        return None
    output.agent_started(agent)
    return agent


async def _run_turn(
    turn: PromptTurn, output: Output, controller: TurnController, timeout: float | None
) -> int:
    controller.start(turn, timeout)
    output.waiting(True)
    async for update in turn:
        output.update(update)
        output.waiting(True)
    result = await turn
    await controller.finish()
    output.waiting(False)
    if result.error is not None and result.resolution in (Resolution.AGENT_EXITED, Resolution.ERROR):
        output.error(f"{result.resolution.value}: {result.error.message}")
    output.result(result)
    return _exit_code(result, controller.reason)


def _make_output(opts: argparse.Namespace) -> Output:
    return JsonOutput() if getattr(opts, "json", False) else ConsoleOutput(quiet=opts.quiet)


def run_command(opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str) -> int:
    return asyncio.run(_run(opts, argv, cwd, prompt))


async def _run(opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str) -> int:
    output = _make_output(opts)
    reader: StdinLines | None = None

    def lines() -> StdinLines:
        nonlocal reader
        if reader is None:
            reader = StdinLines()
        return reader

    ask = _interactive() and not opts.json
    services = _services(opts, output, lines if ask else None)
    controller = TurnController(output)
    controller.install()
    agent: RemoteAgent | None = None
    try:
        agent = await _start_agent(opts, argv, cwd, output, services)
        if agent is None:
            return codes.EXIT_ERROR
        agent.on_ladder_step = controller.on_step
        try:
            session = await agent.new_session(cwd)
        except (AcpError, RpcError) as exc:
            output.error(f"session/new failed: {exc}")
            return codes.EXIT_AGENT_EXITED if isinstance(exc, AgentExitedError) else codes.EXIT_ERROR
        output.session_started(session)
        return await _run_turn(session.prompt(prompt), output, controller, opts.turn_timeout)
    finally:
        controller.uninstall()
        output.close()
        if reader is not None:
            reader.close()
        if agent is not None:
            await agent.aclose()


def chat_command(opts: argparse.Namespace, argv: list[str], cwd: str) -> int:
    return asyncio.run(_chat(opts, argv, cwd))


async def _chat(opts: argparse.Namespace, argv: list[str], cwd: str) -> int:
    output = ConsoleOutput(quiet=opts.quiet)
    reader = StdinLines()
    tty = _interactive()
    services = _services(opts, output, (lambda: reader) if tty else None)
    controller = TurnController(output)
    controller.install()
    agent: RemoteAgent | None = None
    prompt_wait: asyncio.Task[str | None] | None = None

    def idle_interrupt() -> None:
        if prompt_wait is not None:
            prompt_wait.cancel()

    controller.idle_interrupt = idle_interrupt
    code = codes.EXIT_OK
    try:
        agent = await _start_agent(opts, argv, cwd, output, services)
        if agent is None:
            return codes.EXIT_ERROR
        agent.on_ladder_step = controller.on_step
        session = await agent.new_session(cwd)
        output.session_started(session)
        if tty:
            sys.stderr.write("Type a prompt and press Enter; Ctrl-C cancels a turn; Ctrl-D quits.\n")
        while True:
            if tty:
                sys.stderr.write("\n> ")
                sys.stderr.flush()
            prompt_wait = asyncio.get_running_loop().create_task(reader.readline())
            try:
                line = await prompt_wait
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                break  # Ctrl-C at the prompt: leave
            finally:
                prompt_wait = None
            if line is None:
                break
            if not line.strip():
                continue
            code = await _run_turn(session.prompt(line), output, controller, None)
            if not agent.connection.is_open:
                output.error("the agent is gone; ending the chat")
                return codes.EXIT_AGENT_EXITED
        return codes.EXIT_OK if code in (codes.EXIT_OK, codes.EXIT_INTERRUPTED) else code
    except AgentExitedError as exc:
        output.error(str(exc))
        return codes.EXIT_AGENT_EXITED
    finally:
        controller.uninstall()
        output.close()
        reader.close()
        if agent is not None:
            await agent.aclose()
