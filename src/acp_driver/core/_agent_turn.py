"""A prompt turn as the agent runtime sees it: running, being cancelled, ended (fenced).

    RUNNING ---- cancel ----> CANCELLING    the handler is told to stop (task cancelled, cascade)
    RUNNING ---- end -------> ENDED         the prompt was answered
    CANCELLING - end -------> ENDED         answered ``cancelled`` (whatever the handler did)

Pairs not in ``AGENT_TURN_TRANSITIONS`` change nothing: a second cancel, a cancel after the end,
a second end. ENDED is the fence: nothing of the turn may be sent any more (spec, prompt-turn.mdx:
updates after ``session/cancel`` -- "it MUST ensure that it does so before responding to the
``session/prompt`` request").
"""

from __future__ import annotations

import enum


class AgentTurnState(enum.Enum):
    __hash__ = object.__hash__  # a transition table key: identity (C) hash, not ``hash(name)``

    RUNNING = "running"
    """The handler works; everything it sends belongs to the turn."""
    CANCELLING = "cancelling"
    """The client cancelled (``session/cancel`` or ``$/cancel_request``); the handler unwinds."""
    ENDED = "ended"
    """The prompt is answered: the turn is fenced."""


class AgentTurnEvent(enum.Enum):
    __hash__ = object.__hash__  # a transition table key: identity (C) hash, not ``hash(name)``

    CANCEL = "cancel"
    END = "end"


AGENT_TURN_TRANSITIONS: dict[tuple[AgentTurnState, AgentTurnEvent], AgentTurnState] = {
    (AgentTurnState.RUNNING, AgentTurnEvent.CANCEL): AgentTurnState.CANCELLING,
    (AgentTurnState.RUNNING, AgentTurnEvent.END): AgentTurnState.ENDED,
    (AgentTurnState.CANCELLING, AgentTurnEvent.END): AgentTurnState.ENDED,
}


class AgentTurnMachine:
    """The state of one turn on the agent side (see the module docstring)."""

    __slots__ = ("cancel_reason", "state")

    def __init__(self) -> None:
        self.state = AgentTurnState.RUNNING
        self.cancel_reason: str | None = None
        """Why the turn was cancelled (None: it was not)."""

    def feed(self, event: AgentTurnEvent, reason: str | None = None) -> bool:
        """Apply ``event``; True if it changed the state."""
        after = AGENT_TURN_TRANSITIONS.get((self.state, event))
        if after is None:
            return False
        if event is AgentTurnEvent.CANCEL:
            self.cancel_reason = reason
        self.state = after
        return True

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    @property
    def ended(self) -> bool:
        return self.state is AgentTurnState.ENDED
