"""What the editor opened, kept so that a respawned agent can be brought back to it.

The proxy records the editor's ``initialize`` (replayed to a new agent), what the agent answered
it (its capabilities say how a session can be re-opened), and every session the editor holds
open with the parameters it opened it with (``cwd``, ``mcpServers``, ``additionalDirectories``).
After a respawn each session is re-opened under the same id -- ``session/resume`` where the agent
advertises it (v2: always), else ``session/load`` (whose replay the editor already has: fenced) --
or, when it cannot be, recorded as lost with the reason, which every later request for it gets.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import protocol as p
from ..core import ProtocolProfile
from ..net import id_key, session_id_of

_OPENING = (p.SESSION_NEW, p.SESSION_LOAD, p.SESSION_RESUME)
_KEPT = ("cwd", "mcpServers", "additionalDirectories")
"""The parameters of an opening that re-open the session."""


@dataclass
class SessionBook:
    """The editor's side of the connection, as a new agent must see it again."""

    initialize: dict[str, Any] | None = None
    """The editor's ``initialize`` params."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """``agentCapabilities`` of the last ``initialize`` answer."""
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Open sessions: id -> the params that re-open it."""
    lost: dict[str, str] = field(default_factory=dict)
    """Sessions that could not be re-opened: id -> why."""
    _opening: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def from_editor(self, message: dict[str, Any]) -> None:
        """A request or notification of the editor's."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return
        key = id_key(message.get("id"))
        if method == p.INITIALIZE:
            self.initialize = params
            if key is not None:
                self._opening[key] = (method, {})
        elif method in _OPENING:
            if key is not None:
                self._opening[key] = (method, {k: params[k] for k in _KEPT if k in params})
                sid = params.get("sessionId")
                if isinstance(sid, str):
                    self._opening[key][1]["sessionId"] = sid
        elif method == p.SESSION_CLOSE:
            sid = session_id_of(message)
            if sid is not None:
                self.sessions.pop(sid, None)

    def answered(self, key: str, message: dict[str, Any]) -> None:
        """The agent answered request ``key`` (of the editor's, or the proxy's replay)."""
        opening = self._opening.pop(key, None)
        if opening is None or "result" not in message:
            return
        if opening[0] == p.INITIALIZE:
            result = message.get("result")
            caps = result.get("agentCapabilities") if isinstance(result, dict) else None
            self.capabilities = caps if isinstance(caps, dict) else {}
            return
        params = dict(opening[1])
        sid = params.pop("sessionId", None) or session_id_of(message)
        if isinstance(sid, str):
            self.sessions[sid] = params
            self.lost.pop(sid, None)

    def reopen_method(self, profile: ProtocolProfile) -> str | None:
        """How the agent re-opens a session, by its capabilities (None: it cannot)."""
        caps = self.capabilities
        session_caps = caps.get("sessionCapabilities")
        if isinstance(session_caps, dict) and "resume" in session_caps:
            return p.SESSION_RESUME
        if caps.get("loadSession") is True and p.SESSION_LOAD in profile.agent_methods:
            return p.SESSION_LOAD
        if p.SESSION_LOAD not in profile.agent_methods and p.SESSION_RESUME in profile.agent_methods:
            return p.SESSION_RESUME  # v2: resume is every agent's
        return None

    def lose(self, sid: str, why: str) -> None:
        self.sessions.pop(sid, None)
        self.lost[sid] = why


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer the proxy makes itself (to the editor or to the agent)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
