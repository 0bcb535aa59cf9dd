"""What a clean end of the CLI looks like on stderr: no Python traceback, no asyncio report."""

from __future__ import annotations

NOT_CLEAN = (
    "Traceback (most recent call last)",
    "exception was never retrieved",
    "Exception in callback",
    "Task was destroyed but it is pending",
    "Exception ignored",
)


def assert_clean(stderr: str) -> None:
    """Fail, quoting stderr, if it holds a traceback or an asyncio report of a lost exception."""
    found = [marker for marker in NOT_CLEAN if marker in stderr]
    assert not found, f"{found} on stderr:\n{stderr}"


def one_error_line(stderr: str) -> str:
    """The one line that says what went wrong (argparse's usage line may come before it)."""
    assert_clean(stderr)
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("usage: ")]
    assert len(lines) == 1, stderr
    return lines[0]
