"""A v1 agent that answers ``initialize`` with the client's own ``protocolVersion`` (as the
official Python SDK's echo example, fast-agent-acp and gptme-acp do) but v1's field names
(``agentCapabilities``/``agentInfo``), then speaks v1: each prompt streams three chunks (no
``messageId``) and is answered ``end_turn``.

``ECHO_SHAPELESS=1``: the answer carries no capabilities or info at all (nothing in its shape
says v1): only the first prompt's v1 answer (a ``stopReason``, no ``messageId``) gives it away.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

SHAPELESS = os.environ.get("ECHO_SHAPELESS") == "1"

for msg in _acp.messages():
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        answer = {"protocolVersion": msg["params"].get("protocolVersion"), "authMethods": []}
        if not SHAPELESS:
            answer["agentCapabilities"] = {"loadSession": False}
            answer["agentInfo"] = {"name": "echoes-version", "version": "0.1"}
        _acp.send(_acp.result(rid, answer))
    elif method == "session/new":
        _acp.send(_acp.result(rid, {"sessionId": "s1"}))
    elif method == "session/prompt":
        sid = msg["params"]["sessionId"]
        chunks = [
            _acp.update(
                sid,
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"chunk {i}\n"}},
            )
            for i in range(1, 4)
        ]
        _acp.send(*chunks, _acp.result(rid, {"stopReason": "end_turn"}))
    else:
        _acp.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
