"""The CLI's stdout: what happens when nothing can be written to it any more.

- A reader that went away (``acp-driver run … | head -1``: ``EPIPE``) is a SIGPIPE, never a
  traceback: the command ends as a signal ends it, exit 128 + SIGPIPE.
- Any other failure of a write (``> /dev/full``: ``ENOSPC``; ``EIO``) ends the command the same
  way, with one line on stderr naming the error, exit 1.

Either way the failed write is dropped and fd 1 points at /dev/null from then on, so every later
write (rich's included) succeeds while the turn is cancelled and the agent reaped. A stdout that
is closed before the command starts (``>&-``) is refused up front (see ``_main``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any

from ._codes import EXIT_ERROR
from ._controller import detach


class StdoutGuard:
    """Wraps ``sys.stdout``; ``on_gone()`` runs once for a reader gone, ``on_failed(why)`` once
    for any other write error (when set: else ``run_guarded`` reports it at the end)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.on_gone: Callable[[], object] | None = None
        self.on_failed: Callable[[str], object] | None = None
        self.gone = False
        """A write failed: fd 1 is /dev/null from then on."""
        self.failure: str | None = None
        """Why, for a failure that is not a reader gone."""
        self.handled = False
        """A callback took the failure (the command's exit code says it)."""

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            self._broken(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._broken(exc)

    def _broken(self, exc: OSError) -> None:
        if self.gone:
            return
        self.gone = True
        detach([1])
        if isinstance(exc, BrokenPipeError):
            if self.on_gone is not None:
                self.handled = True
                self.on_gone()
            return
        self.failure = f"cannot write to stdout: {exc.strerror or exc}"
        if self.on_failed is not None:
            self.handled = True
            self.on_failed(self.failure)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the real stream's
        return getattr(self._stream, name)


def run_guarded(command: Callable[[StdoutGuard], int]) -> int:
    """``command(guard)`` with ``sys.stdout`` guarded, then flushed: a failure no callback took
    (one only the last flush finds, or a command without callbacks) ends the command here: exit 1
    with its reason on stderr, or 128 + SIGPIPE for a reader gone."""
    guard = StdoutGuard(sys.stdout)
    saved, sys.stdout = sys.stdout, guard
    try:
        code = command(guard)
        guard.on_gone = guard.on_failed = None  # the command is over: nothing left to stop
        guard.flush()
    finally:
        sys.stdout = saved
        if guard.gone:
            with contextlib.suppress(OSError, ValueError):
                saved.flush()  # what the dead stream refused now goes to /dev/null
    if not guard.gone or guard.handled:
        return code
    if guard.failure is None:
        return 128 + signal.SIGPIPE
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"acp-driver: error: {guard.failure}\n")
    return EXIT_ERROR
