"""``acp-driver run`` and ``acp-driver chat``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ..core import DEFAULT_BUDGET, AcpError, LadderPolicy, Resolution, RpcError, Rung
from ..driver import (
    AgentExitedError,
    AgentHandle,
    AgentStartError,
    ClientServices,
    PermissionRequest,
    PromptTurn,
    SessionHandle,
    TurnResult,
    connect,
)
from . import _main as codes
from ._render import ConsoleOutput, JsonOutput, Output


class StdinLines:
    """Lines from stdin, read without blocking the loop (and so cancellable).

    A pipe or a terminal is watched by the loop; a regular file or ``/dev/null`` cannot be (epoll
    refuses them) but never blocks either, so it is read when a line is asked for. Bytes that are
    not UTF-8 become U+FFFD."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._buf = b""
        self._fd = sys.stdin.fileno() if sys.stdin is not None else -1
        self._eof = False
        self._watched = False
        if self._fd < 0:
            self._end()
            return
        try:
            self._loop.add_reader(self._fd, self._readable)
        except (OSError, ValueError):  # a regular file, /dev/null, a closed fd: read on demand
            pass
        else:
            self._watched = True

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end()
            return
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self._lines.put_nowait(line.decode("utf-8", "replace"))

    def _end(self) -> None:
        if self._watched:
            self._loop.remove_reader(self._fd)
            self._watched = False
        self._eof = True
        if self._buf:
            self._lines.put_nowait(self._buf.decode("utf-8", "replace"))
            self._buf = b""
        self._lines.put_nowait(None)

    async def readline(self) -> str | None:
        """The next line, or None at end of input."""
        while not self._watched and not self._eof and self._lines.empty():
            self._readable()  # a file: this read does not block
        if self._eof and self._lines.empty():
            return None
        return await self._lines.get()

    def close(self) -> None:
        if self._watched:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)
            self._watched = False


def _interactive() -> bool:
    # A closed stdin (``<&-``) leaves sys.stdin None: not interactive, and read as empty.
    return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


class Permissions:
    """The CLI's permission policy: --yes / --deny, else ask on a TTY, else deny."""

    def __init__(
        self, opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
    ) -> None:
        self._output = output
        self._lines = lines
        self._why_deny = "--deny" if opts.deny else "not a TTY"
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
            self._output.permission(request, outcome, self._why_deny)
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


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that end (or, in ``chat``, interrupt) a command: each behaves like Ctrl-C."""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # pragma: no cover - only the SIGNALS above are handled
        return f"signal {signum}"


class Controller:
    """Signals and ``--turn-timeout`` for a command's whole life: start, turns, shutdown.

    The handlers stay installed from before the agent is spawned until it is reaped, so no signal
    is ever ignored and none can interrupt the agent's shutdown half-way (which would orphan it).

    - A turn is running: the first signal cancels it through the ladder, the next one kills the
      agent. In ``chat`` a Ctrl-C cancels only the turn; SIGTERM and SIGHUP end the chat too.
    - The agent is starting (spawn, ``initialize``, ``authenticate``, ``session/new``): the start
      is aborted and the agent's group gets SIGTERM; a second signal sends SIGKILL.
    - Waiting at the chat prompt: the chat ends.
    - Shutting down: SIGTERM to the agent's group, then SIGKILL; the shutdown itself runs on and
      reaps the agent either way.

    A command ended by a signal exits with 128 + the signal's number.
    """

    def __init__(self, output: Output, *, chat: bool = False) -> None:
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
        self._cancel_task: asyncio.Task[Any] | None = None
        self._cancel_started = 0.0
        self._stops = 0
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._installed: list[int] = []
        self._on_terminal = [fd for fd in (0, 1, 2) if _isatty(fd)]
        """stdin/stdout/stderr on a terminal (known now: once it hangs up, isatty() says no)."""

    def took(self, agent: AgentHandle) -> None:
        """``launch(on_spawn=...)``: the agent process exists; signals now reach it."""
        self.agent = agent

    # ------------------------------------------------------------------ installation

    def install(self) -> None:
        for signum in SIGNALS:
            self._loop.add_signal_handler(signum, self.on_signal, signum)
            self._installed.append(signum)

    def uninstall(self) -> None:
        while self._installed:
            with contextlib.suppress(Exception):
                self._loop.remove_signal_handler(self._installed.pop())
        self.clear_timer()

    def exit_code(self, code: int) -> int:
        return code if self.signum is None else 128 + self.signum

    # ------------------------------------------------------------------ turns

    def start(self, turn: PromptTurn, timeout: float | None) -> None:
        self.turn = turn
        self.reason = None
        self._cancel_task = None
        self.phase = "turn"
        self.turn_timeout = timeout
        if timeout is not None:
            self._timer = self._loop.call_later(timeout, self._timeout)

    def clear_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timeout(self) -> None:
        self._timer = None
        trace_event(self.agent, "timeout", after=self.turn_timeout)
        if self.turn is not None and not self.turn.done and self._cancel_task is None:
            self._cancel("timeout")

    def _cancel(self, reason: str) -> None:
        assert self.turn is not None
        self.reason = reason
        self._cancel_started = time.monotonic()
        self._say(self.output.cancelling, reason)
        self._cancel_task = self._loop.create_task(self.turn.cancel())

    def on_step(self, turn: PromptTurn, rung: Rung) -> None:
        self._say(self.output.ladder_step, rung, time.monotonic() - self._cancel_started)

    async def finish(self) -> None:
        self.clear_timer()
        if self._cancel_task is not None:
            with contextlib.suppress(Exception):
                await self._cancel_task

    # ------------------------------------------------------------------ signals

    def on_signal(self, signum: int) -> None:
        trace_event(self.agent, "signal", name=signal_name(signum), to="host", phase=self.phase)
        if signum == signal.SIGHUP:
            _detach(self._on_terminal)
        turn = self.turn
        if self.phase == "turn" and turn is not None and not turn.done:
            if not (self.chat and signum == signal.SIGINT):
                self._ends(signum)
            if self._cancel_task is None:
                self._cancel("interrupt" if signum == signal.SIGINT else signal_name(signum))
            else:
                what = "Ctrl-C" if signum == signal.SIGINT else signal_name(signum)
                self._say(self.output.note, f"{what} again: killing the agent")
                turn.kill()
            return
        self._ends(signum)
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
            self._say(self.output.note, f"stopping the agent ({what}; signal again to kill it)")
            agent.terminate_peer()
        else:
            what = "aborting the connection" if agent.remote else "SIGKILL"
            self._say(self.output.note, f"killing the agent ({what})")
            agent.kill_peer()

    def _say(self, what: Callable[..., None], *args: Any) -> None:
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


def _detach(fds: list[int]) -> None:
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


class StartFailed(Exception):
    """The agent could not be started, authenticated or given a session (already reported)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


