"""A stdio 'agent' that writes a line of garbage (and a blank line) before every answer.

It answers every request with ``{"method": <its method>}``, so a test can see that the relay
kept going after each malformed line."""

import json
import sys

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" in message and "method" in message:
        sys.stdout.write("this is not JSON {\n\n")
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"method": message["method"]}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
