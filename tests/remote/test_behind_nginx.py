"""Beyond one machine on existing infrastructure: two ``acp-driver serve`` instances behind a
stock nginx (Debian's package), configured exactly as docs/remote.md shows (the test reads the
configuration out of the doc), WebSocket proxying and cookie affinity included.

Opt-in: skipped loudly where nginx is absent; ``ACP_NGINX_REQUIRED=1`` (set by CI, which installs
nginx) turns the skip into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

from acp_driver.driver import Resolution, connect

from ..waiting import eventually
from .serving import ServeProcess, descendants

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "remote.md"

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
)


def _nginx_or_skip() -> str:
    if NGINX is None:
        reason = "nginx is not installed (Debian: apt-get install nginx); the reverse-proxy test cannot run"
        if os.environ.get("ACP_NGINX_REQUIRED") == "1":
            pytest.fail(reason + " and ACP_NGINX_REQUIRED=1")
        pytest.skip(reason)
    return NGINX


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nginx_config_from_doc(front: int, backends: dict[str, int]) -> str:
    """The ``http`` block of docs/remote.md with its example ports replaced by the test's."""
    text = DOC.read_text()
    block = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert block is not None, "docs/remote.md lost its nginx configuration block"
    conf = block.group(1)
    conf = conf.replace("127.0.0.1:8765", f"127.0.0.1:{front}")
    for doc_name, doc_port, (name, port) in zip(("a", "b"), (8766, 8767), backends.items(), strict=True):
        assert name == doc_name
        conf = conf.replace(f"127.0.0.1:{doc_port}", f"127.0.0.1:{port}")
    return conf


@contextlib.contextmanager
def nginx(workdir: Path, http_block: str) -> Iterator[subprocess.Popen[bytes]]:
    binary = _nginx_or_skip()
    (workdir / "tmp").mkdir()
    conf = workdir / "nginx.conf"
    conf.write_text(
        "worker_processes 1;\ndaemon off;\npid nginx.pid;\nerror_log stderr warn;\n"
        "events { worker_connections 4096; }\n"
        "http {\n    access_log off;\n"
        "    client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;\n"
        "    uwsgi_temp_path tmp; scgi_temp_path tmp;\n" + http_block + "}\n"
    )
    proc = subprocess.Popen([binary, "-p", str(workdir), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _port(serve: ServeProcess) -> int:
    return int(serve.url.rsplit(":", 1)[1].split("/", 1)[0])


@pytest.fixture
async def farm(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, ServeProcess]]]:
    _nginx_or_skip()
    async with contextlib.AsyncExitStack() as stack:
        serves = {
            name: await stack.enter_async_context(ServeProcess.start("--instance", name))
            for name in ("a", "b")
        }
        front = _free_port()
        with nginx(tmp_path, nginx_config_from_doc(front, {n: _port(s) for n, s in serves.items()})):
            await _wait_listening(front)
            yield f"127.0.0.1:{front}", serves


async def _wait_listening(port: int) -> None:
    async def ok() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    async with asyncio.timeout(30):
        while not await ok():
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_sessions_spread_over_two_serves_and_every_cancel_lands(
    farm: tuple[str, dict[str, ServeProcess]], scheme: str, tmp_path: Path
) -> None:
    front, serves = farm
    jars = [CookieJar() for _ in range(6)]
    agents = [await connect(f"{scheme}://{front}/acp", cookies=jar) for jar in jars]
    try:
        # The affinity cookie each instance set: both instances serve some of the connections.
        instances = [{c.value for c in jar if c.name == "acp_affinity"} for jar in jars]
        assert all(len(names) == 1 for names in instances), instances
        assert set().union(*instances) == {"a", "b"}, instances
        # Live agents on both instances while the turns run.
        sessions = [await agent.new_session(tmp_path) for agent in agents]
        turns = [session.prompt("/stream 400 20") for session in sessions]
        for turn in turns:  # every turn streams through the proxy before it is cancelled
            async for update in turn:
                if update.kind == "agent_message_chunk":
                    break
        for name, serve in serves.items():
            assert descendants(serve.process.pid), f"serve {name} holds no agent"
        outcomes = await asyncio.gather(*(turn.cancel() for turn in turns))
        results = await asyncio.gather(*turns)
        assert [o.resolution for o in outcomes] == [Resolution.CANCELLED] * len(turns), outcomes
        assert [r.stop_reason for r in results] == ["cancelled"] * len(turns), results
    finally:
        for agent in agents:
            await agent.aclose()
    # Each connection's end reaps its agent on its instance: no process left behind either serve.
    for name, serve in serves.items():
        await eventually(lambda s=serve: not descendants(s.process.pid), f"serve {name} has no children")
