"""Who may talk to the server: the Host check, the bearer token, the Origin check, the loopback rule.

- ``Host``: every request must name this server. For a loopback bind that is a loopback name
  (``localhost``, ``*.localhost``) or a loopback IP; for another bind, an IP literal or the name
  it was bound to; plus every name given with ``--allow-host`` (``*``: any). This is what stops
  DNS rebinding: a page on ``attacker.example`` whose name the browser re-resolves to 127.0.0.1
  sends ``Host: attacker.example:PORT`` -- and, being same-origin with itself, an ``Origin`` that
  matches that Host, so the Origin check alone cannot tell it from a legitimate client.
- ``--token``: every request (WebSocket upgrades included) must carry
  ``Authorization: Bearer TOKEN``; compared in constant time (``hmac.compare_digest``).
- ``Origin``: a request that carries one (browsers always do on WebSocket upgrades and
  cross-origin fetches) is admitted only if it is the server's own origin (its ``Host``) or one
  listed with ``--allow-origin``. Scheme, host and port all count: ``http://127.0.0.1:3000`` is
  another web application than a server on 8765. The RFD's hardening phase and the Rust SDK do the same: a web
  page must not drive an agent on the user's machine.
- A non-loopback bind without a token is refused at start.

Pure: no I/O.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
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


def host_name(host: bytes | str) -> str | None:
    """The name in a ``Host`` header (``name[:port]``, ``[v6][:port]``), lower case, without a
    trailing dot; None if it is not a well-formed host."""
    text = host.decode("latin-1") if isinstance(host, bytes) else host
    if not text or any(c in text for c in "/?#@ \t\\"):
        return None
    try:
        parts = urlsplit(f"//{text}")
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError:
        return None
    name = parts.hostname
    if not name:
        return None
    return name.rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


_NAME = re.compile(r"^\.?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


def allowed_host(entry: str) -> str:
    """An ``--allow-host`` entry in its compared form: a name (``.example.com``: it and its
    subdomains), an IP address, or ``*``. ``ValueError`` for anything else (a port, a scheme)."""
    text = entry.strip().lower().rstrip(".")
    if text == "*":
        return text
    address = _ip(text.strip("[]"))
    if address is not None:
        return str(address)
    if not _NAME.match(text):
        raise ValueError(f"not a host name (NAME or .DOMAIN, no scheme or port): {entry!r}")
    return text


class HostPolicy:
    """Admit requests whose ``Host`` names this server (see the module docstring)."""

    def __init__(self, bind: str, allowed: Iterable[str] = ()) -> None:
        self.names = {allowed_host(entry) for entry in allowed}
        self.any = "*" in self.names
        bound = bind.strip("[]").lower().rstrip(".")
        address = _ip(bound)
        self.loopback = is_loopback(bound)
        self.wildcard = address is not None and address.is_unspecified
        if not self.loopback and not self.wildcard:
            self.names.add(str(address) if address is not None else bound)

    def admits(self, host: bytes | None) -> bool:
        if self.any:
            return True
        if host is None:
            return False  # HTTP/1.1 requires it; browsers always send it
        name = host_name(host)
        if name is None:
            return False
        address = _ip(name)
        if address is not None:
            name = str(address)
        if name in self.names or any(n[0] == "." and (name.endswith(n) or name == n[1:]) for n in self.names):
            return True
        if self.loopback:
            if address is not None:
                return address.is_loopback
            return name == "localhost" or name.endswith(".localhost")
        # Not loopback (a token is required there): an IP literal cannot be re-bound.
        return address is not None and (self.wildcard or address.is_loopback)


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
