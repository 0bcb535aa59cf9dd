"""How a turn ends for the editor, per protocol version (the profile's ``turn_end``).

The proxy reads the agent's end of a cancelled turn (what the ladder observes, and what the
editor gets instead when the agent did not say ``cancelled``) and, when the ladder ends a turn
itself, makes the editor's ``cancelled`` end: v1 answers the prompt ``{"stopReason":
"cancelled"}``; v2 sends an idle ``state_update`` with that stop reason and withdraws a prompt
still held (``-32800``).
"""

from __future__ import annotations

from typing import Any

from .. import protocol as p
from ..core import Observation, ProtocolProfile, Seen, TurnEnd


class _Ending:
    """How a turn ends for the editor in one version: reading the agent's end, making our own."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        """(what the ladder observes, the message the editor gets instead -- None: unchanged)."""
        raise NotImplementedError

    def prompt_answer(self, request_id: Any) -> dict[str, Any]:
        """The answer to a prompt of a turn ended ``cancelled`` here."""
        raise NotImplementedError

    def idle(self, sid: str) -> dict[str, Any] | None:
        """The notification that ends a session's running work ``cancelled`` (None: none)."""
        return None


class _PromptAnswerEnding(_Ending):
    """v1: the prompt's answer carries the stop reason."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        if "method" in message:
            return Observation(Seen.ANSWERED, stop_reason=None), None
        result = message.get("result")
        if result is not None:
            reason = profile.answer_stop_reason(result)
            if profile.confirms_cancel(reason):
                return Observation(Seen.ANSWERED, stop_reason=reason), None
            fixed = (
                {**result, "stopReason": "cancelled"}
                if isinstance(result, dict)
                else {"stopReason": "cancelled"}
            )
            return Observation(Seen.ANSWERED, stop_reason=reason), {**message, "result": fixed}
        error = message.get("error")
        cancelled = isinstance(error, dict) and error.get("code") == -32800
        observation = Observation(Seen.FAILED, stop_reason="cancelled" if cancelled else None)
        return observation, {"jsonrpc": "2.0", "id": message.get("id"), "result": {"stopReason": "cancelled"}}

    def prompt_answer(self, request_id: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "cancelled"}}


class _IdleEnding(_Ending):
    """v2: an idle ``state_update`` carries the stop reason; a held prompt is withdrawn (-32800)."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or update.get("sessionUpdate") != "state_update":
            failed = "error" in message
            return Observation(Seen.FAILED if failed else Seen.ANSWERED, stop_reason="cancelled"), None
        reason = profile.idle_stop_reason(update)
        if profile.confirms_cancel(reason):
            return Observation(Seen.ANSWERED, stop_reason=reason), None
        fixed = {**update, "stopReason": "cancelled"}
        assert isinstance(params, dict)
        return Observation(Seen.ANSWERED, stop_reason=reason), {
            **message,
            "params": {**params, "update": fixed},
        }

    def prompt_answer(self, request_id: Any) -> dict[str, Any]:
        return error(request_id, -32800, "request cancelled: the turn was cancelled")

    def idle(self, sid: str) -> dict[str, Any] | None:
        return {
            "jsonrpc": "2.0",
            "method": p.SESSION_UPDATE,
            "params": {
                "sessionId": sid,
                "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"},
            },
        }


ENDINGS: dict[TurnEnd, _Ending] = {
    TurnEnd.PROMPT_ANSWER: _PromptAnswerEnding(),
    TurnEnd.IDLE_STATE: _IdleEnding(),
}


def error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
