"""How a turn ends on the wire, per protocol version (a profile's ``ending``).

Read by a relay that stands between a client and an agent (``acp-driver proxy``): the agent's end
of a cancelled turn (what the cancel ladder observes, and what the client gets instead when the
agent did not say ``cancelled``), and, when the ladder ends a turn itself, the client's
``cancelled`` end: v1 answers the prompt ``{"stopReason": "cancelled"}``; v2 sends an idle
``state_update`` with that stop reason and withdraws a prompt still held (``-32800``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import protocol as p

if TYPE_CHECKING:
    from ._ladder import Observation
    from ._profile import ProtocolProfile


class TurnEnding:
    """How a turn ends in one version: reading the agent's end, and making a ``cancelled`` one."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        """(what the ladder observes, the message the client gets instead -- None: unchanged)."""
        raise NotImplementedError

    def prompt_answer(self, request_id: Any) -> dict[str, Any]:
        """The answer to a prompt of a turn ended ``cancelled`` here."""
        raise NotImplementedError

    def idle(self, sid: str) -> dict[str, Any] | None:
        """The notification that ends a session's running work ``cancelled`` (None: none)."""
        return None


class PromptAnswerEnding(TurnEnding):
    """v1: the prompt's answer carries the stop reason."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        from ._ladder import Observation, Seen  # the host's: an agent loads the profile, not this

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


class IdleEnding(TurnEnding):
    """v2: an idle ``state_update`` carries the stop reason; a held prompt is withdrawn (-32800)."""

    def read(
        self, profile: ProtocolProfile, message: dict[str, Any]
    ) -> tuple[Observation, dict[str, Any] | None]:
        from ._ladder import Observation, Seen  # the host's: an agent loads the profile, not this

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
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32800, "message": "request cancelled: the turn was cancelled"},
        }

    def idle(self, sid: str) -> dict[str, Any] | None:
        return {
            "jsonrpc": "2.0",
            "method": p.SESSION_UPDATE,
            "params": {
                "sessionId": sid,
                "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"},
            },
        }
