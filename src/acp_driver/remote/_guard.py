"""Who may talk to the server: the bearer token, the Origin check, the loopback rule.

- ``--token``: every request (WebSocket upgrades included) must carry
  ``Authorization: Bearer TOKEN``; compared in constant time (``hmac.compare_digest``).
- ``Origin``: a request that carries one (browsers always do on WebSocket upgrades and
  cross-origin fetches) is admitted only if it is the server's own origin (its ``Host``) or one
  listed with ``--allow-origin``. The RFD's hardening phase and the Rust SDK do the same: a web
  page must not drive an agent on the user's machine.
- A non-loopback bind without a token is refused at start.

Pure: no I/O.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bearer_ok(header: bytes | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value carries ``Bearer <token>`` (constant time)."""
    if header is None:
        return False
    scheme, _, value = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(value.strip(), token)


def normalize_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` in lower case with default ports dropped; None if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(scheme)
    return f"{scheme}://{host}" if port is None or port == default else f"{scheme}://{host}:{port}"


class OriginPolicy:
    """Admit requests with no Origin, a same-origin one, or one of ``allowed``."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = set()
        for origin in allowed:
            normal = normalize_origin(origin)
            if normal is None:
                raise ValueError(f"not an origin (scheme://host[:port]): {origin!r}")
            self.allowed.add(normal)

    def admits(self, origin: bytes | None, host: bytes | None, scheme: str) -> bool:
        if origin is None:
            return True
        text = origin.decode("latin-1")
        normal = normalize_origin(text)
        if normal is None:
            return False  # "null" (sandboxed pages, file://) and garbage
        if normal in self.allowed:
            return True
        if host is None:
            return False
        web_scheme = "https" if scheme in ("https", "wss") else "http"
        own = normalize_origin(f"{web_scheme}://{host.decode('latin-1')}")
        return own is not None and normal == own
