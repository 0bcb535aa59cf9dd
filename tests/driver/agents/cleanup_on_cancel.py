"""An agent that tidies up when its turn is cancelled, as well-behaved agents do.

The prompt starts a terminal (``sleep 60``) and waits for it. On cancel, the handler calls
``terminal/output``, ``terminal/wait_for_exit``, ``terminal/kill`` and ``terminal/release`` on it
and reports each outcome in a ``_cleanup/report`` notification (before the turn is answered).
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp_driver.agent import Agent, Turn, run_agent


class Cleanup(Agent):
    name = "cleanup-on-cancel"

    async def prompt(self, turn: Turn) -> str:
        terminal = await turn.create_terminal("sleep", ["60"])
        await turn.message("terminal started\n")
        try:
            await terminal.wait_for_exit()
        except asyncio.CancelledError:
            report: dict[str, Any] = {}
            for name in ("output", "wait_for_exit", "kill", "release"):
                try:
                    await asyncio.wait_for(getattr(terminal, name)(), 10)
                    report[name] = "ok"
                except Exception as exc:
                    report[name] = f"{type(exc).__name__}: {exc}"
            await turn.runtime.connection.notify("_cleanup/report", report)
            raise
        return "end_turn"


if __name__ == "__main__":
    run_agent(Cleanup(), cancel_timeout=15.0)
