"""A raw v1 agent that answers a cancelled prompt ``end_turn`` and then goes on writing the old
turn's output (a chunk) and a session-wide update (a title): what ``late output fenced`` is about.
The next prompt is answered ``end_turn`` with one chunk of its own."""

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def update(sid: str, body: dict) -> None:
    send({"method": "session/update", "params": {"sessionId": sid, "update": body}})


def chunk(text: str) -> dict:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


pending = None
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        send({"id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
    elif method == "session/new":
        send({"id": msg["id"], "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        if pending is None:
            pending = msg["id"]
            update("s1", chunk("first turn"))
        else:
            update("s1", chunk("second turn"))
            send({"id": msg["id"], "result": {"stopReason": "end_turn"}})
    elif method == "session/cancel" and pending is not None:
        send({"id": pending, "result": {"stopReason": "end_turn"}})
        update("s1", chunk("late output of the first turn"))
        update("s1", {"sessionUpdate": "session_info_update", "title": "still here"})
        send({"id": "marker", "method": "_late/done", "params": {}})
