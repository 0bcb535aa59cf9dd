"""OUR proxy in front of the traced reference agent, as an editor would launch it.

The v1 SDK clients spawn ``ACP_AGENT_PYTHON ACP_AGENT_SCRIPT`` (and pass on only the
``ACP_INTEROP_*`` variables): with this script as ``ACP_AGENT_SCRIPT`` they get
``python -m acp_driver proxy --cancel-budget B --trace FILE -- python traced_agent.py BEHAVIOR``,
exec'd in this process (so the client's child IS the proxy). ``ACP_INTEROP_PROXY_BEHAVIOR``
(default ``polite``), ``ACP_INTEROP_PROXY_BUDGET`` (default 2), ``ACP_INTEROP_PROXY_TRACE``
(the proxy's trace file), ``ACP_INTEROP_PROXY_PIDFILE`` (this pid is written there first).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

env = os.environ
pidfile = env.get("ACP_INTEROP_PROXY_PIDFILE")
if pidfile:
    Path(pidfile).write_text(str(os.getpid()))
argv = [
    sys.executable,
    "-m",
    "acp_driver",
    "proxy",
    "--cancel-budget",
    env.get("ACP_INTEROP_PROXY_BUDGET", "2"),
]
if env.get("ACP_INTEROP_PROXY_TRACE"):
    argv += ["--trace", env["ACP_INTEROP_PROXY_TRACE"]]
argv += [
    "--",
    sys.executable,
    str(Path(__file__).with_name("traced_agent.py")),
    env.get("ACP_INTEROP_PROXY_BEHAVIOR", "polite"),
]
os.execv(sys.executable, argv)
