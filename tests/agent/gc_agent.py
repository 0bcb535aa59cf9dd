"""The reference agent, with every object the cyclic collector finds kept aside: at exit it
writes, to the file named by its first argument, the type names of those from a prompt turn (the
runtime's ``Turn`` and the frames of a turn's task). ``test_garbage.py`` drives it."""

from __future__ import annotations

import atexit
import gc
import sys
import types

from acp_driver.agent._turn import Turn
from acp_driver.cli._agent_cmd import agent_main


def _report(path: str) -> None:
    gc.collect()
    names = [type(o).__name__ for o in gc.garbage if isinstance(o, (Turn, types.FrameType))]
    with open(path, "w") as out:
        out.write("\n".join(names))


gc.collect()
gc.set_debug(gc.DEBUG_SAVEALL)
atexit.register(_report, sys.argv[1])
raise SystemExit(agent_main(sys.argv[2:]))
