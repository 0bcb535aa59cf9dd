"""``acp-driver proxy``: serve's relay with a stdio front, in front of any agent an editor launches.

``run_proxy`` runs one agent behind our stdin/stdout (``_front``); ``ProxyGuard`` adds the
editor's guarantees to the relay (``_guard``). See docs/proxy.md.
"""

from ._front import EXIT_AGENT_ENDED, EXIT_NO_AGENT, EXIT_OK, Proxy, ProxySettings, run_proxy
from ._guard import GuardSettings, ProxyGuard, Stats

__all__ = [
    "EXIT_AGENT_ENDED",
    "EXIT_NO_AGENT",
    "EXIT_OK",
    "GuardSettings",
    "Proxy",
    "ProxyGuard",
    "ProxySettings",
    "Stats",
    "run_proxy",
]
