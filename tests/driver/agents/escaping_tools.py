"""Starts tools that leave its process group, then ignores cancel, SIGTERM and stdin EOF.

Like the Claude Code adapters (Bash tools in a session of their own) and codex-acp (lives on
after stdin EOF). On ``session/prompt`` it starts two tools, both ignoring SIGTERM:

- ``setsid``: a child in a new session;
- ``daemon``: a double-forked grandchild in a new session (an orphan from the start).

Each appends ``<role> <pid>`` to ``ACP_TEST_PIDFILE`` once it ignores SIGTERM. Then the agent
sends a chunk and never answers. ``escaping_tools.py --tools PREFIX`` only starts the tools
(roles ``PREFIX-setsid``, ``PREFIX-daemon``, and ``PREFIX`` for itself) and sleeps: a terminal
command that does the same; with ``--exit`` after PREFIX it exits 0 once they started.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp


def start_tool(role: str, *, double_fork: bool) -> None:
    pid = os.fork()
    if pid:
        if double_fork:
            os.waitpid(pid, 0)  # the middle process exits at once: the tool is orphaned
        return
    try:
        os.setsid()
        if double_fork and os.fork():
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        _acp.record_pid(role)
        while True:
            time.sleep(3600)
    finally:
        os._exit(0)


def start_tools(prefix: str) -> None:
    start_tool(f"{prefix}setsid", double_fork=False)
    start_tool(f"{prefix}daemon", double_fork=True)


signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[1:2] == ["--tools"]:
    _acp.record_pid(sys.argv[2])
    start_tools(f"{sys.argv[2]}-")
    if sys.argv[3:4] == ["--exit"]:
        roles = {f"{sys.argv[2]}-setsid", f"{sys.argv[2]}-daemon"}
        while not roles <= set(Path(os.environ["ACP_TEST_PIDFILE"]).read_text().split()):
            time.sleep(0.01)
        sys.exit(0)
else:
    _acp.record_pid("agent")
    stream = _acp.messages()
    msg = _acp.next_prompt(stream)
    if msg is not None:
        start_tools("")
        _acp.send(_acp.chunk(msg["params"]["sessionId"], "tools started"))
        for _ in stream:
            pass  # session/cancel, $/cancel_request: ignored; stdin EOF: ignored too
while True:
    time.sleep(3600)
