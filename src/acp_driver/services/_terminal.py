"""One terminal: a command's process group, its output kept within a byte limit (cut at a UTF-8
character boundary), its exit, and how it is stopped -- SIGTERM to the group, SIGKILL after the
grace on the service's clock, every live member gone (``LocalTerminals`` owns the terminals)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Any

from ..aio import Clock, ProcessGroup, timeout_on
from ..core import TREE_WAIT
from ._errors import REASON_SPAWN_FAILED, failed

logger = logging.getLogger("acp_driver.services.terminals")


def utf8_tail_start(buf: bytes | bytearray, start: int) -> int:
    """``start`` moved forward past UTF-8 continuation bytes (at most 3): a character boundary."""
    end = min(len(buf), start + 3)
    while start < end and (buf[start] & 0xC0) == 0x80:
        start += 1
    return start


def utf8_complete_end(buf: bytes | bytearray) -> int:
    """The length of ``buf`` without an incomplete UTF-8 sequence at its end."""
    n = len(buf)
    for back in range(1, min(4, n) + 1):
        byte = buf[n - back]
        if (byte & 0xC0) == 0x80:
            continue  # continuation byte: keep looking for the lead byte
        if byte >= 0xF0:
            need = 4
        elif byte >= 0xE0:
            need = 3
        elif byte >= 0xC0:
            need = 2
        else:
            return n  # ASCII: complete
        return n - back if back < need else n
    return n


def exit_status(code: int) -> dict[str, Any]:
    """A ``TerminalExitStatus`` from a ``Popen`` return code."""
    if code < 0:
        try:
            name: str = signal.Signals(-code).name
        except ValueError:
            name = f"SIG{-code}"
        return {"exitCode": None, "signal": name}
    return {"exitCode": code, "signal": None}


def live_group_members(pgid: int) -> list[int] | None:
    """Pids of the non-zombie processes of group ``pgid`` (None when ``/proc`` is unavailable)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


class Terminal:
    """One command started for the agent (internal; exposed for inspection in tests and UIs)."""

    def __init__(
        self,
        terminal_id: str,
        session_id: str,
        owner: object,
        process: ProcessGroup,
        *,
        argv: list[str],
        cwd: str,
        output_byte_limit: int,
        exit_output_grace: float,
        clock: Clock | None = None,
    ) -> None:
        self.id = terminal_id
        self.session_id = session_id
        self.owner = owner
        self.process = process
        self.argv = argv
        self.cwd = cwd
        self.output_byte_limit = output_byte_limit
        self.truncated = False
        self.total_bytes = 0
        self.released = False
        self._buf = bytearray()
        self._eof = asyncio.Event()
        self._settled = asyncio.Event()
        self._exit_output_grace = exit_output_grace
        self._clock = clock
        process.clock = clock
        self._transport: asyncio.BaseTransport | None = None
        self._settle_task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def pgid(self) -> int:
        return self.process.pgid

    # ------------------------------------------------------------------ output

    def _feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        buf = self._buf
        buf += data
        limit = self.output_byte_limit
        if len(buf) > limit:
            cut = utf8_tail_start(buf, len(buf) - limit)
            del buf[:cut]
            self.truncated = True

    def _on_eof(self) -> None:
        self._eof.set()

    def _on_exit(self, code: int) -> None:
        self._settle_task = asyncio.get_running_loop().create_task(self._settle(), name=f"settle {self.id}")

    async def _settle(self) -> None:
        # The exit counts once the output is complete: EOF, or a grace for a pipe held by leftovers.
        with contextlib.suppress(TimeoutError):
            async with timeout_on(self._clock, self._exit_output_grace):
                await self._eof.wait()
        self._settled.set()

    @property
    def exited(self) -> bool:
        """Whether the exit is known and the output complete (``exitStatus`` is reported)."""
        return self._settled.is_set()

    def output_text(self) -> str:
        buf = self._buf
        end = len(buf) if self._eof.is_set() else utf8_complete_end(buf)
        return bytes(buf[:end]).decode("utf-8", "replace")

    def exit_status(self) -> dict[str, Any] | None:
        code = self.process.returncode
        if not self._settled.is_set() or code is None:
            return None
        return exit_status(code)

    def output(self) -> dict[str, Any]:
        result: dict[str, Any] = {"output": self.output_text(), "truncated": self.truncated}
        status = self.exit_status()
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self) -> dict[str, Any]:
        await self._settled.wait()
        status = self.exit_status()
        if status is None:  # pragma: no cover - released without a known exit (stop failed)
            raise failed(f"terminal {self.id} ended without a known exit status", REASON_SPAWN_FAILED)
        return status

    # ------------------------------------------------------------------ ending

    async def stop(self, kill_grace: float) -> None:
        """End the whole group (TERM, KILL after ``kill_grace``); idempotent, not cancellable midway."""
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(
                self._stop(kill_grace), name=f"stop {self.id}"
            )
        await asyncio.shield(self._stop_task)

    async def _stop(self, kill_grace: float) -> None:
        await self.process.reap(term_timeout=kill_grace)
        await _wait_group_dead(self.process)
        # The exit is final; the output too, unless something outside the group holds the pipe.
        with contextlib.suppress(TimeoutError):
            async with timeout_on(self._clock, self._exit_output_grace):
                await self._settled.wait()

    async def close(self, kill_grace: float) -> None:
        """Stop the command and free the pipe (release)."""
        self.released = True
        try:
            await self.stop(kill_grace)
        finally:
            if self._transport is not None:
                self._transport.close()
            # else: creation was interrupted while the loop took the pipe; it closes it
            # (``aio.connect_read_pipe``): closing it here too could close a reused descriptor.
            task = self._settle_task
            if task is not None and not task.done():
                task.cancel()
            self._eof.set()
            self._settled.set()

    def __repr__(self) -> str:
        return (
            f"Terminal({self.id!r}, argv={self.argv!r}, pid={self.pid}, returncode={self.process.returncode})"
        )


async def _wait_group_dead(process: ProcessGroup, timeout: float = TREE_WAIT) -> None:
    """SIGKILL until no live member of the group is left (zombies awaiting init are dead).

    A poll of ``/proc`` in real time: it runs after SIGKILL, which no process can ignore."""
    deadline = time.monotonic() + timeout
    while process.group_alive():
        members = live_group_members(process.pgid)
        if members is not None and not members:
            return  # only zombies, reparented to init, which reaps them
        process.kill()
        if members is None:
            return  # no /proc: zombies and the living look alike; SIGKILL was sent
        if time.monotonic() >= deadline:
            logger.warning("process group %d still has live members %s after SIGKILL", process.pgid, members)
            return
        await asyncio.sleep(0.005)
