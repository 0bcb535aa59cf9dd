"""The CLI's exit codes: one table, imported by every command (and by nothing else)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
"""The agent failed to start, or a protocol error (or an environment problem: no stdout, the
``remote`` extra missing)."""
EXIT_USAGE = 2
EXIT_AGENT_EXITED = 3
"""The agent exited (or was killed) while a turn was running, unasked."""
EXIT_AGENT_ERROR = 4
"""The agent answered the prompt with an error."""
EXIT_CHECK_FAILED = 5
"""``check``: at least one MUST rule failed (with ``--strict``: MUST, SHOULD or MAY)."""
EXIT_CHECK_INCONCLUSIVE = 6
"""``check``: nothing failed, but a MUST rule was skipped (untested): no verdict."""
EXIT_DISCONNECTED = 7
"""A remote agent's connection was lost while a turn was running (server or network gone)."""
EXIT_TIMEOUT = 124
"""``--turn-timeout`` cancelled the turn."""
EXIT_INTERRUPTED = 130
"""Ctrl-C cancelled the turn (128 + SIGINT; any signal N that ends a command gives 128 + N)."""
