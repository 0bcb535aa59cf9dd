"""Options for a remote agent (``--agent URL``, ``check -- URL``): the URL, ``--header``,
``--cacert``, and the ``remote`` extra they need.

Everything here is checked before anything starts: a URL the transports could not use, a header
that is not ``Name: value``, a certificate file that is not PEM -- each is a usage error with a
one-line reason (exit 2), never a traceback after a connection attempt. The ``remote`` extra
missing is said as such, with the command that installs it the way this copy was installed
(``install_extra``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import sys
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..net import is_url
from ._options import as_text

if TYPE_CHECKING:
    import ssl

DISTRIBUTION = "acp-driver"


def install_extra(extra: str) -> str:
    """The command that adds ``extra`` to this copy of acp-driver, the way it was installed.

    The package is not on a package index: ``pip install 'acp-driver[remote]'`` would fail. What
    pip recorded (``direct_url.json``, PEP 610) says where this copy came from: a checkout
    installed editable (``pip install -e .``) gets ``pip install -e '/its/path[remote]'``, any
    other local directory, archive or VCS URL ``pip install 'acp-driver[remote] @ URL'``. pip is
    run by this interpreter (``python -m pip``): right whether or not its environment is activated.
    """
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return f"{pip} -e '.[{extra}]' (from the project's checkout)"
    origin: dict[str, object] = {}
    if recorded:
        try:
            loaded = json.loads(recorded)
        except ValueError:
            loaded = None
        origin = loaded if isinstance(loaded, dict) else {}
    url = origin.get("url")
    if not isinstance(url, str) or not url:
        return f"{pip} {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    dir_info = origin.get("dir_info")
    if url.startswith("file://") and isinstance(dir_info, dict) and dir_info.get("editable"):
        return f"{pip} -e {shlex.quote(f'{unquote(urlsplit(url).path)}[{extra}]')}"
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        url = f"{vcs['vcs']}+{url}"
    return f"{pip} {shlex.quote(f'{DISTRIBUTION}[{extra}] @ {url}')}"


CLIENT_MODULES = ("httpx", "websockets")
"""What connecting to a remote agent imports (both transports: the WebSocket client uses httpx's
URL and header types)."""
SERVER_MODULES = ("hypercorn",)
"""What ``serve`` imports (hypercorn brings h11, h2 and wsproto)."""


class RemoteExtraMissing(Exception):
    """A module of the ``remote`` extra cannot be imported; ``str()`` says what to install."""

    def __init__(self, what: str, module: str) -> None:
        super().__init__(
            f"{what} needs the remote extra ({module} is not installed): {install_extra('remote')}"
        )
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

TOKEN_OPTIONS = (
    f"--token-file FILE (the token on its first line), ${AGENT_TOKEN_ENV}, "
    "or --header 'Authorization: Bearer TOKEN'"
)
"""How a remote agent's token is given, named when a server refuses the connection."""


def read_token_file(path: str, who: str) -> str:
    """The token on the first line of ``path`` (``ValueError`` with the reason when it cannot
    be read or has none); a file others can read is warned about on stderr as ``who``. The token
    itself is never printed."""
    try:
        with open(path, encoding="utf-8") as file:
            mode = os.fstat(file.fileno()).st_mode
            first = file.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the token file: {exc}") from None
    token = first.strip()
    if not token:
        raise ValueError(f"the token file {path!r} has no token on its first line")
    if mode & 0o077:
        sys.stderr.write(
            f"{who}: warning: the token file {path!r} is readable by others "
            f"(mode {mode & 0o777:o}); chmod 600 it\n"
        )
    return token


def credentials_hint(error: BaseException, separator: str = "\n") -> str:
    """For a start that failed because the server refused the credentials (HTTP 401 or 403):
    how to give a token, after ``separator``; else nothing."""
    from ..net import refused_status

    status = refused_status(error)
    if status == 401:
        return f"{separator}the server wants a bearer token: give it with {TOKEN_OPTIONS}"
    if status == 403:
        return (
            f"{separator}the server refused this client (HTTP 403): check the token given ({TOKEN_OPTIONS})"
        )
    return ""


def parse_headers(
    parser: argparse.ArgumentParser,
    values: list[str] | None,
    url: str | None,
    token_file: str | None = None,
) -> dict[str, str]:
    """``--header 'Name: value'`` (repeatable) as a dict; refused without a URL agent (exit 2).
    ``--token-file FILE`` or ``$ACP_DRIVER_AGENT_TOKEN`` add ``Authorization: Bearer TOKEN`` for
    a remote agent: a token there is not on the command line, where every local user reads it.
    One source of the token only (the file, the variable, an ``Authorization`` header). The
    variable is removed from the environment (nothing this process starts inherits it)."""
    token = os.environ.pop(AGENT_TOKEN_ENV, None)
    if values and url is None:
        parser.error("--header needs a remote agent (--agent ws://... or http(s)://...)")
    if token_file is not None and url is None:
        parser.error("--token-file needs a remote agent (--agent ws://... or http(s)://...)")
    headers: dict[str, str] = {}
    for value in values or ():
        name, sep, rest = as_text(value).partition(":")
        name = name.strip()
        if not sep or not name or any(c.isspace() or ord(c) < 33 or c in '()<>@,;:\\"/[]?={}' for c in name):
            parser.error(f"--header {value!r}: expected 'Name: value'")
        if any(c in rest for c in "\r\n\0"):
            parser.error(f"--header {value!r}: a value cannot hold a line break")
        headers[name] = rest.strip()
    if token_file is not None:
        also = [f"${AGENT_TOKEN_ENV}"] if token and token.strip() else []
        if any(k.lower() == "authorization" for k in headers):
            also.append("an Authorization --header")
        if also:
            parser.error(f"give the token once: --token-file and {' and '.join(also)} both give it")
        try:
            token = read_token_file(token_file, parser.prog)
        except ValueError as exc:
            parser.error(f"--token-file: {exc}")
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
