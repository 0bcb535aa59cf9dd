"""Fixtures for the remote transports: the official SDK's server (``peers/sdk_server.py``) in a
subprocess on a loopback socket the test binds (port 0, inherited as an fd: no port race).

``sdk_server(token=..., cookie=...)`` starts one and returns a ``Server`` (its ``ws``/``http``
URLs, the process, ``seen()``: the headers that reached it). Every server is killed at the end
of the test. Without the SDK's ``http`` extra (or hypercorn) the tests are skipped with the
reason, unless ``ACP_INTEROP_REQUIRED=1``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

SERVER_SCRIPT = Path(__file__).with_name("peers") / "sdk_server.py"


def _problem() -> str | None:
    try:
        import acp.http.asgi  # noqa: F401
        import hypercorn  # noqa: F401
    except ImportError as exc:
        return (
            f"the official SDK's HTTP server (agent-client-protocol[http]) or hypercorn is missing: {exc!r}"
        )
    return None


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path
    tls: bool = False

    @property
    def ws(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/acp"

    @property
    def http(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/acp"

    def url(self, profile: str) -> str:
        return self.ws if profile == "ws" else self.http

    async def seen(self) -> list[dict[str, Any]]:
        """Every request that reached the server: its type, method, Authorization, Cookie."""
        async with httpx.AsyncClient(verify=False) as client:
            base = self.http.removesuffix("/acp")
            answer = await client.get(f"{base}/seen", timeout=30)
        result: list[dict[str, Any]] = answer.json()
        return result

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture(scope="session")
def shared_sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One plain server for the whole session, for tests that neither kill it nor need its
    options (each test opens its own connections: the server keeps one agent per connection)."""
    problem = _problem()
    if problem is not None:
        if os.environ.get("ACP_INTEROP_REQUIRED") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    server = _start(tmp_path_factory.mktemp("shared-server"), "shared")
    try:
        yield server
    finally:
        _stop([server])


@pytest.fixture
async def sdk_server(tmp_path: Path) -> AsyncIterator[Callable[..., Server]]:
    async with sdk_servers(tmp_path) as start:
        yield start


@contextlib.asynccontextmanager
async def sdk_servers(tmp_path: Path) -> AsyncIterator[Callable[..., Server]]:
    """``start(token=..., cookie=...)`` starts a server; all are killed on the way out."""
    problem = _problem()
    if problem is not None:
        if os.environ.get("ACP_INTEROP_REQUIRED") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    started: list[Server] = []

    def start(
        *, token: str | None = None, cookie: bool = False, tls: tuple[Path, Path] | None = None
    ) -> Server:
        server = _start(tmp_path, str(len(started)), token=token, cookie=cookie, tls=tls)
        started.append(server)
        return server

    try:
        yield start
    finally:
        _stop(started)


def _start(
    where: Path,
    label: str,
    *,
    token: str | None = None,
    cookie: bool = False,
    tls: tuple[Path, Path] | None = None,
) -> Server:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    port = listener.getsockname()[1]
    argv = [sys.executable, str(SERVER_SCRIPT), "--fd", str(listener.fileno())]
    if token is not None:
        argv += ["--token", token]
    if cookie:
        argv.append("--cookie")
    if tls is not None:
        argv += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
    stderr_path = where / f"server-{label}.stderr"
    with stderr_path.open("wb") as err:
        process = subprocess.Popen(
            argv, pass_fds=(listener.fileno(),), stdin=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    listener.close()  # the server holds its copy; connections queue in its backlog
    return Server(port, process, stderr_path, tls=tls is not None)


def _stop(started: list[Server]) -> None:
    for server in started:
        server.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=30)


PROFILES = ["ws", "http"]


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own authority) and its key, made by openssl."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", str(key), "-out", str(cert),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"openssl cannot make a test certificate: {exc}")
    return cert, key
