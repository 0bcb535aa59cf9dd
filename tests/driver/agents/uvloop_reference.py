"""The bundled reference agent, run on uvloop (``asyncio.new_event_loop`` follows the policy)."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from acp_driver.reference_agent import main

if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    main(sys.argv[1] if len(sys.argv) > 1 else "polite")
