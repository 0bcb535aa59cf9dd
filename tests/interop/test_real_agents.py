"""A real agent we did not write, on none of the SDK runtimes tested elsewhere: Zed's ``codex-acp``
(the Codex adapter, Rust; npm ``@zed-industries/codex-acp``, a node launcher for the native
binary). No credentials or network are needed: an environment-variable auth method takes a fake
key, and the model provider is pointed at a local fake of the OpenAI Responses endpoint whose
answers each test scripts: words streamed as text deltas, an endless stream, or silence (a turn
busy on its model).

Checked, launched by our driver and behind ``serve`` over WebSocket and Streamable HTTP: the
deltas arrive as typed ``agent_message_chunk`` updates and the turn ends ``end_turn``;
``session/cancel`` ends a turn busy on the model and a turn streaming, ``cancelled``, at the
ladder's first rung (the agent's request to the model, or the chunks seen, are the events waited
on before cancelling); the next turn gets its own words and nothing of the cancelled stream; no
codex-acp process survives the shutdown, and ``serve`` reaps it when the connection ends mid-turn.
And ``acp-driver check`` on it: the verdicts it earns (two rules broken, as real agents do).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from acp_driver.driver import AgentMessageChunk, RemoteAgent, Resolution, connect, launch

from ..remote.serving import ServeProcess, descendants, processes_running
from ..waiting import eventually
from .installs import CODEX_ACP_PACKAGE, CODEX_ACP_VERSION, InstallError, NpmAgent, PeerInstaller
from .sdk_peers import not_run

pytestmark = pytest.mark.interop

LIMIT = 60  # seconds: a bound on each test, never a timing assertion


class FakeModel:
    """An OpenAI Responses endpoint (``POST /v1/responses``, answered with server-sent events)
    whose answers the test scripts, one per request, in order:

    - ``("words", prefix, n)``: the words ``prefix0 .. prefix{n-1}`` as text deltas, then done;
    - ``("endless", prefix)``: a word every 20 ms until the agent hangs up;
    - ``("silent",)`` (also when the script is empty): the request is read, never answered.

    With ``decide`` set, it picks the answer from the request's body instead.
    """

    def __init__(self) -> None:
        self.script: list[tuple[Any, ...]] = []
        self.decide: Callable[[bytes], tuple[Any, ...]] | None = None
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
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length)
            self.requests.append(head)
            self.asked.set()
            if not head.startswith(b"POST /v1/responses"):
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            if self.decide is not None:
                step = self.decide(body)
            else:
                step = self.script.pop(0) if self.script else ("silent",)
            if step[0] == "silent":
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            writer.write(_event({"type": "response.created", "response": {"id": "resp"}}))
            item = {"type": "message", "role": "assistant", "id": "msg"}
            writer.write(
                _event(
                    {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}}
                )
            )
            words: list[str] = []
            i = 0
            while step[0] == "endless" or i < step[2]:
                words.append(f"{step[1]}{i} ")
                delta = {"item_id": "msg", "output_index": 0, "content_index": 0, "delta": words[-1]}
                writer.write(_event({"type": "response.output_text.delta", **delta}))
                await writer.drain()
                if step[0] == "endless":
                    await asyncio.sleep(0.02)
                i += 1
            content = [{"type": "output_text", "text": "".join(words), "annotations": []}]
            writer.write(
                _event(
                    {
                        "type": "response.output_item.done",
                        "output_index": 0,
                        "item": {**item, "content": content},
                    }
                )
            )
            usage = {"input_tokens": 1, "output_tokens": i, "total_tokens": i + 1}
            writer.write(_event({"type": "response.completed", "response": {"id": "resp", "usage": usage}}))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return  # the agent hung up (a cancelled turn)

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


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


@pytest.fixture
def codex(interop_peers: PeerInstaller) -> NpmAgent:
    try:
        return interop_peers.codex_acp()
    except InstallError as exc:
        not_run(f"cannot install {CODEX_ACP_PACKAGE}@{CODEX_ACP_VERSION}: {exc}")


@pytest.fixture
async def model() -> AsyncIterator[FakeModel]:
    fake = FakeModel()
    await fake.start()
    yield fake
    await fake.close()


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
    return processes_running(b"codex-acp")


def words_in(texts: list[str], prefix: str) -> list[str]:
    return [w for t in texts for w in t.split() if w.startswith(prefix) and w[len(prefix) :].isdigit()]


async def exercise(agent: RemoteAgent, model: FakeModel, cwd: Path) -> None:
    """Stream a turn, cancel one busy on its model and one streaming, then stream another."""
    await agent.authenticate("openai-api-key")
    session = await agent.new_session(cwd)
    # 1. A streamed answer: each delta an agent_message_chunk, then end_turn.
    model.script.append(("words", "a", 5))
    turn = session.prompt("say five words")
    texts = [u.text async for u in turn if isinstance(u, AgentMessageChunk)]
    assert (await turn).stop_reason == "end_turn"
    assert words_in(texts, "a") == ["a0", "a1", "a2", "a3", "a4"], texts
    # 2. Busy on a model that does not answer: session/cancel ends it cancelled.
    turn = session.prompt("say hi")
    assert (await model.next_request()).startswith(b"POST /v1/responses")
    outcome = await turn.cancel()
    assert outcome.resolution is Resolution.CANCELLED, outcome
    assert outcome.steps == ("session_cancel",), outcome
    assert (await turn).stop_reason == "cancelled"
    # 3. Cancelled while streaming: after three chunks.
    model.script.append(("endless", "b"))
    turn = session.prompt("talk forever")
    seen = 0
    async for update in turn:
        if isinstance(update, AgentMessageChunk) and words_in([update.text], "b"):
            seen += 1
            if seen == 3:
                break
    outcome = await turn.cancel()
    assert outcome.resolution is Resolution.CANCELLED, outcome
    assert outcome.steps == ("session_cancel",), outcome
    assert (await turn).stop_reason == "cancelled"
    # 4. The next turn gets its own words only: nothing of the cancelled stream.
    model.script.append(("words", "c", 2))
    turn = session.prompt("say two words")
    texts = [u.text async for u in turn if isinstance(u, AgentMessageChunk)]
    assert (await turn).stop_reason == "end_turn"
    assert words_in(texts, "c") == ["c0", "c1"], texts
    assert words_in(texts, "b") == [], texts


async def test_codex_launched_cancels_a_turn_busy_on_its_model(
    codex: NpmAgent, model: FakeModel, tmp_path: Path
) -> None:
    async with asyncio.timeout(LIMIT):
        agent = await launch(codex.argv, env=codex_env(tmp_path / "home", model.port), cwd=tmp_path)
        async with agent:
            assert agent.info.get("name") == "codex-acp", agent.info
            # launch's default protocol="auto" asked for 2 with v1's field names too; this
            # codex-acp speaks only v1 and answered 1: the same connection goes on in v1.
            assert agent.protocol_version == 1
            await exercise(agent, model, tmp_path)
            assert codex_processes(), "the agent is not running"
    await eventually(lambda: not codex_processes(), "no codex-acp process left")


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_codex_behind_serve(codex: NpmAgent, model: FakeModel, tmp_path: Path, scheme: str) -> None:
    env = codex_env(tmp_path / "home", model.port)
    async with ServeProcess.start("--cancel-budget", "4", "--", *codex.argv, env=env) as serve:
        url = scheme + serve.url[len("http") :]
        async with asyncio.timeout(LIMIT):
            async with await connect(url) as agent:
                await exercise(agent, model, tmp_path)
                # The connection ends mid-turn: serve cancels the turn and reaps the agent.
                session = await agent.new_session(tmp_path)
                session.prompt("say hi")
                await model.next_request()
                assert descendants(serve.process.pid), "serve runs no agent"
            await eventually(lambda: not descendants(serve.process.pid), "serve reaped codex-acp")


async def test_check_judges_codex(codex: NpmAgent, model: FakeModel, tmp_path: Path) -> None:
    """``acp-driver check`` on a real agent: its cancels land, and it breaks two rules real agents
    break -- it answers notifications (id-less ``-32601`` errors) and ignores stdin EOF (the
    audit kills its process group)."""

    def by_prompt(body: bytes) -> tuple[Any, ...]:
        # The body holds the whole conversation: the latest of the two markers is this prompt's.
        return (
            ("endless", "b")
            if body.rfind(b"BUSY-PROMPT") > body.rfind(b"QUICK-PROMPT")
            else ("words", "q", 2)
        )

    model.decide = by_prompt
    env = codex_env(tmp_path / "home", model.port)
    argv = ["--json", "--auth", "openai-api-key", "--timeout", "5"]
    argv += ["--busy-prompt", "BUSY-PROMPT talk forever", "--quick-prompt", "QUICK-PROMPT say two words"]
    check = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_driver", "check", *argv, "--", *codex.argv,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(4 * LIMIT):
        out, err = await check.communicate()
    report = json.loads(out)
    verdicts = {r["rule"]: (r["level"], r["result"], r["evidence"]) for r in report["results"]}
    assert check.returncode == 5, (check.returncode, verdicts, err.decode()[-2000:])
    assert report["agentInfo"]["name"] == "codex-acp"
    assert verdicts["session/cancel answered stopReason cancelled"][:2] == ("MUST", "pass"), verdicts
    assert verdicts["no turn update after the prompt response"][:2] == ("MUST", "pass"), verdicts
    assert verdicts["cancel on an idle session does not poison the next turn"][:2] == ("MUST", "pass"), (
        verdicts
    )
    level, result, evidence = verdicts["no reply to any notification"]
    assert (level, result) == ("MUST", "fail"), verdicts
    assert "without an id" in evidence, evidence
    assert "-32601" in evidence, evidence
    level, result, evidence = verdicts["exits after stdin EOF"]
    assert (level, result) == ("SHOULD", "fail"), verdicts
    assert "killed its process group" in evidence, evidence
    await eventually(lambda: not codex_processes(), "no codex-acp process left after the audit")
