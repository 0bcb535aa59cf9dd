"""Every wait of an escalation, named once: how long each SIGTERM -> SIGKILL (or close -> abort)
outside the cancel ladder's own schedule may take, and the one bound a cancel resolves within.

The ladder (``_ladder.py``) spends the budget ``B``: SIGKILL at ``B`` after the cancel. After
SIGKILL only the exit is left to see, and nothing can delay it for long; ``EXIT_WAIT`` bounds
that wait, so every cancel is resolved within::

    resolve_within(B) = B + EXIT_WAIT

That one number holds for every path a user sees: a turn's cancel, ``cancel("agent")`` (its
shutdown escalates on the same schedule, from the same start), ``serve``'s end of a connection,
and ``terminal/kill`` (``TERM_GRACE`` plays ``B`` there: SIGKILL at ``TERM_GRACE``). Each of
these waits runs on the owner's injected clock (``aio.Clock``).

Pure: numbers only.
"""

from __future__ import annotations

EXIT_WAIT = 5.0
"""After SIGKILL (or a network connection's abort): how long the exit may take before the cancel
is resolved ``killed`` anyway (the host's turn, ``serve``'s connection end, ``release``)."""

TERM_GRACE = 1.0
"""A SIGTERM outside the ladder (``ProcessGroup.reap``, ``terminal/kill``, an agent that closed
its output but runs on): SIGKILL this long after it. Also how long ``serve`` waits for the exit
of an agent whose output ended, to name it in the connection's end."""

SHUTDOWN_GRACE = 2.0
"""``shutdown()``: after the agent's input is closed, how long it may take to exit on its own
before SIGTERM (then ``TERM_GRACE`` to SIGKILL)."""

CLOSE_GRACE = 1.0
"""A network peer's graceful close (the ladder's TERMINATE, ``aclose``): abort this long after."""

OUTPUT_GRACE = 0.5
"""An exited process's output still held open by something it started: read for this long,
then counted as complete (terminals' ``exit_output_grace``, ``serve``'s relay, the host's
agent process)."""

TREE_WAIT = 5.0
"""Supervised: after the child's exit, how long the supervisor may take to see its last
descendant die (each was SIGKILLed) before the supervisor itself is killed."""


def resolve_within(budget: float) -> float:
    """The one bound every cancel with ladder budget ``budget`` is resolved within (see the
    module docstring)."""
    return budget + EXIT_WAIT