AUTH_REQUIRED = -32000
"""ACP's ``auth_required`` error code."""


def _auth_vars(method: dict[str, Any]) -> list[str]:
    """The environment variables an ``env_var`` method reads (``vars: [{"name": ...}]``)."""
    found = method.get("vars")
    if not isinstance(found, list):
        return []
    return [str(v["name"]) for v in found if isinstance(v, dict) and isinstance(v.get("name"), str)]


def _auth_offer(agent: AgentHandle) -> str:
    methods = [m for m in agent.auth_methods if isinstance(m.get("id"), str)]
    if not methods:
        return "the agent advertises no authentication method (log in with the agent's own tool)"
    listed = []
    for method in methods:
        kind = method.get("type") or "agent"
        name = method.get("name") or method["id"]
        note = ""
        if kind == "terminal":
            note = " — a terminal login, run outside ACP"
        elif _auth_vars(method):
            note = f" — set {', '.join(_auth_vars(method))} in the environment"
        listed.append(f"{method['id']} ({name}){note}")
    return "methods offered: " + "; ".join(listed)


async def _authenticate(agent: AgentHandle, method_id: str, output: Output) -> None:
    method = next((m for m in agent.auth_methods if m.get("id") == method_id), None)
    if method is None:
        output.error(f"--auth {method_id}: the agent does not offer this method; {_auth_offer(agent)}")
        raise StartFailed(codes.EXIT_ERROR)
    if method.get("type") == "terminal":
        # Spec: a terminal method is never sent to authenticate; the user runs the login.
        args = method.get("args")
        login = " ".join(str(a) for a in args) if isinstance(args, list) else ""
        output.error(
            f"--auth {method_id} is a terminal login: run the agent's command with "
            f"{login or 'its login arguments'} in a terminal, then retry without --auth"
        )
        raise StartFailed(codes.EXIT_ERROR)
    try:
        await agent.authenticate(method_id)
    except (AcpError, RpcError) as exc:
        unset = [name for name in _auth_vars(method) if not os.environ.get(name)]
        hint = f" ({', '.join(unset)} not set: this method reads it from the environment)" if unset else ""
        output.error(f"authenticate with {method_id!r} failed: {exc}{hint}")
        raise StartFailed(
            codes.EXIT_AGENT_EXITED if isinstance(exc, AgentExitedError) else codes.EXIT_ERROR
        ) from None
    output.note(f"authenticated with {method_id}")


