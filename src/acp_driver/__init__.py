"""acp-driver: an Agent Client Protocol stack where cancellation always lands.

Names are imported lazily so that ``import acp_driver.core`` stays free of asyncio and a
process that needs one layer does not pay for the others at start-up.
"""

from __future__ import annotations

import typing

from ._lazy import lazy_exports as _lazy_exports

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        ".aio": ("Connection", "RequestContext", "current_request"),
        ".core": (
            "AcpError",
            "ConnectionClosedError",
            "ErrorCode",
            "LocalProtocolError",
            "RemoteProtocolError",
            "RequestCancelledError",
            "RequestTimeoutError",
            "RpcError",
        ),
    },
    defined=("__version__",),
)

if typing.TYPE_CHECKING:
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
