"""An agent that writes what the test tells it to: the host side of the fuzzers.

- ``session/prompt``: the prompt's first text block is hex; its bytes are written to stdout as
  they are (any lines at all), then the prompt is answered ``end_turn``.
- ``ACP_TEST_FUZZ_START`` (hex): written before anything else -- before ``initialize`` is even
  read; with ``ACP_TEST_FUZZ_THEN=hang`` the agent then reads on but never answers, with
  ``exit`` it exits (status 3).
- Everything else: ``initialize``/``session/new`` answered as usual; other requests get -32601.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp


def messages() -> Iterator[dict[str, Any]]:
    """The host's messages; what is not one (a batch of error replies...) is skipped."""
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            yield msg


_acp.record_pid("agent")
start = os.environ.get("ACP_TEST_FUZZ_START")
if start:
    _acp.write_raw(bytes.fromhex(start))
    if os.environ.get("ACP_TEST_FUZZ_THEN") == "exit":
        sys.exit(3)
    if os.environ.get("ACP_TEST_FUZZ_THEN") == "hang":
        for _ in messages():
            pass
        while True:
            time.sleep(3600)

for msg in messages():
    if _acp.handle_setup(msg):
        continue
    method = msg.get("method")
    if method == "session/prompt":
        _acp.write_raw(bytes.fromhex(msg["params"]["prompt"][0]["text"]))
        _acp.send(_acp.result(msg["id"], {"stopReason": "end_turn"}))
    elif method is not None and "id" in msg:
        _acp.send(
            {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        )
