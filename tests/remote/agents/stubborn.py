"""A stdio agent that ignores ``session/cancel`` and one more rung of the ladder.

``python stubborn.py cancel-request``: answers a prompt ``cancelled`` only on a ``$/cancel_request``
for it; exits at the end of its input.
``python stubborn.py deaf``: never answers a prompt, and stays alive after the end of its input
(only a signal ends it; SIGTERM does).
Each prompt gets one ``session/update`` at once, so a client can see the turn running.
"""

import json
import sys
import time

mode = sys.argv[1]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


prompts = set()
for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        prompts.add(rid)
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "working\n"}}
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}})
    elif method == "$/cancel_request" and mode == "cancel-request" and params.get("requestId") in prompts:
        prompts.discard(params["requestId"])
        send({"jsonrpc": "2.0", "id": params["requestId"], "result": {"stopReason": "cancelled"}})
if mode == "deaf":
    while True:
        time.sleep(60)
