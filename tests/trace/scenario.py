"""A real turn history to trace: the reference agent in a subprocess, driven by the library.

One agent (``--behavior ignore-cancel``: it ignores ``session/cancel`` and ``$/cancel_request``,
so the ladder must climb), three turns in one session:

1. ``MARKUP`` echoed back as chunks (agent text holding ``</script>`` and HTML), ended normally;
2. ``/permission``: the permission request is held; the turn is cancelled while it is pending
   (the host answers it ``cancelled``); the agent finishes the turn anyway (cancel ignored);
3. ``/stream 400 20``: cancelled after its first chunk; the agent ignores the cancel, the ladder
   sends ``$/cancel_request``, then SIGTERM (the agent dies of it): resolution ``killed``.

Synchronised on events (the permission request arriving, the first chunk), never on sleeps.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from acp_driver.driver import ClientServices, LadderPolicy, PermissionRequest, launch

MARKUP = 'hello </script><script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> & <b>bold</b>'
BUDGET = 2.0
"""The ladder's budget: $/cancel_request at 1 s, SIGTERM at 1.5 s, SIGKILL at 2 s (half a second
for the agent's death by SIGTERM to be seen before SIGKILL is due: generous on a loaded machine)."""


async def record(path: Path, trace: Any = None) -> None:
    """Run the three turns, recording to ``path`` (or to the sink ``trace``)."""
    asked = asyncio.Event()
    release = asyncio.Event()

    async def hold(request: PermissionRequest) -> dict[str, Any]:
        asked.set()
        await release.wait()
        return request.allow()

    argv = [sys.executable, "-m", "acp_driver", "agent", "--behavior", "ignore-cancel"]
    agent = await launch(
        argv,
        services=ClientServices(permission=hold),
        ladder=LadderPolicy(budget=BUDGET),
        trace=trace if trace is not None else path,
        protocol=1,  # the scenario's wire is v1's
    )
    try:
        session = await agent.new_session(".")
        first = await session.prompt(MARKUP)
        assert first.stop_reason == "end_turn", first
        turn = session.prompt("/permission")
        async with asyncio.timeout(30):
            await asked.wait()
        outcome = await turn.cancel()
        assert outcome.resolution is not None
        turn = session.prompt("/stream 400 20")
        async with asyncio.timeout(30):
            async for _update in turn:
                break
        outcome = await turn.cancel()
        assert outcome.resolution is not None
        assert outcome.resolution.value == "killed", outcome
    finally:
        release.set()
        await agent.aclose()
