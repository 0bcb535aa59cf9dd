"""What every test process shares.

The tests that press Ctrl-C (SIGINT to a real CLI process) stand for a user at a terminal, where
the command runs in the foreground with SIGINT's default disposition. A test run started where
SIGINT is ignored -- a background job of a non-interactive shell (``nice pytest &`` in a CI
script), ``nohup`` -- would pass that on to every process it starts: Python then installs no
Ctrl-C handler (the Unix convention the CLI follows), and those tests would see a command that
never hears its Ctrl-C. So a test process that inherited SIGINT ignored takes Python's own
handler; a process it starts gets the default disposition back at exec, as from a terminal.
"""

from __future__ import annotations

import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
