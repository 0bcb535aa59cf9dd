"""``acp-driver run`` and ``acp-driver chat``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from ..core import Resolution
from ..driver import AgentExitedError, ClientServices, PromptTurn, TurnResult
from . import _codes as codes
from ._controller import Controller
from ._permissions import Permissions
from ._render import ConsoleOutput, JsonOutput, Output
from ._start import abortable_start, start_session
from ._stdin import StdinLines, interactive
from ._stdout import StdoutGuard, run_guarded


def _services(
    opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
) -> ClientServices:
    from ..services import LocalFileSystem, LocalTerminals

    return ClientServices(
        permission=Permissions(opts, output, lines),
        fs=None if opts.no_fs else LocalFileSystem(),
        terminals=None if opts.no_terminal else LocalTerminals(),
    )


def _exit_code(result: TurnResult, reason: str | None) -> int:
    if reason == "interrupt":
        return codes.EXIT_INTERRUPTED
    if reason == "timeout":
        return codes.EXIT_TIMEOUT
    if result.resolution in (Resolution.AGENT_EXITED, Resolution.KILLED):
        return codes.EXIT_AGENT_EXITED
    if result.resolution is Resolution.DISCONNECTED:
        return codes.EXIT_DISCONNECTED
    if result.resolution is Resolution.ERROR:
        return codes.EXIT_AGENT_ERROR
    return codes.EXIT_OK


async def _close(controller: Controller, output: Output, services: ClientServices) -> None:
    """Reap the agent and every terminal; signals now stop the agent, never this shutdown."""
    controller.phase = "closing"
    controller.clear_timer()
    with contextlib.suppress(OSError, ValueError):
        output.close()
    agent = controller.agent
    if agent is not None:
        await agent.aclose()
    if services.terminals is not None:
        await services.terminals.aclose()


async def _run_turn(turn: PromptTurn, output: Output, controller: Controller, timeout: float | None) -> int:
    controller.start(turn, timeout)
    if turn.request_id is not None:
        output.prompt_sent(turn)
    output.waiting(True)
    async for update in turn:
        output.update(update)
        output.waiting(True)
    result = await turn
    await controller.finish()
    output.waiting(False)
    if result.error is not None and result.resolution is Resolution.AGENT_EXITED:
        output.error(f"the agent exited during the turn: {result.error.message}")
    elif result.error is not None and result.resolution is Resolution.DISCONNECTED and not result.cancel:
        output.error(f"the connection was lost during the turn: {result.error.message}")
    elif result.error is not None and result.resolution is Resolution.ERROR:
        output.error(f"the agent answered the prompt with an error: {result.error.message}")
    output.result(result)
    return _exit_code(result, controller.reason)


def _make_output(opts: argparse.Namespace) -> Output:
    return JsonOutput() if getattr(opts, "json", False) else ConsoleOutput(quiet=opts.quiet)


def run_command(opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str) -> int:
    return run_guarded(lambda guard: asyncio.run(_run(opts, argv, cwd, prompt, guard)))


async def _run(opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str, stdout: StdoutGuard) -> int:
    output = _make_output(opts)
    reader: StdinLines | None = None

    def lines() -> StdinLines:
        nonlocal reader
        if reader is None:
            reader = StdinLines()
        return reader

    ask = interactive() and not opts.json
    services = _services(opts, output, lines if ask else None)
    controller = Controller(output)
    stdout.on_gone = lambda: controller.on_signal(signal.SIGPIPE)
    stdout.on_failed = controller.on_output_lost
    controller.install()
    try:
        try:
            started = await abortable_start(
                controller, start_session(opts, argv, cwd, output, services, controller)
            )
            if isinstance(started, int):
                return controller.exit_code(started)
            output.session_started(started)
            code = await _run_turn(started.prompt(prompt), output, controller, opts.turn_timeout)
        finally:
            if reader is not None:
                reader.close()
            await _close(controller, output, services)
        return controller.exit_code(code)
    finally:
        controller.uninstall()


def chat_command(opts: argparse.Namespace, argv: list[str], cwd: str) -> int:
    return run_guarded(lambda guard: asyncio.run(_chat(opts, argv, cwd, guard)))


async def _chat(opts: argparse.Namespace, argv: list[str], cwd: str, stdout: StdoutGuard) -> int:
    output = ConsoleOutput(quiet=opts.quiet, separate_turns=True)
    reader = StdinLines()
    tty = interactive()
    services = _services(opts, output, (lambda: reader) if tty else None)
    controller = Controller(output, chat=True)
    stdout.on_gone = lambda: controller.on_signal(signal.SIGPIPE)
    stdout.on_failed = controller.on_output_lost
    controller.install()
    try:
        try:
            code = await _converse(opts, cwd, output, reader, tty, controller, services, argv)
        finally:
            reader.close()
            await _close(controller, output, services)
        return controller.exit_code(code)
    finally:
        controller.uninstall()


async def _converse(
    opts: argparse.Namespace,
    cwd: str,
    output: ConsoleOutput,
    reader: StdinLines,
    tty: bool,
    controller: Controller,
    services: ClientServices,
    argv: list[str],
) -> int:
    started = await abortable_start(controller, start_session(opts, argv, cwd, output, services, controller))
    if isinstance(started, int):
        return started
    session = started
    agent = session.agent
    output.session_started(session)
    if tty:
        sys.stderr.write("Type a prompt and press Enter; Ctrl-C cancels a turn; Ctrl-D quits.\n")
    code = codes.EXIT_OK
    loop = asyncio.get_running_loop()
    while controller.signum is None:
        if tty:
            sys.stderr.write("\n> ")
            sys.stderr.flush()
        controller.phase = "idle"
        wait = loop.create_task(reader.readline())
        controller.idle_interrupt = wait.cancel
        try:
            line = await wait
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            break  # a signal at the prompt: leave
        finally:
            controller.idle_interrupt = None
        if line is None:
            break
        if not line.strip():
            continue
        try:
            code = await _run_turn(session.prompt(line), output, controller, None)
        except AgentExitedError as exc:
            output.error(str(exc))
            return codes.EXIT_DISCONNECTED if agent.remote else codes.EXIT_AGENT_EXITED
        if not agent.connection.is_open:
            output.error(
                "the connection is gone; ending the chat"
                if agent.remote
                else "the agent is gone; ending the chat"
            )
            return codes.EXIT_DISCONNECTED if agent.remote else codes.EXIT_AGENT_EXITED
    return codes.EXIT_OK if code in (codes.EXIT_OK, codes.EXIT_INTERRUPTED) else code
