"""Permission policies: how a host answers ``session/request_permission``.

A policy is ``async def policy(request: PermissionRequest) -> dict`` returning the outcome object:
``{"outcome": "selected", "optionId": ...}`` (or ``{"outcome": "cancelled"}``). The driver owns
cancellation: when the turn is cancelled the policy coroutine is cancelled (the host's dialog
closes) and the agent gets ``{"outcome": "cancelled"}`` at once, as the spec requires; when the
agent itself withdraws the request with ``$/cancel_request``, the policy is cancelled and the
request is answered ``-32800`` (v1; v2: the cancelled outcome). When both happen -- a fast agent
withdraws in answer to ``session/cancel`` -- the turn's cancel decides: ``cancelled``. A
cancelled policy tells the two apart with ``request.cancelled_by_turn``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._prompt_turn import PromptTurn

CANCELLED_OUTCOME = {"outcome": "cancelled"}


@dataclass
class PermissionRequest:
    """A ``session/request_permission`` from the agent."""

    session_id: str
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False)
    turn: PromptTurn | None = field(default=None, repr=False, compare=False)
    """The turn that asked (None: the session had no turn running)."""

    @property
    def cancelled_by_turn(self) -> bool:
        """Its turn is being cancelled: a cancelled policy was cancelled by the turn (the agent
        gets the ``cancelled`` outcome), whether or not the agent withdrew the request too."""
        return self.turn is not None and self.turn.cancel_requested

    @property
    def title(self) -> str:
        title = self.tool_call.get("title")
        return title if isinstance(title, str) else str(self.tool_call.get("toolCallId", "tool call"))

    @property
    def tool_kind(self) -> str | None:
        kind = self.tool_call.get("kind")
        return kind if isinstance(kind, str) else None

    def option_of_kind(self, *kinds: str) -> str | None:
        """The id of the first option whose kind is one of ``kinds`` (in the order given)."""
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                    return str(option["optionId"])
        return None

    def select(self, option_id: str) -> dict[str, Any]:
        """The outcome selecting ``option_id``."""
        return {"outcome": "selected", "optionId": option_id}

    def allow(self) -> dict[str, Any]:
        """Select an allow option (once rather than always), or cancel if there is none."""
        option = self.option_of_kind("allow_once", "allow_always")
        return self.select(option) if option else dict(CANCELLED_OUTCOME)

    def reject(self) -> dict[str, Any]:
        """Select a reject option (once rather than always), or cancel if there is none."""
        option = self.option_of_kind("reject_once", "reject_always")
        return self.select(option) if option else dict(CANCELLED_OUTCOME)


PermissionPolicy = Callable[[PermissionRequest], Awaitable[dict[str, Any]]]


async def allow_all(request: PermissionRequest) -> dict[str, Any]:
    """Allow everything (once)."""
    return request.allow()


async def deny_all(request: PermissionRequest) -> dict[str, Any]:
    """Reject everything (once). The default policy."""
    return request.reject()


def by_tool_kind(rules: Mapping[str, str], default: str = "deny") -> PermissionPolicy:
    """Allow or deny by the tool call's kind: ``by_tool_kind({"read": "allow"}, default="deny")``."""
    for decision in (*rules.values(), default):
        if decision not in ("allow", "deny"):
            raise ValueError(f"decision must be 'allow' or 'deny', got {decision!r}")

    async def policy(request: PermissionRequest) -> dict[str, Any]:
        decision = rules.get(request.tool_kind or "other", default)
        return request.allow() if decision == "allow" else request.reject()

    return policy


def validate_outcome(outcome: Any, request: PermissionRequest) -> dict[str, Any]:
    """Check a policy's answer; an invalid one becomes a rejection (never an invalid reply)."""
    if isinstance(outcome, dict):
        kind = outcome.get("outcome")
        if kind == "cancelled":
            return dict(CANCELLED_OUTCOME)
        ids = {o.get("optionId") for o in request.options}
        if kind == "selected" and outcome.get("optionId") in ids:
            return {"outcome": "selected", "optionId": outcome["optionId"]}
    return request.reject()
