"""Looking at processes from tests: group members, descendants and ignored signals (from /proc),
whether a pid or a group is alive, and waiting (bounded) for a group to be gone."""

from __future__ import annotations

import asyncio
import os
import time
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


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in DEAD_STATES:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def signals_ignored(pid: int) -> set[int]:
    """The signals ``pid`` ignores (``SigIgn`` in /proc/PID/status: bit N-1 for signal N)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError(f"no SigIgn in /proc/{pid}/status")


def group_alive(pgid: int) -> bool:
    """Whether ``os.killpg(pgid, 0)`` finds the group (zombies count until they are reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_group_gone(pgid: int, timeout: float = 15.0, *, dying_ok: bool = True) -> None:
    """Return once no process of group ``pgid`` is left, zombies included.

    SIGKILLed members take a moment to die and orphaned ones to be reaped by init: allow
    ``timeout``. With ``dying_ok=False`` a live (non-zombie) member fails at once: for callers
    that already waited for the group's kill.
    """
    if not dying_ok:
        live = group_members(pgid, live_only=True)
        assert live == [], f"live members of group {pgid}: {live}"
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process group {pgid} survives: {group_members(pgid)}")
        await asyncio.sleep(0.05)
