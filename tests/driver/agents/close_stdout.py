"""Closes its stdout in the middle of a turn but keeps running (a wedged agent)."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
msg = _acp.next_prompt(_acp.messages())
if msg is not None:
    _acp.send(_acp.chunk(msg["params"]["sessionId"], "about to go quiet"))
    os.close(1)
    _acp.eprint("stdout closed; sleeping")
    time.sleep(60)
