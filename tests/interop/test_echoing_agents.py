"""Two real v1 agents that answer ``initialize`` with the client's own ``protocolVersion``: under
the default ``--protocol auto`` the host asks for 2 and they "agree", yet speak v1. Both are
Python agents on PyPI, on the official Python SDK 0.12.1: fast-agent (``fast-agent acp``, from
``fast-agent-acp``) and gptme (``gptme-acp``). Each runs offline: its model provider is pointed,
the way its own documentation does for a local server (fast-agent's ``generic`` provider and
``GENERIC_BASE_URL``; gptme's ``local/`` models and ``OPENAI_BASE_URL``), at a fake
OpenAI-compatible Chat Completions server on 127.0.0.1 whose answers each test scripts; a private
home (and XDG folders) keeps the machine's configuration out and theirs in.

Before the version was decided from the agent's behaviour, the host spoke v2 to them: ``run``
waited forever for an idle ``state_update`` and showed none of the streamed text, Ctrl-C cost
the whole cancel ladder (SIGTERM to gptme 4.4 s after its turn had ended), and ``check`` judged
them by v2's rules. Checked here, each agent in turn:

- ``acp-driver run`` (the CLI, as a user runs it) completes: exit 0, the streamed words on
  stdout, the agent line saying ``ACP v1``, and the stderr line ``note: agent claims v2 but
  answers v1: speaking v1`` once;
- ``launch`` (the driver's default protocol) speaks v1 to it, and ``cancel()`` of a turn
  streaming from the model is resolved by the agent's v1 answer at the ladder's first rung
  (``session/cancel``), no further rung taken: fast-agent stops an endless stream and answers
  ``cancelled`` (and its next turn gets its own words only); gptme 0.35.1 does not stop a turn
  on ``session/cancel`` (its model call runs on in a thread), so its model's stream ends once
  the cancel went out and gptme answers ``end_turn``: the turn ends then (``completed``); against
  an endless stream the ladder goes on to SIGTERM, which ends the turn (``killed``);
- SIGINT to ``acp-driver run`` while the turn streams: the same, from the CLI (exit 130, no
  ``$/cancel_request`` nor SIGTERM);
- ``acp-driver check`` judges it by v1's rules: ``protocolVersion`` 1, exactly the v1 rules'
  ids, the note on stderr, and the verdicts it earns: fast-agent passes every MUST that applies;
  gptme fails two (its turn runs on after ``session/cancel``; a cancel on an idle session makes
  it forget the session, so the next prompt ends ``cancelled``).

Each waits on events (words shown, the cancel sent), never on time; ``LIMIT`` only bounds a test.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from acp_driver.cli._check_catalog import catalog
from acp_driver.core import ECHO_NOTE
from acp_driver.driver import AgentMessageChunk, Resolution, launch

from ..remote.serving import processes_running
from ..waiting import eventually
from .fake_openai_chat import Endless, FakeChatCompletions, Request, Step, Until, Words
from .installs import (
    FAST_AGENT_DIST,
    FAST_AGENT_VERSION,
    GPTME_DIST,
    GPTME_VERSION,
    InstallError,
    PeerInstaller,
)
from .sdk_peers import not_run

# The first test of each agent installs it (about 30 s from a clean cache, after any other
# peer's install holding the cache's lock): more than the suite's 120 s may be needed.
pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

LIMIT = 60  # seconds: a bound on each test, never a timing assertion
MODEL = "fake-model"


@dataclass(frozen=True)
class Echoer:
    """One of the agents, ready to start: how, with what environment, and what it calls itself."""

    name: str
    """``agentInfo.name``."""
    shown: str
    """What the agent line of ``run`` calls it (its title, else its name)."""
    honours_cancel: bool
    """Whether ``session/cancel`` stops its turn (fast-agent); gptme 0.35.1's ``cancel`` only
    forgets the session: its model call runs on (in a thread) and the turn ends ``end_turn``
    when the model's answer does."""
    argv: tuple[str, ...]
    env: dict[str, str]

    @property
    def command_line(self) -> str:
        """``argv`` as ``--agent`` takes it."""
        return shlex.join(self.argv)


