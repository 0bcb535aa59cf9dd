"""The protocol profile: what one ACP version means for a connection, fixed at ``initialize``.

One connection speaks one version. Everything that differs between versions is a field of the
``ProtocolProfile`` chosen there (``profile_for``), and the code that would otherwise assume a
version asks the profile instead:

- **what ends a turn** (``turn_end``): v1, the answer to ``session/prompt`` (its stop reason);
  v2, the first idle ``state_update`` after the prompt was inserted (the answer only says it
  was inserted);
- **what confirms a cancel** (``confirms_cancel``): a turn that ends with stop reason
  ``cancelled`` (v1 the prompt's answer, or ``-32800`` on it; v2 the idle's);
- **which methods and update kinds exist** (``agent_methods``, ``client_methods``,
  ``turn_updates``, ``session_updates``, ``stop_reasons``);
- **what each rung of the cancel ladder does on the wire** (``rung_actions``);
- **what a client's params must hold** (``requirements``, from the version's schema).

Pure data: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .. import protocol as p
from ._requirements import V1_REQUIREMENTS, V2_REQUIREMENTS, Requirements
from ._rungs import Action, Rung
from ._shapes import V1_SHAPES, V2_SHAPES, Shapes


class TurnEnd(enum.Enum):
    """What tells a host that a prompt turn is over."""

    PROMPT_ANSWER = "prompt_answer"
    """v1: the answer to ``session/prompt`` carries the stop reason."""
    IDLE_STATE = "idle_state"
    """v2: the prompt is answered when inserted; the work it starts ends with an idle
    ``state_update`` carrying the stop reason (``core.SessionSpans`` follows it)."""


@dataclass(frozen=True)
class ProtocolProfile:
    """The facts of one protocol version (see the module docstring)."""

    version: int
    turn_end: TurnEnd
    stop_reasons: frozenset[str]
    turn_updates: frozenset[str]
    """``sessionUpdate`` kinds that belong to the running turn."""
    session_updates: frozenset[str]
    """``sessionUpdate`` kinds about the session, valid at any time."""
    agent_methods: frozenset[str]
    """Requests and notifications a client may send an agent."""
    client_methods: frozenset[str]
    """Requests and notifications an agent may send a client."""
    rung_actions: Mapping[Rung, tuple[Action, ...]]
    """What a host does to the agent at each rung of the cancel ladder."""
    shapes: Shapes
    """How an agent writes its chunks, tool calls, plans and permission questions."""
    requirements: Requirements
    """The members the params of each method (and each prompt content block) must have."""

    def answer_stop_reason(self, answer: Any) -> str | None:
        """The stop reason a ``session/prompt`` answer ends the turn with (None: not a valid
        ending answer for this version)."""
        if self.turn_end is TurnEnd.PROMPT_ANSWER and isinstance(answer, dict):
            reason = answer.get("stopReason")
            if isinstance(reason, str) and reason in self.stop_reasons:
                return reason
        return None

    def idle_stop_reason(self, update: Any) -> str | None:
        """v2: the stop reason of an idle ``state_update`` (None when it reports none; a
        malformed one counts as none, as the schema says)."""
        reason = update.get("stopReason") if isinstance(update, dict) else None
        if isinstance(reason, str) and (reason in self.stop_reasons or reason.startswith("_")):
            return reason
        return None

    def confirms_cancel(self, stop_reason: str | None) -> bool:
        """Whether a turn ending with ``stop_reason`` complied with a cancel."""
        return stop_reason == "cancelled"


V1 = ProtocolProfile(
    version=1,
    turn_end=TurnEnd.PROMPT_ANSWER,
    stop_reasons=p.STOP_REASONS,
    turn_updates=p.TURN_UPDATES,
    session_updates=p.SESSION_WIDE_UPDATES,
    agent_methods=frozenset(
        {
            p.INITIALIZE,
            p.AUTHENTICATE,
            p.LOGOUT,
            p.SESSION_NEW,
            p.SESSION_LOAD,
            p.SESSION_LIST,
            p.SESSION_RESUME,
            p.SESSION_CLOSE,
            p.SESSION_DELETE,
            p.SESSION_SET_MODE,
            p.SESSION_SET_CONFIG_OPTION,
            p.SESSION_PROMPT,
            p.SESSION_CANCEL,
            p.CANCEL_REQUEST,
        }
    ),
    client_methods=frozenset(
        {
            p.SESSION_UPDATE,
            p.SESSION_REQUEST_PERMISSION,
            p.FS_READ_TEXT_FILE,
            p.FS_WRITE_TEXT_FILE,
            p.TERMINAL_CREATE,
            p.TERMINAL_OUTPUT,
            p.TERMINAL_WAIT_FOR_EXIT,
            p.TERMINAL_KILL,
            p.TERMINAL_RELEASE,
            p.CANCEL_REQUEST,
        }
    ),
    rung_actions=MappingProxyType(
        {
            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),
            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),
            Rung.TERMINATE: (Action.TERMINATE,),
            Rung.KILL: (Action.KILL,),
        }
    ),
    shapes=V1_SHAPES,
    requirements=V1_REQUIREMENTS,
)

V2 = ProtocolProfile(
    version=2,
    turn_end=TurnEnd.IDLE_STATE,
    stop_reasons=p.STOP_REASONS_V2,
    turn_updates=p.TURN_UPDATES_V2,
    session_updates=p.SESSION_WIDE_UPDATES_V2,
    agent_methods=frozenset(
        {
            p.INITIALIZE,
            p.AUTH_LOGIN,
            p.AUTH_LOGOUT,
            p.SESSION_NEW,
            p.SESSION_LIST,
            p.SESSION_RESUME,
            p.SESSION_CLOSE,
            p.SESSION_DELETE,
            p.SESSION_SET_CONFIG_OPTION,
            p.SESSION_PROMPT,
            p.SESSION_CANCEL,
            p.TOOL_CALL_CANCEL,
            p.TERMINAL_CANCEL,
            p.CANCEL_REQUEST,
        }
    ),
    client_methods=frozenset(
        {
            p.SESSION_UPDATE,
            p.SESSION_REQUEST_PERMISSION,
            p.ELICITATION_CREATE,
            p.ELICITATION_COMPLETE,
            p.CANCEL_REQUEST,
        }
    ),
    # The middle rung withdraws the prompts still held (``$/cancel_request``): the prompt of a
    # running turn was answered at insertion, there is nothing left to cancel of it.
    rung_actions=MappingProxyType(
        {
            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),
            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),
            Rung.TERMINATE: (Action.TERMINATE,),
            Rung.KILL: (Action.KILL,),
        }
    ),
    shapes=V2_SHAPES,
    requirements=V2_REQUIREMENTS,
)

PROFILES: Mapping[int, ProtocolProfile] = MappingProxyType({1: V1, 2: V2})
"""Every version this package speaks, by number."""

LATEST = max(PROFILES)


def profile_for(version: int) -> ProtocolProfile:
    """The profile of ``version``; ``KeyError`` for a version this package does not speak."""
    return PROFILES[version]


def negotiate(requested: int, spoken: Collection[int] = tuple(PROFILES)) -> ProtocolProfile:
    """The version an agent answers a client that asked for ``requested``: that one if spoken,
    else the highest spoken below it (the v2 schema's rule; v1 says "the latest it supports",
    which is the same for any client asking a version above ours); a client asking below every
    version (0, negative) gets the oldest, 1 -- never its own 0 back, and never an error a
    v1-era client would not expect."""
    below = [v for v in spoken if v <= requested]
    return PROFILES[max(below) if below else min(spoken)]
