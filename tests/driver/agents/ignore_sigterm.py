"""Ignores SIGTERM and never answers a prompt (nor session/cancel, nor $/cancel_request)."""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

signal.signal(signal.SIGTERM, signal.SIG_IGN)
_acp.record_pid("agent")
stream = _acp.messages()
msg = _acp.next_prompt(stream)
if msg is not None:
    _acp.send(_acp.chunk(msg["params"]["sessionId"], "thinking forever"))
    for _ in stream:
        pass  # session/cancel, $/cancel_request: ignored
while True:
    time.sleep(3600)