async def _start(
    opts: argparse.Namespace,
    argv: list[str],
    cwd: str,
    output: Output,
    services: ClientServices,
    controller: Controller,
) -> SessionHandle:
    """Spawn and initialize the agent, authenticate, open a session (``controller.agent``)."""
    budget = DEFAULT_BUDGET if opts.cancel_grace is None else opts.cancel_grace
    url: str | None = getattr(opts, "agent_url", None)
    try:
        if url is not None:
            agent = await connect(
                url,
                headers=getattr(opts, "headers", None),
                ssl_context=getattr(opts, "ssl_context", None),
                services=services,
                ladder=LadderPolicy(budget=budget),
                on_connect=controller.took,
                trace=getattr(opts, "trace", None),
            )
        else:
            agent = await AgentHandle.launch(
                argv,
                cwd=cwd,
                services=services,
                ladder=LadderPolicy(budget=budget),
                on_spawn=controller.took,  # a signal during initialize can then reach the agent
                trace=getattr(opts, "trace", None),
            )
    except AgentStartError as exc:
        output.error(f"agent failed to start: {exc}")
        raise StartFailed(codes.EXIT_ERROR) from None
    controller.agent = agent
    agent.on_ladder_step = controller.on_step
    output.agent_started(agent)
    if opts.auth is not None:
        await _authenticate(agent, opts.auth, output)
    try:
        return await agent.new_session(cwd)
    except (AcpError, RpcError) as exc:
        message = f"session/new failed: {exc}"
        if isinstance(exc, RpcError) and exc.code == AUTH_REQUIRED:
            message += f"\nthe agent requires authentication: pass --auth METHOD_ID; {_auth_offer(agent)}"
        output.error(message)
        raise StartFailed(
            codes.EXIT_AGENT_EXITED if isinstance(exc, AgentExitedError) else codes.EXIT_ERROR
        ) from None


async def _started(controller: Controller, starting: Awaitable[SessionHandle]) -> SessionHandle | int:
    """Run the start as its own task (so a signal can abort it); a session or an exit code."""
    startup: asyncio.Task[SessionHandle] = asyncio.ensure_future(starting)
    controller.startup = startup
    session: SessionHandle | None = None
    try:
        session = await startup
    except StartFailed as failed:
        return failed.code
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling() or controller.signum is None:  # type: ignore[union-attr]
            raise
    signum = controller.signum
    if signum is None and session is not None:
        return session
    # Aborted by a signal (or one came as the start completed): exit_code() gives 128 + signum.
    what = "Ctrl-C" if signum in (None, signal.SIGINT) else signal_name(signum)
    controller._say(controller.output.error, f"{what} while the agent was starting: aborted")
    return codes.EXIT_INTERRUPTED


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


class ReaderGoneGuard:
    """The CLI's stdout: a reader that went away (``acp-driver run … | head -1``) is handled as a
    SIGPIPE, never a traceback. The failed write is dropped, fd 1 points at /dev/null from then
    on (so every later write, rich's included, succeeds), and ``on_gone`` runs once: the
    controller cancels the turn through the ladder and the command exits 128 + SIGPIPE."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.on_gone: Callable[[], object] | None = None
        self.gone = False

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        if self.gone:
            return
        self.gone = True
        _detach([1])
        if self.on_gone is not None:
            self.on_gone()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the real stream's
        return getattr(self._stream, name)


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[ReaderGoneGuard]:
    guard = ReaderGoneGuard(sys.stdout)
    saved, sys.stdout = sys.stdout, guard
    try:
        yield guard
    finally:
        sys.stdout = saved
        if guard.gone:
            with contextlib.suppress(OSError):
                saved.flush()  # what the dead pipe refused now goes to /dev/null


def run_command(opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str) -> int:
    with _guarded_stdout() as guard:
        return asyncio.run(_run(opts, argv, cwd, prompt, guard))


async def _run(
    opts: argparse.Namespace, argv: list[str], cwd: str, prompt: str, stdout: ReaderGoneGuard
) -> int:
    output = _make_output(opts)
    reader: StdinLines | None = None

    def lines() -> StdinLines:
        nonlocal reader
        if reader is None:
            reader = StdinLines()
        return reader

    ask = _interactive() and not opts.json
    services = _services(opts, output, lines if ask else None)
    controller = Controller(output)
    stdout.on_gone = lambda: controller.on_signal(signal.SIGPIPE)
    controller.install()
    try:
        try:
            started = await _started(controller, _start(opts, argv, cwd, output, services, controller))
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
    with _guarded_stdout() as guard:
        return asyncio.run(_chat(opts, argv, cwd, guard))


async def _chat(opts: argparse.Namespace, argv: list[str], cwd: str, stdout: ReaderGoneGuard) -> int:
    output = ConsoleOutput(quiet=opts.quiet)
    reader = StdinLines()
    tty = _interactive()
    services = _services(opts, output, (lambda: reader) if tty else None)
    controller = Controller(output, chat=True)
    stdout.on_gone = lambda: controller.on_signal(signal.SIGPIPE)
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
    started = await _started(controller, _start(opts, argv, cwd, output, services, controller))
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
