"""Asks permission and withdraws the question in the same write (``$/cancel_request`` right
behind ``session/request_permission``): the host reads the withdrawal before its policy ever
runs. Reports the answer it got as a chunk (``answer: <json>``), then ends the turn
``end_turn``. ``QUESTION_PROTOCOL`` (1 or 2, default 1): the version it speaks."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

V2 = os.environ.get("QUESTION_PROTOCOL") == "2"
QUESTION_ID = 900
stream = _acp.messages()
prompt_id = None
for msg in stream:
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        answer = (
            {"protocolVersion": 2, "capabilities": {}}
            if V2
            else {"protocolVersion": 1, "agentCapabilities": {}}
        )
        _acp.send(_acp.result(rid, answer))
    elif method == "session/new":
        _acp.send(_acp.result(rid, {"sessionId": "s1"}))
    elif method == "session/prompt":
        prompt_id = rid
        tool = {"toolCallId": "t1", "title": "Edit a file", "kind": "edit", "status": "pending"}
        params: dict = {
            "sessionId": "s1",
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
        }
        if V2:
            params.update({"title": "Edit a file", "subject": {"type": "tool_call", "toolCall": tool}})
            opening = [
                _acp.result(rid, {"messageId": "u1"}),
                _acp.update("s1", {"sessionUpdate": "state_update", "state": "running"}),
            ]
        else:
            params["toolCall"] = tool
            opening = []
        _acp.send(
            *opening,
            _acp.update("s1", {"sessionUpdate": "tool_call", **tool}),
            {"jsonrpc": "2.0", "id": QUESTION_ID, "method": "session/request_permission", "params": params},
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": QUESTION_ID}},
        )
    elif rid == QUESTION_ID and method is None:
        answer = msg.get("result", msg.get("error"))
        text = f"answer: {json.dumps(answer, sort_keys=True)}"
        if V2:
            _acp.send(
                _acp.chunk("s1", text, "a1"),
                _acp.update(
                    "s1", {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
                ),
            )
        else:
            _acp.send(_acp.chunk("s1", text), _acp.result(prompt_id, {"stopReason": "end_turn"}))
