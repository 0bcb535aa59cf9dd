"""A wedged v2 agent: answers ``initialize`` (2) and ``session/new``, then never answers a
``session/prompt`` (no answer, no ``user_message``, no state update) and ignores
``session/cancel``, ``$/cancel_request`` and SIGTERM. Only SIGKILL ends it."""

from __future__ import annotations

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

signal.signal(signal.SIGTERM, signal.SIG_IGN)

for msg in _acp.messages():
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if _acp.handle_setup_v2(msg, "wedged"):
        continue
    if method == "session/prompt":
        pass  # never answered
    else:
        _acp.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
