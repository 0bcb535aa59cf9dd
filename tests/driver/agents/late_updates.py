"""Answers each prompt, then keeps sending updates of the turn after the response (a peer violation).

Turn 1: a chunk (messageId m1) and a tool call ``call_1`` left in progress, the response, a
late chunk of m1, and an update of a kind v1 does not know (``x_vendor_status``: the session's, never
late). With ``ACP_TEST_LATE_MODE=same_write`` the response and the late chunk go out in a single
write (the host reads them in one chunk); ``same_write_error`` does the same with an error answer
(-32603) instead of a result; with ``delayed`` (default) the late chunk follows 0.3 s after the
response.

Turn 2 (and later): first, before anything of its own, a ``tool_call_update`` completing
``call_1`` (turn 1's tool call: late) and a chunk reusing messageId m1 (turn 2's: message ids
may be reused); then its own chunk (messageId m2) and the response ``end_turn``.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
mode = os.environ.get("ACP_TEST_LATE_MODE", "delayed")
stream = _acp.messages()
turn = 0
while (msg := _acp.next_prompt(stream)) is not None:
    turn += 1
    sid = msg["params"]["sessionId"]
    if turn == 1:
        _acp.send(
            _acp.chunk(sid, "turn 1 text", "m1"),
            _acp.update(
                sid,
                {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "t", "status": "in_progress"},
            ),
        )
        time.sleep(0.1)
        response = _acp.result(msg["id"], {"stopReason": "end_turn"})
        if mode == "same_write_error":
            response = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": "failed"}}
        late = _acp.chunk(sid, "late after turn 1", "m1")
        notice = _acp.update(sid, {"sessionUpdate": "x_vendor_status", "message": "not part of the history"})
        if mode in ("same_write", "same_write_error"):
            _acp.send(response, late, notice)
        else:
            _acp.send(response)
            time.sleep(0.3)
            _acp.send(late, notice)
    else:
        _acp.send(
            _acp.update(
                sid, {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "completed"}
            ),
            _acp.chunk(sid, "late during turn 2", "m1"),
        )
        time.sleep(0.1)
        _acp.send(_acp.chunk(sid, f"turn {turn} text", f"m{turn}"))
        time.sleep(0.1)
        _acp.send(_acp.result(msg["id"], {"stopReason": "end_turn"}))
