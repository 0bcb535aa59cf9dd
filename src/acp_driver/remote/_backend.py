"""What sits behind a served connection: the one seam between the network front-ends and an agent.

The WebSocket and Streamable HTTP front-ends never learn whether the agent is a subprocess
(``_relay.SubprocessBackend``: bytes relayed to its stdin/stdout) or an ``Agent`` served in this
process (``_inprocess.InProcessBackend``: an ``AgentRuntime`` on a ``Connection``). Both offer
the same few calls, which is also everything the cancel ladder needs:

- ``send(text)``: one message (its JSON text, no newline) to the agent;
- messages from the agent go to the ``deliver`` callback given to ``start``, each as its JSON
  text (no newline), or a ``core.OversizedLine`` for one dropped for its size; ``gone`` is called
  once when the agent can send no more (it exited, or closed its output);
- ``pause_output`` / ``resume_output``: stop and restart taking the agent's messages (flow
  control: a stdio agent then blocks on its full stdout pipe; an in-process one cannot be paused);
- the ladder's last rungs: ``close_input`` (the agent sees end of input), ``terminate`` (SIGTERM
  to its process group / close the runtime's connection), ``kill`` (SIGKILL / cancel its tasks);
- ``wait_exited`` and ``release``: the agent is gone, then nothing of it is left (reaped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from ..core import OversizedLine

if TYPE_CHECKING:
    from ..trace import TraceSink

Deliver = Callable[[bytes | OversizedLine], None]


class Backend(Protocol):
    """An agent behind one served connection (see the module docstring)."""

    @property
    def pid(self) -> int | None:
        """The agent's process id (None in-process)."""

    @property
    def exited(self) -> bool:
        """Whether the agent is gone (process exited / runtime connection closed)."""

    def start(self, deliver: Deliver, gone: Callable[[], None]) -> None:
        """Start passing the agent's messages to ``deliver``; ``gone()`` once when it ends."""

    def send(self, text: bytes) -> None:
        """One message to the agent (its JSON text, no newline). Dropped once the input is closed."""

    @property
    def send_backlog(self) -> int:
        """Bytes written but not yet taken by the agent."""

    def pause_output(self) -> None:
        """Stop taking the agent's messages until ``resume_output`` (idempotent; may be a no-op)."""

    def resume_output(self) -> None:
        """Take the agent's messages again (idempotent)."""

    def close_input(self) -> None:
        """End the agent's input (a stdio agent sees EOF on stdin)."""

    def terminate(self) -> None:
        """Ask the agent to end now (SIGTERM to its process group)."""

    def kill(self) -> None:
        """End the agent outright (SIGKILL to its process group)."""

    async def wait_exited(self) -> None:
        """Return once the agent is gone."""

    async def release(self) -> None:
        """After the exit: reap what is left (group stragglers, stderr), log how it ended."""

    def describe(self) -> str:
        """How the agent ended and its last stderr lines, for logs."""

    def observe(self, trace: TraceSink) -> None:
        """Record the agent's process in ``trace``: signals sent to it, its exit (a no-op in-process)."""


BackendFactory = Callable[[str], Awaitable[Backend]]
"""Starts the agent for a new connection (its argument: the connection's name, for logs)."""
