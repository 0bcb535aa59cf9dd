"""Opening a client transport by URL: WebSocket for ``ws(s)://``, Streamable HTTP for ``http(s)://``."""

from __future__ import annotations

import http.cookiejar
import ssl
from collections.abc import Mapping
from typing import Any

from ..aio import Connection
from ._client_base import ClientTransport

SCHEMES = ("ws://", "wss://", "http://", "https://")


def is_url(target: str) -> bool:
    """Whether an agent given on a command line is a URL (``ws://``, ``wss://``, ``http(s)://``)."""
    return target.lower().startswith(SCHEMES)


def cookie_jar(cookies: Any) -> http.cookiejar.CookieJar:
    """The jar for ``cookies``: a fresh one for None, the jar itself, or an ``httpx.Cookies``' jar."""
    if cookies is None:
        return http.cookiejar.CookieJar()
    if isinstance(cookies, http.cookiejar.CookieJar):
        return cookies
    jar = getattr(cookies, "jar", None)  # httpx.Cookies
    if isinstance(jar, http.cookiejar.CookieJar):
        return jar
    raise TypeError("cookies must be an http.cookiejar.CookieJar or an httpx.Cookies")


async def open_transport(
    url: str,
    connection: Connection,
    *,
    headers: Mapping[str, str] | None = None,
    cookies: Any = None,
    open_timeout: float = 30.0,
    http2_prior_knowledge: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> ClientTransport:
    """Attach ``connection`` to the agent at ``url`` (WebSocket or Streamable HTTP by scheme).

    Raises ``ValueError`` for a URL of another scheme, ``OSError`` (or ``TimeoutError``) when the
    server cannot be reached or refuses the WebSocket handshake. ``acp-driver check`` uses it.
    """
    lowered = url.lower()
    sent = dict(headers or {})
    jar = cookie_jar(cookies)
    if lowered.startswith(("ws://", "wss://")):
        from ._client_ws import open_websocket

        return await open_websocket(
            url, connection, headers=sent, jar=jar, open_timeout=open_timeout, ssl_context=ssl_context
        )
    if lowered.startswith(("http://", "https://")):
        from ._client_http import open_http

        return open_http(
            url,
            connection,
            headers=sent,
            jar=jar,
            http2_prior_knowledge=http2_prior_knowledge,
            ssl_context=ssl_context,
        )
    raise ValueError(f"not an ACP URL (ws://, wss://, http:// or https://): {url!r}")