def private_env(home: Path) -> dict[str, str]:
    """This environment with a fresh home: nothing of the machine's configuration is read, and
    what the agents write (settings, logs, sessions) stays under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    # The defaults are what is tested: no protocol chosen, no other endpoint or model inherited.
    for name in ("ACP_DRIVER_PROTOCOL", "OPENAI_API_BASE", "OPENAI_BASE_URL", "MODEL", "GENERIC_BASE_URL"):
        env.pop(name, None)
    env["HOME"] = str(home)
    for name, under in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ):
        env[name] = str(home / under)
    home.mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture
async def model() -> AsyncIterator[FakeChatCompletions]:
    fake = FakeChatCompletions()
    await fake.start()
    yield fake
    await fake.close()


@pytest.fixture(params=["fast-agent", "gptme"])
def echoer(
    request: pytest.FixtureRequest, interop_peers: PeerInstaller, model: FakeChatCompletions, tmp_path: Path
) -> Echoer:
    env = private_env(tmp_path / "home")
    if request.param == "fast-agent":
        try:
            fast_agent = interop_peers.fast_agent()
        except InstallError as exc:
            not_run(f"cannot install {FAST_AGENT_DIST}=={FAST_AGENT_VERSION}: {exc}")
        # The generic provider is fast-agent's OpenAI-compatible one (Ollama's by default); it
        # needs no key.
        env["GENERIC_BASE_URL"] = model.base_url
        argv = (str(fast_agent.bin / "fast-agent"), "acp", "--model", f"generic.{MODEL}")
        return Echoer("fast-agent-acp", "fast-agent-acp", True, argv, env)
    try:
        gptme = interop_peers.gptme()
    except InstallError as exc:
        not_run(f"cannot install {GPTME_DIST}=={GPTME_VERSION}: {exc}")
    env.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="sk-not-a-key", MODEL=f"local/{MODEL}")
    return Echoer("gptme", "gptme ACP Agent", False, (str(gptme.bin / "gptme-acp"),), env)


def words_in(texts: list[str], prefix: str) -> list[str]:
    """The fake model's words ``prefix0, prefix1, ...`` in the text shown (gptme's own notes, on
    the same stream, do not end with a space)."""
    return [w for t in texts for w in re.findall(rf"{prefix}[0-9]+", t)]


async def acp_driver(*argv: str, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """The CLI as a user runs it."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_driver", *argv,
        env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def outputs(proc: asyncio.subprocess.Process, limit: float) -> tuple[str, str]:
    """``proc``'s stdout and stderr once it exits (killed if it outlives ``limit``)."""
    try:
        async with asyncio.timeout(limit):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return out.decode(), err.decode()


async def test_run_completes_in_v1(echoer: Echoer, model: FakeChatCompletions, tmp_path: Path) -> None:
    model.script.append(Words("word", 5))
    run = await acp_driver(
        "run", "--agent", echoer.command_line, "say five words", env=echoer.env, cwd=tmp_path
    )
    stdout, stderr = await outputs(run, LIMIT)
    assert run.returncode == 0, (run.returncode, stdout, stderr[-3000:])
    assert words_in([stdout], "word") == [f"word{i}" for i in range(5)], stdout
    assert stderr.count(ECHO_NOTE) == 1, stderr[-3000:]
    assert f"note: {ECHO_NOTE}\n" in stderr, stderr[-3000:]
    assert re.search(rf"^agent: {re.escape(echoer.shown)} .*, ACP v1$", stderr, re.MULTILINE), stderr[-3000:]
    assert "turn completed (stop reason end_turn" in stderr, stderr[-3000:]
    assert len(model.requests) == 1, model.requests


def busy_step(echoer: Echoer, cancel_sent: asyncio.Event) -> Step:
    """The model's answer to a turn the test cancels: endless for an agent that stops on
    ``session/cancel``; for gptme, which does not, a stream that ends once the cancel went out."""
    return Endless("busy") if echoer.honours_cancel else Until("busy", cancel_sent)


async def test_launch_cancels_a_streaming_turn(
    echoer: Echoer, model: FakeChatCompletions, tmp_path: Path
) -> None:
    cancel_sent = asyncio.Event()

    def tracer(direction: str, message: bytes) -> None:
        if direction == "out" and b'"session/cancel"' in message:
            cancel_sent.set()

    marker = echoer.argv[0].encode()  # in the agent's command line, and its supervisor's
    async with asyncio.timeout(LIMIT):
        agent = await launch(echoer.argv, env=echoer.env, cwd=tmp_path, tracer=tracer)
        async with agent:
            assert agent.info.get("name") == echoer.name, agent.info
            assert agent.protocol_version == 1
            assert agent.negotiation_note == ECHO_NOTE
            assert processes_running(marker), "the agent is not running"
            session = await agent.new_session(tmp_path)
            # Cancelled while streaming, after three words shown.
            model.script.append(busy_step(echoer, cancel_sent))
            turn = session.prompt("talk forever")
            seen = 0
            async for update in turn:
                if isinstance(update, AgentMessageChunk):
                    seen += len(words_in([update.text], "busy"))
                    if seen >= 3:
                        break
            outcome = await turn.cancel()
            # Resolved by the agent's v1 answer, at the ladder's first rung.
            assert outcome.steps == ("session_cancel",), outcome
            if echoer.honours_cancel:
                assert outcome.resolution is Resolution.CANCELLED, outcome
                assert (await turn).stop_reason == "cancelled"
                # The next turn gets its own words only: nothing of the cancelled stream.
                model.script.append(Words("next", 2))
                turn = session.prompt("say two words")
                texts = [u.text async for u in turn if isinstance(u, AgentMessageChunk)]
                assert (await turn).stop_reason == "end_turn"
                assert words_in(texts, "next") == ["next0", "next1"], texts
                assert words_in(texts, "busy") == [], texts
            else:
                # gptme's answer once its model call ended: end_turn, the cancel ignored.
                assert outcome.resolution is Resolution.COMPLETED, outcome
                assert (await turn).stop_reason == "end_turn"
                # Its cancel also forgot the session. On a new one, a turn whose model streams
                # without end is ended by the ladder: SIGTERM, the rung after $/cancel_request.
                session = await agent.new_session(tmp_path)
                model.script.append(Endless("more"))
                turn = session.prompt("talk forever")
                async for update in turn:
                    if isinstance(update, AgentMessageChunk) and words_in([update.text], "more"):
                        break
                outcome = await turn.cancel()
                assert outcome.resolution is Resolution.KILLED, outcome
                assert outcome.steps == ("session_cancel", "cancel_request", "terminate"), outcome
    await eventually(lambda: not processes_running(marker), f"no process of {echoer.name} left")


