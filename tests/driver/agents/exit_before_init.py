"""Exits with status 5 before answering ``initialize``, explaining why on stderr."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _acp

_acp.record_pid("agent")
_acp.eprint("fatal: no API key configured")
sys.exit(5)
