"""A real agent we did not write, on none of the SDK runtimes tested elsewhere: Zed's ``codex-acp``
(the Codex adapter, Rust; npm ``@zed-industries/codex-acp``, a node launcher for the native
binary). No credentials or network are needed: an environment-variable auth method takes a fake
key, and the model provider is pointed at a local endpoint that accepts the request and never
answers -- a turn busy on its model, the case where a cancel must land.

The agent's request to that endpoint is the event the tests wait for before cancelling (the turn
is then really in flight). Checked: ``session/cancel`` ends the turn ``cancelled`` (the ladder's
first rung suffices), the next turn is not disturbed, and no process of the agent survives --
launched by the driver, and behind ``serve`` over WebSocket and Streamable HTTP when the
connection ends mid-turn.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_driver.driver import RemoteAgent, Resolution, connect, launch

from ..remote.serving import ServeProcess, descendants
from ..waiting import eventually
from .conftest import CODEX_ACP_PACKAGE, CODEX_ACP_VERSION, InstallError, NpmAgent, PeerInstaller, not_run

pytestmark = pytest.mark.interop

LIMIT = 60  # seconds: a bound on each test, never a timing assertion


class SilentModel:
    """An HTTP endpoint that reads each request's head and never answers."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.asked = asyncio.Event()
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._held.append(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        self.requests.append(head)
        self.asked.set()

    async def next_request(self) -> bytes:
        """Wait for the agent's next request to the model."""
        seen = len(self.requests)
        while len(self.requests) == seen:
            self.asked.clear()
            await self.asked.wait()
        return self.requests[seen]

    async def close(self) -> None:
        for writer in self._held:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
def codex(interop_peers: PeerInstaller) -> NpmAgent:
    try:
        return interop_peers.codex_acp()
    except InstallError as exc:
        not_run(f"cannot install {CODEX_ACP_PACKAGE}@{CODEX_ACP_VERSION}: {exc}")


@pytest.fixture
async def model() -> AsyncIterator[SilentModel]:
    silent = SilentModel()
    await silent.start()
    yield silent
    await silent.close()


def codex_env(home: Path, port: int) -> dict[str, str]:
    """A private home whose Codex configuration points the model at ``port``."""
    config = home / ".codex"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        'model_provider = "local"\nmodel = "gpt-5"\n\n[model_providers.local]\nname = "local"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    return {**os.environ, "HOME": str(home), "CODEX_HOME": str(config), "OPENAI_API_KEY": "sk-not-a-key"}


def codex_processes() -> list[int]:
    """Live processes below this one that run codex-acp (its launcher or its binary)."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"codex-acp" in cmdline:
            found.append(pid)
    return found


async def cancel_a_busy_turn(agent: RemoteAgent, model: SilentModel, cwd: Path) -> None:
    """A turn waits on the silent model; ``session/cancel`` ends it cancelled, twice in a row."""
    await agent.authenticate("openai-api-key")
    session = await agent.new_session(cwd)
    for _ in range(2):  # the second turn: nothing of the first is credited to it
        turn = session.prompt("say hi")
        head = await model.next_request()
        assert head.startswith(b"POST /v1/responses"), head
        outcome = await turn.cancel()
        assert outcome.resolution is Resolution.CANCELLED, outcome
        assert outcome.steps == ("session_cancel",), outcome
        result = await turn
        assert result.stop_reason == "cancelled", result


async def test_codex_launched_cancels_a_turn_busy_on_its_model(
    codex: NpmAgent, model: SilentModel, tmp_path: Path
) -> None:
    async with asyncio.timeout(LIMIT):
        agent = await launch(codex.argv, env=codex_env(tmp_path / "home", model.port), cwd=tmp_path)
        async with agent:
            assert agent.info.get("name") == "codex-acp", agent.info
            await cancel_a_busy_turn(agent, model, tmp_path)
            assert codex_processes(), "the agent is not running"
    await eventually(lambda: not codex_processes(), "no codex-acp process left")


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_codex_behind_serve(codex: NpmAgent, model: SilentModel, tmp_path: Path, scheme: str) -> None:
    env = codex_env(tmp_path / "home", model.port)
    async with ServeProcess.start("--cancel-budget", "4", "--", *codex.argv, env=env) as serve:
        url = scheme + serve.url[len("http") :]
        async with asyncio.timeout(LIMIT):
            async with await connect(url) as agent:
                await cancel_a_busy_turn(agent, model, tmp_path)
                # The connection ends mid-turn: serve cancels the turn and reaps the agent.
                session = await agent.new_session(tmp_path)
                session.prompt("say hi")
                await model.next_request()
                assert descendants(serve.process.pid), "serve runs no agent"
            await eventually(lambda: not descendants(serve.process.pid), "serve reaped codex-acp")
