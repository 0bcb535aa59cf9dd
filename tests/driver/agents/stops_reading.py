"""Answers ``initialize`` and ``session/new``, then never reads stdin again (blocked forever).

Whatever the host writes next piles up in the pipe: a big prompt fills it and the host's
writes back up (its transport pauses).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
for msg in _acp.messages():
    _acp.handle_setup(msg)
    if msg.get("method") == "session/new":
        break
_acp.eprint("not reading stdin any more")
while True:
    time.sleep(3600)
