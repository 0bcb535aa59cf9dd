"""The cancel ladder's vocabulary: its rungs, and the actions they stand for.

Apart from the ladder itself (``_ladder``) so that what only names them -- the protocol
profile an agent consults -- does not load the host's ladder and machines.
"""

from __future__ import annotations

from enum import Enum


class Rung(Enum):
    """A step of the ladder."""

    __hash__ = object.__hash__  # members are singletons: identity (C) hash, not ``hash(name)``

    WITHDRAW = "withdraw"
    """v2: ``$/cancel_request`` for a prompt still held behind other work (it never ran); the
    held ladder's only rung: unconfirmed at the budget, the host resolves the turn itself."""
    SESSION_CANCEL = "session_cancel"
    """``session/cancel`` sent; pending permission requests answered ``cancelled``."""
    CANCEL_REQUEST = "cancel_request"
    """``$/cancel_request`` sent for the ``session/prompt`` request."""
    TERMINATE = "terminate"
    """SIGTERM sent to the agent's process group."""
    KILL = "kill"
    """SIGKILL sent to the agent's process group."""


class Action(Enum):
    """What a rung does to the agent, carried out by the one ladder runner (``aio.LadderRunner``)
    against a ``PeerControl`` (a local process, a network connection, ``serve``'s backend). Which
    actions a rung stands for is the protocol profile's and the ladder owner's decision."""

    SESSION_CANCEL = "session_cancel"
    """``session/cancel`` for each session the ladder is about."""
    CANCEL_REQUEST = "cancel_request"
    """``$/cancel_request`` for each prompt the ladder is about."""
    CLOSE_INPUT = "close_input"
    """End the agent's input (a stdio agent sees EOF)."""
    TERMINATE = "terminate"
    """SIGTERM to the agent's process group (a network connection: close it gracefully)."""
    KILL = "kill"
    """SIGKILL to the agent's process group (a network connection: abort it)."""
