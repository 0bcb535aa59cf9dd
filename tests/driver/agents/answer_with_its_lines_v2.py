"""A v2 agent that answers each prompt together with its whole span in one write: the answer
``{messageId}``, ``running``, two chunks and the idle ``end_turn`` -- no ``user_message``.

``ANSWER_JSON``: the answer's ``result`` instead (as JSON: ``null``, ``5``, ``"x"``,
``{"messageId": 7}``...), a malformed one."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

ANSWER = os.environ.get("ANSWER_JSON")
turns = 0

for msg in _acp.messages():
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if _acp.handle_setup_v2(msg, "one-write"):
        continue
    if method == "session/prompt":
        turns += 1
        answer = json.loads(ANSWER) if ANSWER is not None else {"messageId": f"u{turns}"}

        def chunk(text: str, turns: int = turns) -> dict:
            body = {"type": "text", "text": text}
            return _acp.update(
                "s1", {"sessionUpdate": "agent_message_chunk", "messageId": f"a{turns}", "content": body}
            )

        _acp.send(
            _acp.result(rid, answer),
            _acp.update("s1", {"sessionUpdate": "state_update", "state": "running"}),
            chunk("one "),
            chunk("two"),
            _acp.update("s1", {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
        )
    else:
        _acp.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
