"""The bundled reference agent's command line, for hosts and tests."""

from __future__ import annotations

import sys


def reference_agent_argv(*options: str) -> list[str]:
    """The command that runs the bundled reference agent (``acp-driver agent``) with this
    Python, whatever ``PATH`` holds: ``launch(reference_agent_argv())``, or
    ``reference_agent_argv("--behavior", "ignore-cancel")`` for one that misbehaves."""
    return [sys.executable, "-m", "acp_driver", "agent", *options]
