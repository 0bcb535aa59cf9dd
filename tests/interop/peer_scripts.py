"""Running a peer script (an SDK's client or agent program, ``peers/*``) in its own process group,
with a timeout; its output (``ScriptRun``); and the wire trace ``peers/traced_agent.py`` writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .installs import tail

SCRIPT_TIMEOUT = 60.0


@dataclass
class ScriptRun:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str

    def report(self) -> str:
        return (
            f"$ {' '.join(self.argv)}\nexit status {self.returncode}\n--- stderr ---\n{tail(self.stderr, 60)}"
        )

    def json(self) -> dict[str, Any]:
        """The one JSON object the peer script printed last on stdout."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            pytest.fail(f"the peer script printed nothing on stdout\n{self.report()}", pytrace=False)
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except ValueError:
            pytest.fail(
                f"the peer script's last line is not JSON: {lines[-1]!r}\n{self.report()}", pytrace=False
            )
        return result


async def run_script(
    argv: list[str],
    env: dict[str, str],
    timeout: float = SCRIPT_TIMEOUT,
    cwd: Path | None = None,
    drop: tuple[str, ...] = (),
) -> ScriptRun:
    """Run a peer script in its own process group; kill the whole group if it outlives ``timeout``.
    Its environment is ours (less the variables whose names start with one of ``drop``) plus ``env``."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(drop)} if drop else dict(os.environ)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**inherited, **env},
        cwd=cwd,
        start_new_session=True,
        limit=64 * 1024 * 1024,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = await proc.communicate()
        run = ScriptRun(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        pytest.fail(f"peer script still running after {timeout}s (killed)\n{run.report()}", pytrace=False)
    finally:
        # The script's own children (the agent it spawned) must not outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return ScriptRun(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def read_agent_trace(path: Path) -> list[tuple[str, str]]:
    """The (direction, raw line) pairs ``peers/traced_agent.py`` wrote, in wire order."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(e["d"], e["line"]) for e in entries]


def agent_trace_loops(path: Path) -> set[str]:
    """The modules of the event loops that wrote ``peers/traced_agent.py``'s trace."""
    return {json.loads(line)["loop"] for line in path.read_text().splitlines() if line.strip()}
