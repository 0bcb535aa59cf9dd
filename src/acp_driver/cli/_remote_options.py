"""Options for a remote agent (``--agent URL``, ``check -- URL``): the URL, ``--header``,
``--cacert``, and the ``remote`` extra they need.

Everything here is checked before anything starts: a URL the transports could not use, a header
that is not ``Name: value``, a certificate file that is not PEM -- each is a usage error with a
one-line reason (exit 2), never a traceback after a connection attempt. The ``remote`` extra
missing is said as such, with the command that installs it.
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..net import is_url
from ._options import as_text

if TYPE_CHECKING:
    import ssl

INSTALL_REMOTE = "pip install 'acp-driver[remote]'"

CLIENT_MODULES = ("httpx", "websockets")
"""What connecting to a remote agent imports (both transports: the WebSocket client uses httpx's
URL and header types)."""
SERVER_MODULES = ("hypercorn",)
"""What ``serve`` imports (hypercorn brings h11, h2 and wsproto)."""


class RemoteExtraMissing(Exception):
    """A module of the ``remote`` extra cannot be imported; ``str()`` says what to install."""

    def __init__(self, what: str, module: str) -> None:
        super().__init__(f"{what} needs the remote extra ({module} is not installed): {INSTALL_REMOTE}")
        self.module = module


def require_remote_extra(what: str, modules: tuple[str, ...] = CLIENT_MODULES) -> None:
    """Import ``modules`` now (they would be imported at the first connection anyway), or raise
    ``RemoteExtraMissing`` naming ``what`` needs them."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            raise RemoteExtraMissing(what, name) from None


def agent_url(command: str | None) -> str | None:
    """The URL given as ``--agent`` (``ws://``, ``wss://``, ``http://``, ``https://``), else None."""
    if command is None:
        return None
    text = command.strip()
    if is_url(text) and not any(c.isspace() for c in text):
        return text
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot reach an agent (no host, a port out of range, a broken IPv6 literal),
    or None when it can be tried."""
    try:
        parts = urlsplit(url)
        port = parts.port  # parsed lazily: a bad port raises here
    except ValueError as exc:
        return str(exc)
    if not parts.hostname:
        return "no host"
    if port == 0:
        return "port 0 cannot be connected to"
    return None


def check_url(parser: argparse.ArgumentParser, url: str | None, option: str) -> None:
    """A usage error (exit 2) for an agent URL that cannot be used."""
    if url is None:
        return
    problem = url_problem(url)
    if problem is not None:
        parser.error(f"{option} {as_text(url)!r}: not a usable agent URL ({problem})")


AGENT_TOKEN_ENV = "ACP_DRIVER_AGENT_TOKEN"


def parse_headers(
    parser: argparse.ArgumentParser, values: list[str] | None, url: str | None
) -> dict[str, str]:
    """``--header 'Name: value'`` (repeatable) as a dict; refused without a URL agent (exit 2).
    ``$ACP_DRIVER_AGENT_TOKEN`` adds ``Authorization: Bearer TOKEN`` for a remote agent (unless a
    header gives one): a token there is not on the command line, where every local user reads it.
    The variable is removed from the environment (nothing this process starts inherits it)."""
    token = os.environ.pop(AGENT_TOKEN_ENV, None)
    if values and url is None:
        parser.error("--header needs a remote agent (--agent ws://... or http(s)://...)")
    headers: dict[str, str] = {}
    for value in values or ():
        name, sep, rest = as_text(value).partition(":")
        name = name.strip()
        if not sep or not name or any(c.isspace() or ord(c) < 33 or c in '()<>@,;:\\"/[]?={}' for c in name):
            parser.error(f"--header {value!r}: expected 'Name: value'")
        if any(c in rest for c in "\r\n\0"):
            parser.error(f"--header {value!r}: a value cannot hold a line break")
        headers[name] = rest.strip()
    if token and token.strip() and url is not None and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {token.strip()}"
    return headers


def parse_cacert(parser: argparse.ArgumentParser, path: str | None, url: str | None) -> ssl.SSLContext | None:
    """``--cacert FILE``: a TLS context trusting the system's authorities and the PEM file's (a
    private CA, a self-signed server); refused without a ``wss://``/``https://`` agent (exit 2)."""
    if path is None:
        return None
    if url is None or not url.lower().startswith(("wss://", "https://")):
        parser.error("--cacert needs a TLS agent URL (--agent wss://... or https://...)")
    import ssl  # lazily: only a TLS agent pays for it

    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        parser.error(f"--cacert {path!r}: not a readable PEM certificate file ({exc})")
    return context
