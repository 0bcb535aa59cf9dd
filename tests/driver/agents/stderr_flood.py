"""Writes ``ACP_TEST_FLOOD_MB`` (default 100) MB to stderr in 1 MB chunks during the turn, then
answers the prompt normally (``end_turn``). A host that does not drain stderr deadlocks."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
megabytes = int(os.environ.get("ACP_TEST_FLOOD_MB", "100"))
line = b"x" * 1023 + b"\n"
block = line * 1024  # 1 MiB of 1 KiB lines
stream = _acp.messages()
while (msg := _acp.next_prompt(stream)) is not None:
    sid = msg["params"]["sessionId"]
    _acp.send(_acp.chunk(sid, "flooding stderr"))
    for _ in range(megabytes):
        view = memoryview(block)
        while view:
            view = view[os.write(2, view) :]
    _acp.eprint("flood over")
    _acp.send(_acp.chunk(sid, "done"), _acp.result(msg["id"], {"stopReason": "end_turn"}))
