"""The supervisor: a small process between the host and one child it runs (an agent, a terminal).

Started by ``ProcessGroup.spawn`` (Linux) as
``python -S -I _supervisor.py REPORT_FD HOST_PID MODE -- ARGV...``. It imports only the standard
library (nothing of acp_driver) so that it starts in a few milliseconds.

- It makes itself a **child subreaper** (``PR_SET_CHILD_SUBREAPER``): every process the child
  starts stays below it, even after ``setsid`` or a double fork (orphans are re-parented to it,
  not to init). Killing its children until it has none kills all of them.
- It asks for SIGTERM when the host dies (``PR_SET_PDEATHSIG``), SIGKILL included, and checks that
  the host was still its parent once that was set.
- The child gets its own process group (the host signals that group), SIGKILL when the supervisor
  dies (``PR_SET_PDEATHSIG``), default signal dispositions and an empty signal mask.
- The supervisor keeps none of the child's stdio: once the child is started its own stdin, stdout
  and stderr are ``/dev/null`` and every other descriptor except ``REPORT_FD`` is closed.

It reports to the host on ``REPORT_FD``, one ASCII line per event:

``p PID``
    the child started (its ``exec`` succeeded); PID leads the child's process group
``e ERRNO``
    the child could not be started (``exec``: ERRNO); the supervisor exits
``s ERRNO``
    the supervisor could not set itself up (``prctl``); nothing was started
``x STATUS``
    the child exited (``waitpid`` status). MODE ``kill`` (agents): the rest of the tree was
    killed first (or ``REPORT_WITHIN`` seconds passed), and the supervisor exits once it is. MODE ``linger`` (terminals): reported at
    once; what the child left running stays until the host asks, or until it all ended.

Signals it obeys: SIGTERM, SIGHUP, SIGINT (and the host's death): SIGTERM to the child's group,
then SIGKILL to everything after ``GRACE`` seconds (at once if the child is gone). SIGUSR1:
SIGKILL to everything now. It exits, with status 0, once it has no child left.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # the typing module, like signal's enums, costs milliseconds at startup
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable

    Prctl = Callable[[int, int], None]
else:
    import _signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE = 0.5
"""Seconds between SIGTERM to the child's group and SIGKILL to everything on a stop request."""
REPORT_WITHIN = 2.0
"""Seconds after the child's exit by which it is reported even if killing the rest is not done
(a process in uninterruptible sleep dies only when it wakes up)."""

_STOP = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT)
_HANDLED = {_signal.SIGCHLD, _signal.SIGUSR1, *_STOP}


def _prctl() -> Prctl:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def prctl(option: int, value: int) -> None:
        if libc.prctl(option, value, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")

    return prctl


def _children(me: int) -> list[int]:
    """The supervisor's children (the kernel's list; a scan of ``/proc`` if that is missing)."""
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            if int(raw[raw.rfind(b")") + 2 :].split()[1]) == me:
                found.append(int(entry))
    return found


def _kill_children(me: int) -> None:
    # Children cannot be recycled before we reap them: a pid read here is still theirs.
    for pid in _children(me):
        try:
            os.kill(pid, _signal.SIGKILL)
        except ProcessLookupError:
            pass


def _send(fd: int, line: bytes) -> None:
    try:
        os.write(fd, line)
    except OSError:
        pass  # the host is gone; carry on cleaning up


def _start_child(argv: list[str], report: int, prctl: Prctl) -> int:
    """Fork and exec ``argv``; returns its pid, or exits after reporting why it could not start."""
    me = os.getpid()
    err_r, err_w = os.pipe()  # close-on-exec: EOF means the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            prctl(PR_SET_PDEATHSIG, _signal.SIGKILL)
            if os.getppid() != me:
                os._exit(1)
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT):
                _signal.signal(sig, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_SETMASK, set())
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, b"%d" % (exc.errno or 0))
        finally:
            os._exit(127)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it first, or already exec'd
    _detach(report, err_r)
    error = b""
    while chunk := os.read(err_r, 64):
        error += chunk
    os.close(err_r)
    if error:
        os.waitpid(pid, 0)
        _send(report, b"e %s\n" % error)
        sys.exit(0)
    _send(report, b"p %d\n" % pid)
    return pid


def _detach(*keep: int) -> None:
    """Hold nothing of the child's: stdio to ``/dev/null``, every other descriptor closed."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 256))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def main(args: list[str]) -> None:
    report, host, mode = int(args[0]), int(args[1]), args[2]
    argv = args[4:]
    os.set_inheritable(report, False)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _HANDLED)
    try:
        prctl = _prctl()
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    except (OSError, AttributeError, ImportError) as exc:
        _send(report, b"s %d\n" % (getattr(exc, "errno", None) or 0))
        sys.exit(0)
    if os.getppid() != host:
        sys.exit(0)  # the host died before PR_SET_PDEATHSIG was in place: start nothing
    leader = _start_child(argv, report, prctl)
    me = os.getpid()
    status: int | None = None
    reported = False
    exited = 0.0
    kill_at: float | None = None
    while True:
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid, code = -1, 0
            if pid <= 0:
                break
            if pid == leader:
                status = code
                exited = time.monotonic()
                if mode == "linger" and kill_at is None:
                    _send(report, b"x %d\n" % status)
                    reported = True
                else:
                    kill_at = time.monotonic()  # kill the rest, then report
        if pid < 0:
            break  # no child left
        if status is not None and not reported and time.monotonic() >= exited + REPORT_WITHIN:
            _send(report, b"x %d\n" % status)
            reported = True
        if kill_at is not None and time.monotonic() >= kill_at:
            _kill_children(me)
            timeout = 0.05
        elif kill_at is not None:
            timeout = kill_at - time.monotonic()
        else:
            timeout = 3600.0
        info = _signal.sigtimedwait(_HANDLED, max(timeout, 0.0))
        sig = info.si_signo if info is not None else None
        if sig == _signal.SIGUSR1:
            kill_at = time.monotonic()
        elif sig in _STOP and kill_at is None:
            if status is None:
                try:
                    os.killpg(leader, _signal.SIGTERM)
                except OSError:
                    pass
                kill_at = time.monotonic() + GRACE
            else:
                kill_at = time.monotonic()
    if status is not None and not reported:
        _send(report, b"x %d\n" % status)


if __name__ == "__main__":
    main(sys.argv[1:])
