"""Our bundled reference agent with two handlers that get cancellation wrong, on OUR agent runtime.

Run with the interpreter that has ``acp_driver`` installed: ``python runtime_v2_agent.py``. The
runtime keeps the v2 lifecycle whatever a handler does; these commands are what it must survive:

- ``/swallow-cancel``: a handler that catches its cancellation, says "swallowed" and returns
  ``end_turn`` as if nothing happened (the idle must still say ``cancelled``);
- ``/ignore-cancel``: a handler that does not stop at all when cancelled (its sleep is shielded;
  a minute): the runtime ends the span ``cancelled`` after its ``cancel_timeout`` (0.5 s here)
  and fences the handler (nothing of it after the idle);
- ``/raise``: a handler that raises ``RuntimeError``: the span ends idle ``error``, never a
  JSON-RPC error after the prompt's insertion.
"""

from __future__ import annotations

import asyncio
import contextlib

from acp_driver import reference_agent
from acp_driver.agent import Turn, TurnEndedError, run_agent

CANCEL_TIMEOUT = 0.5


class StubbornAgent(reference_agent.ReferenceAgent):
    name = "acp-driver-interop-stubborn-agent"

    async def cmd_swallow_cancel(self, turn: Turn, args: list[str]) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await turn.message("swallowed\n")
        return "end_turn"

    async def cmd_ignore_cancel(self, turn: Turn, args: list[str]) -> str:
        sleeper = asyncio.ensure_future(asyncio.sleep(60))
        while not sleeper.done():  # every cancellation swallowed
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(sleeper)
        with contextlib.suppress(TurnEndedError):
            await turn.message("too late\n")  # fenced: the span is over
        return "end_turn"

    async def cmd_raise(self, turn: Turn, args: list[str]) -> None:
        raise RuntimeError("the handler failed")


if __name__ == "__main__":
    run_agent(StubbornAgent(), cancel_timeout=CANCEL_TIMEOUT)
