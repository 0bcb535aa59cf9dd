"""Child processes in their own process group, under a supervisor: spawned, watched, killed, reaped.

- Spawned with ``start_new_session=True``: the child leads a new session and process group, so
  signals reach it and everything it started (``npx`` -> node -> native binary).
- On Linux the child runs under a small **supervisor** process (``_supervisor.py``, see
  docs/architecture.md "Process ownership"): a child subreaper between the host and the child,
  which kills every descendant of the child -- ``setsid``, double-forked and SIGTERM-ignoring
  ones included -- when the child is killed or exits (``linger=False``) or when the host asks
  (``reap``/``kill``), and when the host process dies, even by SIGKILL. The host's own process
  is left as it is (no subreaper, no signal handler). ``supervise=False`` (or
  ``ProcessGroup.supervise_default``) spawns the child directly.
- Exit is detected by waiting on the process (a pidfd on Linux, else a waiter thread), never by
  the end of its output: a grandchild may hold stdout open after the child died.
- ``terminate``/``kill`` signal the whole group; ``reap`` makes sure the child is waited for
  and no member of its group (or, supervised, no descendant at all) is left. No zombie, no orphan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..trace import TraceSink

from ..core import TERM_GRACE, TREE_WAIT
from ._clock import Clock, timeout_on
from ._stderr import exit_description
from ._supervisor_report import (
    SupervisorUnavailableError,
    abandon,
    await_first_report,
    close_stdio,
    read_first_report,
)

logger = logging.getLogger("acp_driver.process")

SUPERVISOR = Path(__file__).with_name("_supervisor.py")


def supervision_available() -> bool:
    """Whether children can run under the supervisor here (Linux, a Python interpreter, the script)."""
    return (
        sys.platform == "linux"
        and bool(sys.executable)
        and not getattr(sys, "frozen", False)  # a bundled app's executable is not a Python to run it
        and SUPERVISOR.is_file()
    )


class ProcessGroup:
    """A child process leading its own process group (under a supervisor where available).

    ``pid`` and ``pgid`` are the child's (it leads its group); ``popen`` is the process the host
    started: the supervisor when ``supervised``, else the child itself. Its stdin, stdout and
    stderr are the child's.
    """

    supervise_default: ClassVar[bool] = True
    """Whether ``spawn`` uses the supervisor when not told (it does only where available)."""
    trace: TraceSink | None = None
    """Where signals and the exit are recorded (``observe``), if anywhere."""
    clock: Clock | None = None
    """What ``reap``'s SIGTERM -> SIGKILL grace and ``wait_tree_gone`` are measured on (None:
    the event loop's time); the owner sets its own (a fake one in tests)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        *,
        child_pid: int | None = None,
        report_fd: int | None = None,
        report: bytes = b"",
    ) -> None:
        self.popen = popen
        self.supervised = report_fd is not None
        self.supervisor_pid: int | None = popen.pid if self.supervised else None
        self.pid = child_pid if child_pid is not None else popen.pid
        self.pgid = self.pid  # the child leads its group
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = loop.create_future()
        # Supervised: the supervisor exited, so nothing it watched is left. Else: the child exited.
        self._tree_gone: asyncio.Future[int] = loop.create_future() if self.supervised else self._exited
        self._exit_callbacks: list[Callable[[int], object]] = []
        self._pidfd: int | None = None
        self._report_fd = report_fd
        self._report_buf = report
        if report_fd is not None:
            os.set_blocking(report_fd, False)
            loop.add_reader(report_fd, self._read_report)
            self._read_report()
        self._watch()

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.PIPE,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        pass_fds: Sequence[int] = (),
        supervise: bool | None = None,
        linger: bool = False,
    ) -> ProcessGroup:
        """Start ``argv`` in a new session (raises ``OSError`` if it cannot start).

        ``supervise``: run it under the supervisor (default ``supervise_default``; only where
        ``supervision_available()``). ``linger``: when the child exits, leave what it started
        running until ``reap``/``kill`` (terminals); else it is killed at once (agents).
        The call blocks until the child was exec'd (supervised: a few milliseconds more, the
        supervisor's start).
        """
        if supervise is None:
            supervise = cls.supervise_default
        if supervise and supervision_available():
            try:
                return cls._spawn_supervised(argv, cwd, env, stdin, stdout, stderr, pass_fds, linger)
            except SupervisorUnavailableError as exc:
                logger.warning("cannot supervise %r (%s); starting it directly", argv[0], exc)
        popen = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
        return cls(popen)

    @classmethod
    async def aspawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.PIPE,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        pass_fds: Sequence[int] = (),
        supervise: bool | None = None,
        linger: bool = False,
    ) -> ProcessGroup:
        """``spawn`` that awaits the supervisor's start instead of blocking the event loop.

        Cancelled while the supervisor starts, it stops the supervisor (which ends the child).
        """
        if supervise is None:
            supervise = cls.supervise_default
        if supervise and supervision_available():
            popen, report_r = cls._start_supervisor(argv, cwd, env, stdin, stdout, stderr, pass_fds, linger)
            try:
                first = await await_first_report(report_r)
            except BaseException:
                abandon(popen, report_r)
                raise
            try:
                return cls._from_report(popen, report_r, first, argv)
            except SupervisorUnavailableError as exc:
                logger.warning("cannot supervise %r (%s); starting it directly", argv[0], exc)
        return cls.spawn(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=pass_fds,
            supervise=False,
        )

    @classmethod
    def _spawn_supervised(
        cls,
        argv: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        stdin: int | None,
        stdout: int | None,
        stderr: int | None,
        pass_fds: Sequence[int],
        linger: bool,
    ) -> ProcessGroup:
        popen, report_r = cls._start_supervisor(argv, cwd, env, stdin, stdout, stderr, pass_fds, linger)
        try:
            first = read_first_report(report_r)
        except BaseException:
            os.close(report_r)
            close_stdio(popen)
            with contextlib.suppress(OSError):
                popen.kill()  # the child, if it started, gets SIGKILL (its PR_SET_PDEATHSIG)
            popen.wait()
            raise
        return cls._from_report(popen, report_r, first, argv)

    @staticmethod
    def _start_supervisor(
        argv: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        stdin: int | None,
        stdout: int | None,
        stderr: int | None,
        pass_fds: Sequence[int],
        linger: bool,
    ) -> tuple[subprocess.Popen[bytes], int]:
        """Start the supervisor for ``argv``; returns it and the read end of its report pipe."""
        if not argv:
            raise ValueError("empty command")
        report_r, report_w = os.pipe()
        command = [
            sys.executable,
            "-S",
            "-I",
            str(SUPERVISOR),
            str(report_w),
            str(os.getpid()),
            "linger" if linger else "kill",
            "--",
            *argv,
        ]
        try:
            popen = subprocess.Popen(
                command,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                close_fds=True,
                pass_fds=(report_w, *pass_fds),
            )
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        return popen, report_r

    @classmethod
    def _from_report(
        cls,
        popen: subprocess.Popen[bytes],
        report_r: int,
        first: tuple[str, int, bytes],
        argv: Sequence[str],
    ) -> ProcessGroup:
        kind, value, rest = first
        if kind == "p":
            return cls(popen, child_pid=value, report_fd=report_r, report=rest)
        os.close(report_r)
        close_stdio(popen)
        popen.wait()  # it exits right after such a report
        if kind == "e":
            raise OSError(value, os.strerror(value), argv[0])
        raise SupervisorUnavailableError(value, f"the supervisor cannot start: {os.strerror(value)}")

    # ------------------------------------------------------------------ exit

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            self._watch_with_thread(loop)
            return
        self._pidfd = pidfd

        def on_readable() -> None:
            loop.remove_reader(pidfd)
            code = self.popen.wait()
            self._pidfd = None
            os.close(pidfd)
            self._process_exited(code)

        loop.add_reader(pidfd, on_readable)

    def _watch_with_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        def wait() -> None:
            code = self.popen.wait()
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(self._process_exited, code)

        threading.Thread(target=wait, name=f"wait-{self.popen.pid}", daemon=True).start()

    def _process_exited(self, code: int) -> None:
        """The process the host started exited (``code``: its return code)."""
        if not self.supervised:
            self._set_exited(code)
            return
        self._read_report()  # the supervisor's last word: the child's status
        if self._report_fd is not None:
            self._close_report()
        if not self._exited.done():
            # No report: the supervisor was killed; its child got SIGKILL (PR_SET_PDEATHSIG).
            logger.warning("supervisor of pid %d ended (%s) without a report", self.pid, code)
            self._set_exited(code)
        if not self._tree_gone.done():
            self._tree_gone.set_result(code)

    def _read_report(self) -> None:
        fd = self._report_fd
        if fd is None:
            return
        while True:
            try:
                chunk = os.read(fd, 256)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._close_report()
                break
            self._report_buf += chunk
        *lines, self._report_buf = self._report_buf.split(b"\n")
        for line in lines:
            if line.startswith(b"x "):
                self._set_exited(os.waitstatus_to_exitcode(int(line[2:])))

    def _close_report(self) -> None:
        fd = self._report_fd
        if fd is not None:
            self._report_fd = None
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def _set_exited(self, code: int) -> None:
        if self._exited.done():
            return
        self._exited.set_result(code)
        if self.trace is not None:
            self.trace.event("exit", pid=self.pid, status=code, description=exit_description(code))
        for callback in self._exit_callbacks:
            try:
                callback(code)
            except Exception:
                logger.exception("exit callback failed")

    def observe(self, trace: TraceSink, argv: Sequence[str] = ()) -> None:
        """Record in ``trace`` this process's start, every signal sent to its group, its exit."""
        self.trace = trace
        trace.event("spawn", pid=self.pid, argv=list(argv), supervised=self.supervised)
        if self.returncode is not None:  # exited while it was being set up
            trace.event(
                "exit", pid=self.pid, status=self.returncode, description=exit_description(self.returncode)
            )

    def on_exit(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(returncode)`` when the process exits (at once if it already has)."""
        if self._exited.done():
            callback(self._exited.result())
        else:
            self._exit_callbacks.append(callback)

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while running."""
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    # ------------------------------------------------------------------ signals

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to every process of the group; False if none is left.

        Supervised, SIGKILL also tells the supervisor to kill every descendant of the child, and
        ``sig`` 0 asks whether anything the child started may still run.
        """
        if self.supervised:
            if self._tree_gone.done():
                return False  # the supervisor saw every descendant die; the group id is free
            if sig == signal.SIGKILL:
                self._signal_supervisor(signal.SIGUSR1)
            elif sig == 0:
                return True
        try:
            os.killpg(self.pgid, sig)
            if sig and self.trace is not None:
                self.trace.event("signal", name=signal.Signals(sig).name, to="agent", pid=self.pgid)
            return True
        except ProcessLookupError:
            return self.supervised and sig == signal.SIGKILL
        except PermissionError:  # pragma: no cover - the group leader changed hands
            return False

    def _signal_supervisor(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:  # race-free: the pidfd names this process even once it exited
                signal.pidfd_send_signal(self._pidfd, sig)
            else:
                self.popen.send_signal(sig)

    def terminate(self) -> bool:
        return self.signal_group(signal.SIGTERM)

    def kill(self) -> bool:
        return self.signal_group(signal.SIGKILL)

    def group_alive(self) -> bool:
        """Whether any process of the group (supervised: any descendant) may still exist."""
        return self.signal_group(0)

    async def reap(self, *, term_timeout: float = TERM_GRACE) -> int:
        """End the process and its whole group: SIGTERM, then SIGKILL after ``term_timeout``.

        Supervised, also every descendant of the child. Returns the exit status. Safe to call at
        any time, any number of times.
        """
        if self.returncode is None:
            self.terminate()
            if term_timeout > 0:
                with contextlib.suppress(TimeoutError):
                    async with timeout_on(self.clock, term_timeout):
                        await self.wait()
            if self.returncode is None:
                self.kill()
        code = await self.wait()
        self._kill_stragglers()
        if self.supervised:
            await self.wait_tree_gone()
        return code

    def kill_stragglers(self) -> None:
        """The leader is gone: SIGKILL whatever of its group outlived it (grandchildren)."""
        self._kill_stragglers()

    async def wait_tree_gone(self, timeout: float = TREE_WAIT) -> None:
        """Supervised: wait until the supervisor saw the last descendant die (at once otherwise)."""
        try:
            async with timeout_on(self.clock, timeout):
                await asyncio.shield(self._tree_gone)
        except TimeoutError:
            logger.warning("supervisor of pid %d still running after %.1f s; killing it", self.pid, timeout)
            self._signal_supervisor(signal.SIGKILL)

    def _kill_stragglers(self) -> None:
        # The leader is gone; members that outlived it (grandchildren) are killed outright.
        if self.group_alive():
            self.kill()

    def __repr__(self) -> str:
        return f"ProcessGroup(pid={self.pid}, returncode={self.returncode}, supervised={self.supervised})"
