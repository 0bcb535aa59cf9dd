"""Runner (rows C1): the real-agent view of a cancel -- the user's Ctrl-C to the CLI's result line.

For each sample it starts ``acp-driver run --json --agent AGENT PROMPT`` (this repo's CLI, with
its services: files and terminals), waits for the turn's first update on the CLI's stdout (the
agent is in the turn), sends SIGINT to the CLI process -- what Ctrl-C does -- and times until the
CLI prints its ``result`` line. The agent is the config's ``agent`` argv: each column's own agent
(the reference agent, the agents written with the official SDKs in ``benchmarks/peers``, the
ceiling agent). Every agent gets the same prompt as row 5: one update, then busy for 60 s.

The work counted: runs whose result says the turn was cancelled by ``session/cancel`` (the first
rung of the ladder) and whose CLI exited 130 (128 + SIGINT). Anything else fails the workload.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from typing import IO, Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Report, agent_override, now, parse_config, percentile

PROMPT = "/stream 1 0\n/sleep 60000"
TIMEOUT = 60.0


def events(stream: IO[bytes]) -> Any:
    for line in stream:
        if line.startswith(b"{"):
            yield json.loads(line)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one(cli: list[str], agent: list[str], cwd: str) -> tuple[float, dict[str, Any]]:
    """One CLI run: (seconds from SIGINT to the result line, the result event)."""
    argv = [*cli, "run", "--json", "--agent", shlex.join(agent), PROMPT]
    # As from a terminal: SIGINT at its default in the CLI. A run started where SIGINT is
    # ignored (``nohup``, a background job) would pass the ignore on, and the CLI keeps an
    # inherited ignore (docs/cli.md): it would never hear this Ctrl-C.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, preexec_fn=_sigint_default
    )
    assert proc.stdout is not None
    try:
        seen = events(proc.stdout)
        for event in seen:
            if event.get("type") == "update":
                break
        else:
            raise AssertionError(f"the CLI ended before the turn's first update (exit {proc.wait()})")
        t0 = now()
        os.kill(proc.pid, signal.SIGINT)
        for event in seen:
            if event.get("type") == "result":
                elapsed = now() - t0
                break
        else:
            raise AssertionError(f"no result line after SIGINT (exit {proc.wait()})")
        code = proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    if code != 128 + signal.SIGINT:
        raise AssertionError(f"the CLI exited {code} after Ctrl-C, not 130: {event}")
    return elapsed, event


def main() -> None:
    cfg = parse_config()
    rep = Report("ctrl-c", cfg)
    agent = agent_override(cfg)
    if agent is None:
        raise SystemExit("the ctrl_c runner drives the agent named by the config")
    cli = [sys.executable, "-m", "acp_driver"]

    async def ctrl_c() -> dict[str, float]:
        samples: list[float] = []
        inside: list[float] = []
        cancelled = 0
        with tempfile.TemporaryDirectory() as cwd:
            for _ in range(cfg["ctrl_c"]):
                elapsed, result = one(cli, agent, cwd)
                samples.append(elapsed * 1000)
                cancel = result.get("cancel") or {}
                if result.get("resolution") == "cancelled" and cancel.get("resolvedBy") == "session_cancel":
                    cancelled += 1
                    inside.append(float(cancel.get("elapsedMs", "nan")))
        rep.work["ctrl_c"] = {"cancelled": cancelled}
        rep.notes["ctrl_c_cli_cancel_p50_ms"] = round(percentile(inside, 50), 3)
        return {"ctrl_c_p50_ms": percentile(samples, 50), "ctrl_c_p99_ms": percentile(samples, 99)}

    asyncio.run(rep.measure("ctrl_c", ctrl_c))
    rep.emit()


if __name__ == "__main__":
    main()
