"""Refuses ``initialize`` asking for 2 with v2's ``-32022`` naming the versions it speaks
(``data.supported: [1]``), then speaks v1: answers ``initialize`` 1, ``session/new`` and each
prompt ``end_turn``."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

for msg in _acp.messages():
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        if msg["params"].get("protocolVersion") != 1:
            _acp.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": [1]},
                    },
                }
            )
        else:
            _acp.send(_acp.result(rid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}))
    elif method == "session/new":
        _acp.send(_acp.result(rid, {"sessionId": "s1"}))
    elif method == "session/prompt":
        _acp.send(_acp.result(rid, {"stopReason": "end_turn"}))
    else:
        _acp.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