async def test_sigint_to_run_ends_the_turn_at_the_first_rung(
    echoer: Echoer, model: FakeChatCompletions, tmp_path: Path
) -> None:
    cancel_sent = asyncio.Event()
    model.script.append(busy_step(echoer, cancel_sent))
    run = await acp_driver(
        "run", "--agent", echoer.command_line, "talk forever", env=echoer.env, cwd=tmp_path
    )
    assert run.stdout is not None
    assert run.stderr is not None
    stderr = ""

    async def read_stderr(stream: asyncio.StreamReader) -> None:
        nonlocal stderr
        async for line in stream:
            stderr += line.decode(errors="replace")
            if "sent session/cancel" in line.decode(errors="replace"):
                cancel_sent.set()

    try:
        async with asyncio.timeout(LIMIT):
            reading = asyncio.ensure_future(read_stderr(run.stderr))
            shown = ""
            while len(words_in([shown], "busy")) < 3:  # the turn streams: its words are on stdout
                chunk = await run.stdout.read(256)
                assert chunk, (shown, stderr[-3000:])
                shown += chunk.decode(errors="replace")
            run.send_signal(signal.SIGINT)
            shown += (await run.stdout.read()).decode(errors="replace")
            await reading
            await run.wait()
    finally:
        if run.returncode is None:
            run.kill()
            await run.wait()
    assert stderr.count(ECHO_NOTE) == 1, stderr[-3000:]
    assert "sent session/cancel" in stderr, stderr[-3000:]
    # Nothing further on the ladder: no $/cancel_request, no signal to the agent.
    assert "cancel_request" not in stderr, stderr[-3000:]
    assert "SIGTERM" not in stderr, stderr[-3000:]
    assert "killing" not in stderr, stderr[-3000:]
    assert len(words_in([shown], "busy")) >= 3, shown
    assert run.returncode == 130, (run.returncode, stderr[-3000:])
    if echoer.honours_cancel:
        assert "turn cancelled (stop reason cancelled" in stderr, stderr[-3000:]
        assert "session/cancel took effect" in stderr, stderr[-3000:]
    else:
        assert "stop reason end_turn" in stderr, stderr[-3000:]


V1_RULES = {rule.id for rule, _ in catalog() if 1 in rule.versions}


async def test_check_judges_by_v1_rules(echoer: Echoer, model: FakeChatCompletions, tmp_path: Path) -> None:
    def by_prompt(request: Request) -> Step:
        return Endless("busy") if "BUSY-PROMPT" in request.last_user_text() else Words("quick", 2)

    model.decide = by_prompt
    argv = ["--json", "--timeout", "5", "--busy-prompt", "BUSY-PROMPT talk forever"]
    argv += ["--quick-prompt", "QUICK-PROMPT say two words", "--", *echoer.argv]
    check = await acp_driver("check", *argv, env=echoer.env, cwd=tmp_path)
    out, stderr = await outputs(check, 4 * LIMIT)
    report = json.loads(out)
    verdicts = {r["id"]: (r["level"], r["result"], r["evidence"]) for r in report["results"]}
    assert report["protocolVersion"] == 1, (report["protocolVersion"], stderr[-3000:])
    assert set(verdicts) == V1_RULES, verdicts
    assert f"check: {ECHO_NOTE}\n" in stderr, stderr[-3000:]
    if echoer.honours_cancel:  # fast-agent passes every MUST that applies
        assert check.returncode == 0, (check.returncode, verdicts, stderr[-3000:])
        for rule in (
            "cancel-stop-reason",
            "no-work-after-cancel",
            "idle-cancel-harmless",
            "no-second-stop-reason",
        ):
            assert verdicts[rule][:2] == ("MUST", "pass"), (rule, verdicts)
        return
    # gptme breaks two MUSTs, by v1's reading of the wire: its turn runs on after session/cancel
    # (the model's stream here is endless), and the cancel on an idle session makes it forget
    # the session, so the next prompt ends at once 'cancelled'.
    assert check.returncode == 5, (check.returncode, verdicts, stderr[-3000:])
    level, result, evidence = verdicts["cancel-stop-reason"]
    assert (level, result) == ("MUST", "fail"), verdicts
    assert evidence.startswith("no answer within 5 s"), evidence
    level, result, evidence = verdicts["idle-cancel-harmless"]
    assert (level, result) == ("MUST", "fail"), verdicts
    assert "the next turn ended cancelled" in evidence, evidence
