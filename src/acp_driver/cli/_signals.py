"""One rule for every command: a signal the CLI inherited ignored stays ignored.

A parent that starts the CLI with a signal ignored asks it not to be ended by that signal:
``nohup`` ignores SIGHUP, a non-interactive shell starts a background job (``cmd &``) with SIGINT
ignored, ``trap '' TERM`` in a script or a supervisor ignores SIGTERM. That is the Unix convention
(an ignored signal stays ignored across ``exec``), which shells keep themselves (POSIX ``trap``:
signals ignored on entry to a non-interactive shell cannot be trapped or reset) and Python too: it
installs no ``KeyboardInterrupt`` handler when SIGINT is inherited ignored. So every command that
takes over signals (``run``, ``chat``, ``check``, ``serve``, ``proxy``, ``agent``) takes over only those of
:func:`handled`; a signal that was not ignored at start behaves as the command documents.

The dispositions are read once, when this module is first imported: each command imports it
before it changes any disposition (``asyncio.run`` replaces only Python's own SIGINT handler,
never an ignore). Read later they would be wrong: a command ignores its signals itself on its way
out (so that a late one cannot replace its exit code by a death).

:class:`Routed` is how ``run``, ``chat``, ``serve`` and ``proxy`` take their signals over: from a handler
straight to ``SIG_IGN``, never through the default action on the way.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

INHERITED_IGNORED = frozenset(
    signum
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    if signal.getsignal(signum) is signal.SIG_IGN
)
"""The signals this process was started with ignored (of those the commands handle)."""


def handled(signals: Iterable[int]) -> tuple[int, ...]:
    """The ones of ``signals`` a command may handle: all but those it inherited ignored."""
    return tuple(signum for signum in signals if signum not in INHERITED_IGNORED)


class Routed:
    """The :func:`handled` ones of ``signals`` go to ``callback(signum)`` on ``loop`` until
    :meth:`ignore`, which ignores them from then on.

    Not ``loop.add_signal_handler``: its ``remove_signal_handler`` puts the default action back
    (SIG_DFL; for SIGINT Python's ``KeyboardInterrupt`` handler) before the caller can ignore the
    signal. One that lands in that gap kills the command, or raises out of its shutdown and
    leaves the ``KeyboardInterrupt`` handler installed, which Python replaces by SIG_DFL while it
    exits: the next signal then kills it after all. Here one ``sigaction`` takes each signal from
    the handler to ``SIG_IGN``, so there is no such gap.
    """

    def __init__(
        self, loop: AbstractEventLoop, callback: Callable[[int], object], signals: Iterable[int]
    ) -> None:
        self._loop = loop
        self._callback = callback
        self.signals = handled(signals)
        self._live = True
        for signum in self.signals:
            signal.signal(signum, self._deliver)

    def _deliver(self, signum: int, frame: FrameType | None) -> None:
        # Python runs this in the main thread between two bytecodes, wherever the loop is: hand
        # the signal to the loop (thread-safe; the loop's self-pipe wakes a select() up).
        with contextlib.suppress(RuntimeError):  # the loop is closed: the command is past its end
            self._loop.call_soon_threadsafe(self._hand_over, signum)

    def _hand_over(self, signum: int) -> None:
        if self._live:
            self._callback(signum)

    def ignore(self) -> None:
        """From now on these signals change nothing, including one delivered but not yet handed
        over to the loop (``signal.signal`` runs pending handlers first)."""
        for signum in self.signals:
            signal.signal(signum, signal.SIG_IGN)
        self._live = False
