"""The bundled reference agent, run on uvloop (``run_agent``'s ``loop_factory``)."""

from __future__ import annotations

import sys

import uvloop

from acp_driver.reference_agent import main

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "polite", loop_factory=uvloop.new_event_loop)
