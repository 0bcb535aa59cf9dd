"""Answers ``initialize`` with protocol version 99 (``ACP_TEST_VERSION`` overrides), then serves
until stdin ends."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
version = json.loads(os.environ.get("ACP_TEST_VERSION", "99"))
for msg in _acp.messages():
    _acp.handle_setup(msg, version=version)
