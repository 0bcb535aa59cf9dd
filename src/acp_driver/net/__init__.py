"""The ACP remote transport (the RFD's Streamable HTTP and WebSocket on one ``/acp`` endpoint):
what both ends agree on, and the client transports a host connects with.

The server is ``acp_driver.remote``; the host's agent handle over a network is
``acp_driver.driver.connect``. The client transports need the ``remote`` extra (websockets,
httpx), imported only when a transport is opened; the wire constants and codecs import nothing
beyond the standard library. Names load lazily (``acp_driver._lazy``).
"""

import typing

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from .._lazy import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "._client_base": ("ClientTransport",),
        "._open": ("SCHEMES", "cookie_jar", "is_url", "open_transport"),
        "._protocol": (
            "CONNECTION_ID_HEADER",
            "CONTENT_TYPE_JSON",
            "CONTENT_TYPE_SSE",
            "ENDPOINT_PATH",
            "SESSION_ATTACH_METHODS",
            "SESSION_ID_HEADER",
            "SESSION_SCOPED_METHODS",
            "SSE_KEEPALIVE",
            "WS_GOING_AWAY",
            "WS_NORMAL",
            "WS_POLICY",
            "WS_TOO_BIG",
            "WS_TRY_AGAIN",
            "SseDecoder",
            "encode_sse",
            "id_key",
            "refused_status",
            "session_id_of",
        ),
    },
)

if typing.TYPE_CHECKING:
    from ._client_base import ClientTransport as ClientTransport
    from ._open import SCHEMES as SCHEMES
    from ._open import cookie_jar as cookie_jar
    from ._open import is_url as is_url
    from ._open import open_transport as open_transport
    from ._protocol import CONNECTION_ID_HEADER as CONNECTION_ID_HEADER
    from ._protocol import CONTENT_TYPE_JSON as CONTENT_TYPE_JSON
    from ._protocol import CONTENT_TYPE_SSE as CONTENT_TYPE_SSE
    from ._protocol import ENDPOINT_PATH as ENDPOINT_PATH
    from ._protocol import SESSION_ATTACH_METHODS as SESSION_ATTACH_METHODS
    from ._protocol import SESSION_ID_HEADER as SESSION_ID_HEADER
    from ._protocol import SESSION_SCOPED_METHODS as SESSION_SCOPED_METHODS
    from ._protocol import SSE_KEEPALIVE as SSE_KEEPALIVE
    from ._protocol import WS_GOING_AWAY as WS_GOING_AWAY
    from ._protocol import WS_NORMAL as WS_NORMAL
    from ._protocol import WS_POLICY as WS_POLICY
    from ._protocol import WS_TOO_BIG as WS_TOO_BIG
    from ._protocol import WS_TRY_AGAIN as WS_TRY_AGAIN
    from ._protocol import SseDecoder as SseDecoder
    from ._protocol import encode_sse as encode_sse
    from ._protocol import id_key as id_key
    from ._protocol import refused_status as refused_status
    from ._protocol import session_id_of as session_id_of
