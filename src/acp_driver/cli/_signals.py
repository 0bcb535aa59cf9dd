"""One rule for every command: a signal the CLI inherited ignored stays ignored.

A parent that starts the CLI with a signal ignored asks it not to be ended by that signal:
``nohup`` ignores SIGHUP, a non-interactive shell starts a background job (``cmd &``) with SIGINT
ignored, ``trap '' TERM`` in a script or a supervisor ignores SIGTERM. That is the Unix convention
(an ignored signal stays ignored across ``exec``), which shells keep themselves (POSIX ``trap``:
signals ignored on entry to a non-interactive shell cannot be trapped or reset) and Python too: it
installs no ``KeyboardInterrupt`` handler when SIGINT is inherited ignored. So every command that
takes over signals (``run``, ``chat``, ``check``, ``serve``, ``agent``) takes over only those of
:func:`handled`; a signal that was not ignored at start behaves as the command documents.

The dispositions are read once, when this module is first imported: each command imports it
before it changes any disposition (``asyncio.run`` replaces only Python's own SIGINT handler,
never an ignore). Read later they would be wrong: a command ignores its signals itself on its way
out (so that a late one cannot replace its exit code by a death).
"""

from __future__ import annotations

import signal
from collections.abc import Iterable

INHERITED_IGNORED = frozenset(
    signum
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    if signal.getsignal(signum) is signal.SIG_IGN
)
"""The signals this process was started with ignored (of those the commands handle)."""


def handled(signals: Iterable[int]) -> tuple[int, ...]:
    """The ones of ``signals`` a command may handle: all but those it inherited ignored."""
    return tuple(signum for signum in signals if signum not in INHERITED_IGNORED)
