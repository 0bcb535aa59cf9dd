"""Looking at processes from tests: group members (from /proc) and whether a pid is alive."""

from __future__ import annotations

import os
from pathlib import Path

DEAD_STATES = ("Z", "X")  # zombie, dead: exited, only waiting to be reaped


def group_members(pgid: int, *, live_only: bool = False) -> list[str]:
    """``pid state cmdline`` of every process whose process group is ``pgid``.

    ``live_only`` leaves out zombies (exited processes waiting for their parent or init).
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and not (live_only and fields[0] in DEAD_STATES):
            found.append(f"{entry} {fields[0]} {cmdline.strip()}")
    return found


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in DEAD_STATES
