"""A stdio agent that writes lone-surrogate escapes, as JavaScript's ``JSON.stringify`` does.

Every prompt gets one ``agent_message_chunk`` echoing the prompt's text with ``\\ud800`` added,
and an answer whose ``_meta`` holds ``\\udfff``. The standard library writes the escapes."""

import json
import sys

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    method, rid = message.get("method"), message.get("id")
    if rid is None or method is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
    elif method == "session/new":
        result = {"sessionId": "s1"}
    elif method == "session/prompt":
        text = message["params"]["prompt"][0]["text"] + "\ud800"
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        note = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}}
        sys.stdout.write(json.dumps(note) + "\n")
        result = {"stopReason": "end_turn", "_meta": {"note": "\udfff"}}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()
