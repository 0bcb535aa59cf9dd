"""ACP over the network: the RFD's Streamable HTTP and WebSocket transports, both roles.

Needs the ``remote`` extra (``pip install -e '.[remote]'`` in the project's checkout); nothing here is imported by
the stdio path.
"""

from typing import TYPE_CHECKING, Any

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from ._defaults import (
    DEFAULT_CANCEL_BUDGET,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PORT,
)

if TYPE_CHECKING:
    from ._server import ConfigError as ConfigError
    from ._server import RemoteServer as RemoteServer
    from ._server import ServerSettings as ServerSettings
    from ._server import serve_agent as serve_agent
    from ._server import serve_command as serve_command

__all__ = [
    "DEFAULT_CANCEL_BUDGET",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_PORT",
    "ConfigError",
    "RemoteServer",
    "ServerSettings",
    "serve_agent",
    "serve_command",
]

_SERVER_NAMES = ("ConfigError", "RemoteServer", "ServerSettings", "serve_agent", "serve_command")


def __getattr__(name: str) -> Any:
    # The server's modules load on first use: a client-only program does not pay for them.
    if name in _SERVER_NAMES:
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
