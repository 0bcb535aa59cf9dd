"""ACP over the network: the RFD's Streamable HTTP and WebSocket transports, both roles.

Needs the ``remote`` extra (``pip install -e '.[remote]'`` in the project's checkout); nothing here is imported by
the stdio path.
"""

import typing

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from ._defaults import (
    DEFAULT_CANCEL_BUDGET,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PORT,
)

if typing.TYPE_CHECKING:
    from ._backend import Backend as Backend
    from ._relay import SubprocessBackend as SubprocessBackend
    from ._relay_ledger import Pending as Pending
    from ._relay_ledger import RelayLedger as RelayLedger
    from ._relay_ledger import answer_for_gone_client as answer_for_gone_client
    from ._served import ServedConnection as ServedConnection
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
    "Backend",
    "ConfigError",
    "Pending",
    "RelayLedger",
    "RemoteServer",
    "ServedConnection",
    "ServerSettings",
    "SubprocessBackend",
    "answer_for_gone_client",
    "serve_agent",
    "serve_command",
]

_SERVER_NAMES = ("ConfigError", "RemoteServer", "ServerSettings", "serve_agent", "serve_command")
_RELAY_NAMES = {
    "Backend": "_backend",
    "Pending": "_relay_ledger",
    "RelayLedger": "_relay_ledger",
    "answer_for_gone_client": "_relay_ledger",
    "ServedConnection": "_served",
    "SubprocessBackend": "_relay",
}
"""The relay without the network front-ends (``acp-driver proxy`` uses it on stdio): no extra needed."""


def __getattr__(name: str) -> typing.Any:
    # The server's modules load on first use: a client-only program does not pay for them.
    if name in _SERVER_NAMES:
        from . import _server

        return getattr(_server, name)
    if name in _RELAY_NAMES:
        import importlib

        return getattr(importlib.import_module(f".{_RELAY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
