"""acp-driver: an Agent Client Protocol stack where cancellation always lands.

Names are imported lazily so that ``import acp_driver.core`` stays free of asyncio and a
process that needs one layer does not pay for the others at start-up.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AcpError": "acp_driver.core",
    "Connection": "acp_driver.aio",
    "ConnectionClosedError": "acp_driver.core",
    "ErrorCode": "acp_driver.core",
    "LocalProtocolError": "acp_driver.core",
    "RemoteProtocolError": "acp_driver.core",
    "RequestCancelledError": "acp_driver.core",
    "RequestContext": "acp_driver.aio",
    "RequestTimeoutError": "acp_driver.core",
    "RpcError": "acp_driver.core",
    "current_request": "acp_driver.aio",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from .aio import Connection as Connection
    from .aio import RequestContext as RequestContext
    from .aio import current_request as current_request
    from .core import AcpError as AcpError
    from .core import ConnectionClosedError as ConnectionClosedError
    from .core import ErrorCode as ErrorCode
    from .core import LocalProtocolError as LocalProtocolError
    from .core import RemoteProtocolError as RemoteProtocolError
    from .core import RequestCancelledError as RequestCancelledError
    from .core import RequestTimeoutError as RequestTimeoutError
    from .core import RpcError as RpcError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'acp_driver' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
