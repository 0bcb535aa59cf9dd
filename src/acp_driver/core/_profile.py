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
from ._endings import IdleEnding, PromptAnswerEnding, TurnEnding
from ._requirements import V1_REQUIREMENTS, V2_REQUIREMENTS, Requirements
from ._rungs import Action, Rung
from ._shapes import V1_SHAPES, V2_SHAPES, Shapes


class TurnEnd(enum.Enum):
    """What tells a host that a prompt turn is over."""

    PROMPT_ANSWER = "prompt_answer"
    """v1: the answer to ``session/prompt`` carries the stop reason."""
    IDLE_STATE = "idle_state"
    """v2: the prompt is answered when inserted; the work it starts ends with an idle
    ``state_update`` carrying the stop reason (``core.V2Session`` follows it)."""


@dataclass(frozen=True)
class ProtocolProfile:
    """The facts of one protocol version (see the module docstring)."""

    version: int
    turn_end: TurnEnd
    stop_reasons: frozenset[str]
    error_stop_reasons: frozenset[str]
    """Stop reasons that say the turn failed (v2's ``error``): the turn resolves ``ERROR``."""
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
    info_field: str
    """Where ``initialize`` carries the agent's (and, ``client_`` prefixed in v1, the
    client's) name and version: v1 ``agentInfo``/``clientInfo``, v2 ``info`` both ways."""
    capabilities_field: str
    """Where ``initialize``'s answer carries the agent's capabilities (v1 ``agentCapabilities``)."""
    client_info_field: str
    client_capabilities_field: str
    """Where ``initialize``'s params carry the client's info and capabilities."""
    auth_login: str
    """The method that logs in with one of the agent's ``authMethods``."""
    session_capabilities_field: str
    """Where the agent's capabilities list its optional session methods."""
    baseline_session_features: frozenset[str]
    """Session methods every agent of this version has once it lists session capabilities."""
    load_capability: str | None
    """The capability flag that advertises ``session/load`` (None: listed with the others)."""
    holds_prompts: bool
    """A prompt sent while the agent works is held and inserted later (v2); v1: one turn at a time."""
    modes_are_options: bool
    """No ``session/set_mode``: a mode is the ``mode`` config option (v2)."""
    typed_option_values: bool
    """``session/set_config_option`` says which kind its value is (``type``: ``id``/``boolean``; v2)."""
    withdrawn_question_cancelled: bool
    """A permission request the agent withdraws is answered with the ``cancelled`` outcome (v2's
    schema); v1: ``-32800``."""
    cancellable_tool_calls: bool
    """A tool call may advertise ``capabilities.cancel`` (``tool_call/cancel``, v2)."""
    requirements: Requirements
    """The members the params of each method (and each prompt content block) must have."""
    ending: TurnEnding
    """How a turn's end reads on the wire, and how a relay that ends a turn itself tells the
    client ``cancelled`` (the proxy's editor)."""

    @property
    def answer_ends_turn(self) -> bool:
        """The answer to ``session/prompt`` ends the turn (v1); else it says the prompt was
        inserted, and an idle ``state_update`` ends the work (v2)."""
        return self.turn_end is TurnEnd.PROMPT_ANSWER

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

    def supports(self, capabilities: Mapping[str, Any], feature: str) -> bool:
        """Whether an agent advertising ``capabilities`` has session method ``feature``
        (``load``, ``list``, ``resume``, ``close``)."""
        if feature == "load" and self.load_capability is not None:
            return bool(capabilities.get(self.load_capability))
        listed = capabilities.get(self.session_capabilities_field)
        return isinstance(listed, dict) and (
            feature in self.baseline_session_features or listed.get(feature) is not None
        )

    def confirms_cancel(self, stop_reason: str | None) -> bool:
        """Whether a turn ending with ``stop_reason`` complied with a cancel."""
        return stop_reason == "cancelled"


V1 = ProtocolProfile(
    version=1,
    turn_end=TurnEnd.PROMPT_ANSWER,
    stop_reasons=p.STOP_REASONS,
    error_stop_reasons=frozenset(),
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
            Rung.WITHDRAW: (Action.CANCEL_REQUEST,),
            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),
            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),
            Rung.TERMINATE: (Action.TERMINATE,),
            Rung.KILL: (Action.KILL,),
        }
    ),
    shapes=V1_SHAPES,
    info_field="agentInfo",
    capabilities_field="agentCapabilities",
    client_info_field="clientInfo",
    client_capabilities_field="clientCapabilities",
    auth_login=p.AUTHENTICATE,
    session_capabilities_field="sessionCapabilities",
    baseline_session_features=frozenset(),
    load_capability="loadSession",
    holds_prompts=False,
    modes_are_options=False,
    typed_option_values=False,
    withdrawn_question_cancelled=False,
    cancellable_tool_calls=False,
    requirements=V1_REQUIREMENTS,
    ending=PromptAnswerEnding(),
)

V2 = ProtocolProfile(
    version=2,
    turn_end=TurnEnd.IDLE_STATE,
    stop_reasons=p.STOP_REASONS_V2,
    error_stop_reasons=frozenset({"error"}),
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
            Rung.WITHDRAW: (Action.CANCEL_REQUEST,),
            Rung.SESSION_CANCEL: (Action.SESSION_CANCEL,),
            Rung.CANCEL_REQUEST: (Action.CANCEL_REQUEST,),
            Rung.TERMINATE: (Action.TERMINATE,),
            Rung.KILL: (Action.KILL,),
        }
    ),
    shapes=V2_SHAPES,
    info_field="info",
    capabilities_field="capabilities",
    client_info_field="info",
    client_capabilities_field="capabilities",
    auth_login=p.AUTH_LOGIN,
    session_capabilities_field="session",
    baseline_session_features=frozenset({"list", "resume", "close"}),
    load_capability=None,
    holds_prompts=True,
    modes_are_options=True,
    typed_option_values=True,
    withdrawn_question_cancelled=True,
    cancellable_tool_calls=True,
    requirements=V2_REQUIREMENTS,
    ending=IdleEnding(),
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
