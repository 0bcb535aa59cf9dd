"""Reads ``initialize`` and never answers it (and ignores SIGTERM)."""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

signal.signal(signal.SIGTERM, signal.SIG_IGN)
_acp.record_pid("agent")
for _ in _acp.messages():
    pass
while True:
    time.sleep(3600)
