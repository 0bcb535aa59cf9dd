"""Dies in the middle of a turn: two chunks, then (once the host sent one more message, e.g. a
request it will wait for) "dying now" on stderr and exit status 3."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
stream = _acp.messages()
msg = _acp.next_prompt(stream)
if msg is not None:
    sid = msg["params"]["sessionId"]
    _acp.send(_acp.chunk(sid, "working 1"), _acp.chunk(sid, "working 2"))
    next(stream, None)  # the host's next message: whatever it is, it gets no answer
    _acp.eprint("dying now")
    sys.exit(3)
