"""``LocalTerminals``: the ``terminal/*`` methods as local processes, each in its own process group.

- With ``args``, the command runs directly (``[command, *args]``, looked up on ``PATH``), no
  shell. Without ``args`` (absent or empty), a ``command`` that is a whole shell line
  (``"tail -f /dev/null"``, ``"ls | wc -l"``: it has whitespace or shell syntax and is not the
  path of a program) runs as ``SHELL -c LINE``, as the main ACP clients (Zed) do: Claude Code's
  adapters send their Bash tool's command that way. ``SHELL`` is ``bash`` when on ``PATH``
  (agents write bash), else ``/bin/sh``; ``shell=`` chooses another. ``shell_lines=False`` turns
  this off: such a line is then a program name that does not exist (``-32002``,
  ``command_not_found``, with a hint). With ``allow_shell=True`` every command runs through the
  shell: ``command`` followed by the shell-quoted ``args``.
- ``cwd`` must be absolute and resolve inside the session's roots (default: ``session.cwd``).
  This keeps the agent's commands where it was asked to work; it is **not** a sandbox: a command
  can do anything the host's user can.
- Environment: the host's environment (``inherit_env``), then ``extra_env``, then the agent's
  ``env`` (the agent wins: it could prefix the command with ``env`` anyway).
- stdin is ``/dev/null``; stdout and stderr share one pipe drained continuously. Output is kept
  up to ``outputByteLimit`` bytes (default ``default_output_byte_limit``, at most
  ``max_output_byte_limit``) by dropping the oldest bytes, cut at a UTF-8 character boundary
  (spec MUST), with ``truncated: true``. Output is decoded as UTF-8 with replacement characters
  for invalid bytes; while the command runs an incomplete trailing character is held back.
- Each process leads its own process group (``ProcessGroup``). ``kill`` sends SIGTERM to the
  whole group, SIGKILL after ``kill_grace`` seconds (on ``clock``: the loop's by default), and
  returns once the command has exited and
  no live process of the group is left; the terminal stays valid for ``output`` and
  ``wait_for_exit``. ``release`` kills the same way and forgets the id: later calls answer
  ``-32002`` (``released_terminal``).
- The exit is reported (``exitStatus``, ``wait_for_exit``) once the command exited and its
  output pipe reached EOF, or ``exit_output_grace`` seconds later when a background process
  still holds the pipe. Such leftovers stay until ``kill``/``release``.
- Every terminal remembers its owner (the turn that created it, or the session).
  ``release_owner(turn)`` releases the turn's terminals; ``release_owner(session)`` those of the
  session and of all its turns. A terminal requested for an owner already released (a cancelled
  turn) is refused with ``-32800`` and never started. ``aclose()`` releases everything and
  refuses new terminals.
- No orphans: every group is reaped (``ProcessGroup.reap``) and every live member SIGKILLed.
  On Linux each command runs under the supervisor (``ProcessGroup``, ``linger=True``): processes
  that left the group (``setsid``, daemons) are killed with it on ``kill``/``release``, and all of
  them when the host process dies. Elsewhere those are beyond a process group's reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..aio import Clock, ProcessGroup, drain_pipe
from ..core import OUTPUT_GRACE, TERM_GRACE, RequestCancelledError
from ._errors import (
    REASON_CLOSED,
    REASON_COMMAND_NOT_FOUND,
    REASON_INVALID_PARAMS,
    REASON_NOT_A_DIRECTORY,
    REASON_OWNER_ENDED,
    REASON_PERMISSION_DENIED,
    REASON_RELEASED_TERMINAL,
    REASON_SPAWN_FAILED,
    REASON_UNKNOWN_TERMINAL,
    ServiceError,
    failed,
    not_found,
    refused,
)
from ._roots import SessionLike, check_absolute, confine, resolve_roots
from ._terminal import Terminal

logger = logging.getLogger("acp_driver.services.terminals")

DEFAULT_OUTPUT_BYTE_LIMIT = 1_000_000
MAX_OUTPUT_BYTE_LIMIT = 64 * 1024 * 1024
_SHELL_CHARACTERS = frozenset(" \t\n|&;<>()$`\\\"'*?[]#~=%{}")
_REMEMBERED_RELEASED = 4096


def default_shell() -> str:
    """The shell for command lines: ``bash`` when on ``PATH`` (agents write bash), else ``/bin/sh``."""
    return shutil.which("bash") or "/bin/sh"


def is_shell_line(command: str, path: str | None = None) -> bool:
    """Whether ``command`` (sent without ``args``) is a shell line rather than a program.

    A line has whitespace or shell syntax; a program name or path (even one with a space, if it
    exists) is not a line.
    """
    if not any(c in _SHELL_CHARACTERS for c in command):
        return False
    if os.sep in command:
        return not (os.path.isfile(command) and os.access(command, os.X_OK))
    return shutil.which(command, path=path) is None


class LocalTerminals:
    """Runs the agent's ``terminal/*`` commands as local processes.

    ``allow_shell``: run every ``command`` through ``shell -c`` (off: argv is executed directly).
    ``shell_lines``: a ``command`` without ``args`` that is a whole shell line runs through
    ``shell -c`` (what Zed does; Claude Code's adapters rely on it). ``shell``: the shell for both
    (default: ``bash`` if found on ``PATH``, else ``/bin/sh``).
    ``default_output_byte_limit``: output kept when the agent gives no ``outputByteLimit``;
    ``max_output_byte_limit`` caps what an agent may ask. ``extra_env`` is added to the host's
    environment (``inherit_env``) and overridden by the agent's ``env``. ``extra_roots`` are
    directories allowed as ``cwd`` besides the session's roots.
    """

    def __init__(
        self,
        *,
        allow_shell: bool = False,
        shell_lines: bool = True,
        default_output_byte_limit: int = DEFAULT_OUTPUT_BYTE_LIMIT,
        max_output_byte_limit: int = MAX_OUTPUT_BYTE_LIMIT,
        extra_env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        extra_roots: Iterable[str | os.PathLike[str]] = (),
        shell: str | None = None,
        kill_grace: float = TERM_GRACE,
        exit_output_grace: float = OUTPUT_GRACE,
        clock: Clock | None = None,
    ) -> None:
        if default_output_byte_limit < 0 or max_output_byte_limit < 0:
            raise ValueError("output byte limits must be >= 0")
        self.allow_shell = allow_shell
        self.shell_lines = shell_lines
        self.default_output_byte_limit = min(default_output_byte_limit, max_output_byte_limit)
        self.max_output_byte_limit = max_output_byte_limit
        self.extra_env: dict[str, str] = dict(extra_env or {})
        self.inherit_env = inherit_env
        self.extra_roots: tuple[str, ...] = tuple(os.fspath(r) for r in extra_roots)
        self.shell = shell if shell is not None else default_shell()
        self.kill_grace = kill_grace
        self.exit_output_grace = exit_output_grace
        self.clock = clock
        """What ``kill_grace`` and ``exit_output_grace`` are measured on (None: the loop's time)."""
        self.terminals: dict[str, Terminal] = {}
        """Live (not yet released) terminals by id."""
        self.closed = False
        self._released: dict[str, None] = {}
        self._ended_owners: weakref.WeakSet[Any] = weakref.WeakSet()
        self._closing: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ create

    async def create(self, session: SessionLike, owner: object, params: dict[str, Any]) -> str:
        if self.closed:
            raise failed("the terminal service is closed", REASON_CLOSED)
        if self._owner_ended(owner):
            what = "the turn that asked for it" if hasattr(owner, "session") else "its session"
            raise RequestCancelledError(
                f"terminal not created: {what} was cancelled or closed", {"reason": REASON_OWNER_ENDED}
            )
        if not isinstance(params, dict):
            raise refused("params must be an object", REASON_INVALID_PARAMS)
        command = params.get("command")
        if not isinstance(command, str) or not command or "\0" in command:
            raise refused('"command" must be a non-empty string without NUL bytes', REASON_INVALID_PARAMS)
        args = params.get("args")
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
            raise refused('"args" must be an array of strings without NUL bytes', REASON_INVALID_PARAMS)
        env = self._environment(params.get("env"))
        cwd = self._cwd(session, params.get("cwd"))
        limit = self._output_limit(params.get("outputByteLimit"))

        argv = self._argv(command, args, env)
        try:
            process = ProcessGroup.spawn(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                linger=True,  # background processes stay until kill/release (still reaped then)
            )
        except OSError as exc:
            raise self._spawn_error(command, exc) from None
        terminal_id = f"term_{secrets.token_hex(8)}"
        terminal = Terminal(
            terminal_id,
            session.id,
            owner,
            process,
            argv=argv,
            cwd=cwd,
            output_byte_limit=limit,
            exit_output_grace=self.exit_output_grace,
            clock=self.clock,
        )
        # Registered before the first await: a concurrent release_owner/aclose finds it.
        self.terminals[terminal_id] = terminal
        process.on_exit(terminal._on_exit)
        stdout = process.popen.stdout
        assert stdout is not None
        try:
            terminal._transport = await drain_pipe(stdout, terminal._feed, terminal._on_eof)
        except BaseException:
            await self._release(terminal)
            raise
        if terminal.released:  # released (owner cancelled, service closed) while attaching
            terminal._transport.close()
            raise RequestCancelledError("terminal released while it was being created")
        logger.debug("terminal %s: started %s in %s (pid %d)", terminal_id, argv, cwd, process.pid)
        return terminal_id

    def _argv(self, command: str, args: list[str], env: Mapping[str, str]) -> list[str]:
        """What runs: ``[command, *args]``, or ``[shell, "-c", LINE]`` (see the class docstring)."""
        if self.allow_shell:
            line = command if not args else f"{command} {shlex.join(args)}"
            return [self.shell, "-c", line]
        if not args and self.shell_lines and is_shell_line(command, env.get("PATH")):
            return [self.shell, "-c", command]
        return [command, *args]

    def _owner_ended(self, owner: object) -> bool:
        if getattr(owner, "cancel_requested", False) is True:
            return True
        try:
            return owner in self._ended_owners
        except TypeError:
            return False

    def _environment(self, raw: object) -> dict[str, str]:
        env: dict[str, str] = dict(os.environ) if self.inherit_env else {}
        env.update(self.extra_env)
        if raw is None:
            return env
        if not isinstance(raw, list):
            raise refused('"env" must be an array of {"name", "value"} objects', REASON_INVALID_PARAMS)
        for item in raw:
            name = item.get("name") if isinstance(item, dict) else None
            value = item.get("value") if isinstance(item, dict) else None
            if (
                not isinstance(name, str)
                or not name
                or "=" in name
                or "\0" in name
                or not isinstance(value, str)
                or "\0" in value
            ):
                raise refused(
                    f'invalid "env" entry {item!r}: needs a "name" (non-empty, no "=" or NUL) and a string "value"',
                    REASON_INVALID_PARAMS,
                )
            env[name] = value
        return env

    def _cwd(self, session: SessionLike, raw: object) -> str:
        given = session.cwd if raw is None else raw
        path = check_absolute(given, "cwd")
        real, _root = confine(path, resolve_roots([*session.roots, *self.extra_roots]), what="cwd")
        if not os.path.isdir(real):
            if not os.path.exists(real):
                raise not_found(f"cwd {path} does not exist", path=path)
            raise refused(f"cwd {path} is not a directory", REASON_NOT_A_DIRECTORY, path=path)
        return real

    def _output_limit(self, raw: object) -> int:
        if raw is None:
            return self.default_output_byte_limit
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise refused(f'"outputByteLimit" must be an integer >= 0, got {raw!r}', REASON_INVALID_PARAMS)
        return min(raw, self.max_output_byte_limit)

    def _spawn_error(self, command: str, exc: OSError) -> ServiceError:
        hint = ""
        if not self.allow_shell and not self.shell_lines and any(c in _SHELL_CHARACTERS for c in command):
            hint = (
                " (commands run without a shell on this host: shell syntax is not interpreted;"
                ' pass the program as "command" and its arguments in "args")'
            )
        if exc.errno == errno.ENOENT:
            return not_found(
                f"cannot start {command!r}: command not found{hint}",
                REASON_COMMAND_NOT_FOUND,
                command=command,
            )
        if exc.errno in (errno.EACCES, errno.EPERM):
            return refused(
                f"cannot start {command!r}: permission denied{hint}",
                REASON_PERMISSION_DENIED,
                command=command,
            )
        return failed(
            f"cannot start {command!r}: {exc.strerror or exc}{hint}", REASON_SPAWN_FAILED, command=command
        )

    # ------------------------------------------------------------------ the other methods

    def get(self, session: SessionLike, terminal_id: str) -> Terminal:
        """The live terminal ``terminal_id`` of ``session``, or a ``-32002`` error."""
        terminal = self.terminals.get(terminal_id)
        if terminal is not None and terminal.session_id == session.id:
            return terminal
        if terminal_id in self._released:
            raise not_found(
                f"terminal {terminal_id} has been released", REASON_RELEASED_TERMINAL, terminalId=terminal_id
            )
        raise not_found(f"unknown terminal {terminal_id!r}", REASON_UNKNOWN_TERMINAL, terminalId=terminal_id)

    async def output(self, session: SessionLike, terminal_id: str) -> dict[str, Any]:
        return self.get(session, terminal_id).output()

    async def wait_for_exit(self, session: SessionLike, terminal_id: str) -> dict[str, Any]:
        return await self.get(session, terminal_id).wait_for_exit()

    async def kill(self, session: SessionLike, terminal_id: str) -> None:
        await self.get(session, terminal_id).stop(self.kill_grace)

    async def release(self, session: SessionLike, terminal_id: str) -> None:
        terminal = self.get(session, terminal_id)
        await self._release(terminal)

    async def release_owner(self, owner: object) -> None:
        """Kill and release every terminal of ``owner`` (for a session: also those of its turns)."""
        with contextlib.suppress(TypeError):
            self._ended_owners.add(owner)
        await self._release_all(self._owned_by(owner))

    async def kill_owner(self, owner: object) -> None:
        """Kill every terminal of ``owner`` (its turn is being cancelled) but keep them: the agent
        may still read their output, wait for their exit and release them while it cleans up."""
        await self._for_each(self._owned_by(owner), lambda t: t.stop(self.kill_grace), "killing")

    def _owned_by(self, owner: object) -> list[Terminal]:
        """The terminals ``owner`` created (for a session: also those of its turns)."""
        return [
            t
            for t in self.terminals.values()
            if t.owner is owner or getattr(t.owner, "session", None) is owner
        ]

    async def aclose(self) -> None:
        """Kill and release everything; no new terminal afterwards."""
        self.closed = True
        await self._release_all(list(self.terminals.values()))
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def _release_all(self, terminals: list[Terminal]) -> None:
        await self._for_each(terminals, self._release, "releasing")

    @staticmethod
    async def _for_each(
        terminals: list[Terminal], action: Callable[[Terminal], Awaitable[object]], doing: str
    ) -> None:
        """``action`` on every terminal at once; a failure is logged, the others go on."""
        results = await asyncio.gather(*(action(t) for t in terminals), return_exceptions=True)
        for terminal, result in zip(terminals, results, strict=True):
            if isinstance(result, BaseException):
                logger.error("%s terminal %s failed: %r", doing, terminal.id, result)

    async def _release(self, terminal: Terminal) -> None:
        """Forget ``terminal`` at once, then end it; runs to completion even if the caller is cancelled."""
        if self.terminals.get(terminal.id) is terminal:
            del self.terminals[terminal.id]
            self._released[terminal.id] = None
            if len(self._released) > _REMEMBERED_RELEASED:
                del self._released[next(iter(self._released))]
        task = terminal._close_task
        if task is None:
            task = terminal._close_task = asyncio.get_running_loop().create_task(
                terminal.close(self.kill_grace), name=f"release {terminal.id}"
            )
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        await asyncio.shield(task)

    def __repr__(self) -> str:
        return (
            f"LocalTerminals({len(self.terminals)} live, allow_shell={self.allow_shell}, "
            f"shell_lines={self.shell_lines})"
        )
