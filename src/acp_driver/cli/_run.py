"""``acp-driver run`` and ``acp-driver chat``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from ..core import Resolution
from ..driver import AgentExitedError, ClientServices, PromptTurn, SessionHandle, TurnResult
from . import _codes as codes
from ._controller import Controller
from ._permissions import Permissions
from ._render import ConsoleOutput, JsonOutput, Output
from ._start import abortable_start, start_session
from ._stdin import StdinLines, interactive
from ._stdout import StdoutGuard, run_guarded
from ._text import shown


def _services(
    opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
) -> ClientServices:
    from ..services import LocalFileSystem, LocalTerminals

    return ClientServices(
        permission=Permissions(opts, output, lines),
        fs=None if opts.no_fs else LocalFileSystem(),
        terminals=None if opts.no_terminal else LocalTerminals(),
    )


def _time_questions(services: ClientServices, controller: Controller) -> None:
    """The user's time at a permission question is not the turn's: the controller is told."""
    if isinstance(services.permission, Permissions):
        services.permission.asking = controller.asking


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
    output.result(result, controller.user_time)
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
    _time_questions(services, controller)
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
            if isinstance(output, JsonOutput):
                output.listen(started)
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
    _time_questions(services, controller)
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
        sys.stderr.write("Type a prompt and press Enter; Ctrl-C cancels a turn; Ctrl-D quits; /help.\n")
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
        if line.strip() == "/help":
            sys.stderr.write(chat_help(session))
            continue
        if line.startswith("//"):
            line = line[1:]  # "//help" sends "/help"
        try:
            code = await _run_turn(session.prompt(line), output, controller, opts.turn_timeout)
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
    # A turn cancelled by Ctrl-C or --turn-timeout was one turn: the chat went on.
    return codes.EXIT_OK if code in (codes.EXIT_OK, codes.EXIT_INTERRUPTED, codes.EXIT_TIMEOUT) else code


def chat_help(session: SessionHandle) -> str:
    """``/help`` in ``chat``: the chat's own keys and commands, then the commands the agent
    advertised (its last ``available_commands_update``), shown as text."""
    lines = [
        "chat: type a prompt and press Enter; it is sent to the agent as one turn.",
        "  /help        this help (answered here, not sent to the agent)",
        "  //TEXT       send /TEXT as is (//help sends /help to the agent)",
        "  Ctrl-C       cancel the running turn (twice: kill the agent); at the prompt: quit",
        "  Ctrl-D       quit",
    ]
    commands = _advertised_commands(session)
    if commands:
        lines.append("the agent's commands (sent to it as prompts):")
        for name, description in commands:
            lines.append(f"  /{shown(name)}" + (f"  {shown(description)}" if description else ""))
    else:
        lines.append("the agent advertised no commands of its own (lines starting with / go to it as text)")
    return "\n".join(lines) + "\n"


def _advertised_commands(session: SessionHandle) -> list[tuple[str, str]]:
    latest = None
    for update in session.session_updates:
        if update.kind == "available_commands_update":
            latest = update.raw.get("availableCommands")
    found = []
    for command in latest if isinstance(latest, list) else []:
        if isinstance(command, dict) and isinstance(command.get("name"), str):
            description = command.get("description")
            found.append((command["name"], description if isinstance(description, str) else ""))
    return found
