"""What carries an agent's connection for the host, and what the cancel ladder may do to it.

An ``AgentHandle`` owns its connection and *composes* one ``Peer``: a local process
(``ProcessPeer``, from ``launch``) or a network connection (``NetworkPeer``, from ``connect``).
The handle does what every agent needs (``initialize``, sessions, cancel scopes, shutdown); the
peer does what differs (how the agent ends, what its end means, which error names it).

``HostControl`` is the host's ``aio.PeerControl``: the protocol's cancels go on the connection,
the ladder's last rungs to the peer (SIGTERM/SIGKILL of the process group, or a graceful close
and an abort of the network connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .. import protocol as p
from ..core import AcpError, RequestId
from ._errors import AgentExitedError

if TYPE_CHECKING:
    from ._agent import AgentHandle


class Peer(Protocol):
    """A local process or a network connection carrying one agent's connection."""

    remote: bool
    """Reached over a network: a lost connection resolves turns ``disconnected``."""

    @property
    def where(self) -> str:
        """Where the agent runs, for people: ``pid 1234``, or the URL."""

    @property
    def returncode(self) -> int | None:
        """The agent's exit status (None while it runs, and always for a network peer)."""

    def attach(self, agent: AgentHandle) -> None:
        """Start reporting to ``agent`` (its exit, its output's end) and serve its connection."""

    def close_input(self) -> None:
        """End the agent's input (EOF on stdin; a network connection: close it gracefully)."""

    def terminate(self) -> None:
        """SIGTERM to the process group; a network connection: close it gracefully."""

    def kill(self) -> None:
        """SIGKILL to the process group; a network connection: abort it."""

    async def shutdown(self, grace: float, term_grace: float) -> tuple[int, str]:
        """The connection is closed: end the agent politely within ``grace``, then for good (a
        process: SIGTERM, SIGKILL ``term_grace`` later). Returns (exit status, what happened)."""

    async def kill_now(self) -> tuple[int, str]:
        """End the agent at once. Returns (exit status, what happened)."""

    def final_reason(self, reason: str) -> str:
        """The reason every later error names, from ``reason`` (adds stderr, the URL...)."""

    async def release(self) -> None:
        """After the connection closed: nothing of the agent is left here (reaped, closed)."""

    def error(self, message: str) -> AgentExitedError:
        """The error for a request that cannot be answered any more."""


class HostControl:
    """``aio.PeerControl`` for one agent on the host (see the module docstring)."""

    def __init__(self, agent: AgentHandle) -> None:
        self.agent = agent

    def cancel_session(self, session_id: str) -> None:
        conn = self.agent.connection
        if conn.is_open:
            # Never wait for the pipe here: an agent that stopped reading must not stall the ladder.
            try:
                conn.notify_nowait(p.SESSION_CANCEL, {"sessionId": session_id})
            except AcpError:
                pass  # the write side closed underneath: the ladder's next rung follows

    def cancel_request(self, request_id: RequestId) -> None:
        self.agent.connection.cancel_request(request_id)

    def close_input(self) -> None:
        self.agent.peer.close_input()

    def terminate(self) -> None:
        self.agent.signalled = True
        self.agent.peer.terminate()

    def kill(self) -> None:
        self.agent.signalled = True
        self.agent.peer.kill()
