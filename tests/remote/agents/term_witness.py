"""A stdio agent that tells, at SIGTERM, whether its input had already been closed.

``python term_witness.py REPORT``: answers ``initialize`` and ``session/new``; a prompt gets one
``session/update`` and no answer, and then nothing more is read. On SIGTERM it reads what is
left of its input without waiting: an end of input means the input was closed before the
signal was sent. It writes ``stdin closed`` or ``stdin open`` to ``REPORT`` and exits 0.
"""

import json
import os
import select
import signal
import sys

report = sys.argv[1]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def on_sigterm(signum: int, frame: object) -> None:
    state = "stdin open"
    while select.select([0], [], [], 0)[0]:
        if not os.read(0, 65536):
            state = "stdin closed"
            break
    with open(report + ".tmp", "w") as f:
        f.write(state)
    os.replace(report + ".tmp", report)
    os._exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
pending = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    pending += chunk
    prompted = False
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "working\n"},
            }
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": "s1", "update": update},
                }
            )
            prompted = True
            break
    if prompted:
        break
while True:
    signal.pause()
