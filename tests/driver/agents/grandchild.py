"""Starts a grandchild (``sleep 60``) that inherits its stdout, then exits 0 mid-turn.

The grandchild keeps the agent's stdout open: the host must not wait for its EOF. Its pid goes
to the pid file (``grandchild <pid>``) and to stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
msg = _acp.next_prompt(_acp.messages())
if msg is not None:
    _acp.send(_acp.chunk(msg["params"]["sessionId"], "spawning a helper"))
    helper = subprocess.Popen(["sleep", "60"])  # inherits stdin, stdout, stderr and our group
    _acp.record_pid("grandchild", helper.pid)
    _acp.eprint(f"grandchild {helper.pid} started; exiting")
    os._exit(0)
