"""The official TypeScript SDK's remote CLIENTS (2.4.0: ``createWebSocketStream`` with the npm
``ws`` package, ``createHttpStream`` with Node's fetch) against OUR server, ``acp-driver serve``.

``peers/ts_remote_client.mjs`` runs a client app of the SDK over each profile and prints what it
saw as JSON; the tests assert on it. One ``serve`` (a subprocess serving the bundled reference
agent, ``--instance ts`` so it sets an affinity cookie) is shared by the module: each script run
opens its own connection, hence its own agent process. The Python SDK's clients are in
``test_remote_sdk_clients.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..remote.serving import descendants, pid_gone
from ..waiting import eventually
from .installs import PeerInstaller, TypeScriptSdk
from .peer_scripts import run_script
from .sdk_peers import PEERS_DIR, typescript_sdk_or_skip

pytestmark = pytest.mark.interop

each_profile = pytest.mark.parametrize("profile", ["websocket", "http"])

SCRIPT = PEERS_DIR / "ts_remote_client.mjs"
CANCEL_BUDGET = 2.0
IDLE_TIMEOUT = 3.0
"""Short, so that an HTTP client that vanishes without ``DELETE`` is noticed within the test;
longer than any gap between two requests of a script (the scripts wait on nothing else)."""
REAPED = 30.0  # seconds: a bound on waiting for the agent to go, never a timing assertion


@dataclass
class Serve:
    process: subprocess.Popen[bytes]
    url: str
    stderr_path: Path

    def agents(self) -> list[int]:
        return descendants(self.process.pid)

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def end_reason(self, connection_id: str) -> str | None:
        """Why serve ended this connection (its ``-v`` log line), or None before it did."""
        prefix = f"{connection_id}: connection ends: "
        for line in self.log().splitlines():
            _, found, reason = line.partition(prefix)
            if found:
                return reason
        return None


@pytest.fixture(scope="module")
def typescript(interop_peers: PeerInstaller) -> TypeScriptSdk:
    return typescript_sdk_or_skip(interop_peers)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, typescript: TypeScriptSdk) -> Iterator[Serve]:
    stderr_path = tmp_path_factory.mktemp("ts-clients") / "serve.stderr"
    argv = [
        sys.executable,
        *("-m", "acp_driver", "serve", "-v", "--port", "0", "--instance", "ts"),
        *("--cancel-budget", str(CANCEL_BUDGET), "--idle-timeout", str(IDLE_TIMEOUT)),
    ]
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        prefix = "acp-driver serve: listening on "
        deadline = time.monotonic() + 30
        url = None
        while url is None:  # the ready line, polled from the log file (no pipe to keep drained)
            for line in stderr_path.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    url = line[len(prefix) :]
            assert process.poll() is None, f"serve exited before its ready line:\n{stderr_path.read_text()}"
            assert time.monotonic() < deadline, f"no ready line from serve:\n{stderr_path.read_text()}"
            if url is None:
                time.sleep(0.05)
        yield Serve(process, url, stderr_path)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _argv(typescript: TypeScriptSdk, *args: str) -> list[str]:
    return [str(typescript.node), str(SCRIPT), *args]


def _env(typescript: TypeScriptSdk) -> dict[str, str]:
    return {"ACP_TS_SDK_DIR": str(typescript.folder)}


async def _no_agents(serve: Serve) -> None:
    """Agents of earlier tests' connections are reaped (within the cancel budget) before we start."""
    await eventually(lambda: serve.agents() == [], "the agents of earlier connections to be reaped", REAPED)


@each_profile
async def test_ts_client_session_turns_permission_and_cancels(
    serve: Serve, typescript: TypeScriptSdk, profile: str
) -> None:
    await _no_agents(serve)
    run = await run_script(_argv(typescript, profile, serve.url, "session"), _env(typescript))
    result = run.json()
    report = f"{run.report()}\n--- result ---\n{ {k: v for k, v in result.items() if k != 'wire'} }"
    assert run.returncode == 0, report
    assert "failure" not in result, report
    assert result["agent_info"]["name"] == "acp-driver-reference-agent", report
    assert result["protocol_version"] == 1

    # A turn: streamed updates before its answer, a permission request answered by the TS client.
    assert result["turn"]["stop_reason"] == "end_turn", report
    assert result["turn"]["texts"] == [
        "chunk 1/3\n",
        "chunk 2/3\n",
        "chunk 3/3\n",
        "permission outcome: selected allow\n",
    ], report
    (asked,) = result["permission_requests"]
    assert asked["sessionId"] == result["session_id"]
    assert [o["optionId"] for o in asked["options"]] == ["allow", "reject"]

    # session/cancel mid-turn: the turn answers `cancelled`, the connection goes on.
    assert result["cancelled_turn"]["stop_reason"] == "cancelled", report
    assert 1 <= result["cancelled_turn"]["updates"] < 1000, report

    # $/cancel_request from the SDK's cancellationSignal reaches the agent through our relay.
    assert result["cancel_request"] == {"error": {"code": -32800, "message": "Request cancelled"}}, report
    assert result["after_cancel_request"] == {"still": "here"}, report
    sent = [e["m"] for e in result["wire"] if e["d"] == "outgoing"]
    (sleep,) = [m for m in sent if m.get("method") == "_acp_driver/sleep"]
    assert {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sleep["id"]}} in sent

    if profile == "websocket":
        socket = result["socket"]
        assert socket["status"] == 101, report
        assert socket["connection"], report
        assert socket["set_cookie"] == ["acp_affinity=ts; Path=/; HttpOnly; SameSite=Lax"], report
        # The SDK closes with close() and no code: a close frame without a status (1005).
        assert socket["close_code"] == 1005, report
    else:
        requests = result["requests"]
        initialize, *rest = requests
        assert (initialize["method"], initialize["status"]) == ("POST", 200), report
        assert initialize["set_cookie"] == "acp_affinity=ts; Path=/; HttpOnly; SameSite=Lax"
        connection = initialize["answered_connection"]
        # Every later request names the connection and sends the affinity cookie back (the RFD).
        assert rest, report
        assert all(r["connection"] == connection for r in rest), report
        assert all(r["cookie"] == "acp_affinity=ts" for r in rest), report
        *body, delete = rest
        assert (delete["method"], delete["status"]) == ("DELETE", 202), report
        # The SDK POSTs one message at a time, but an answer can come on a stream before its
        # POST's 202: the SDK may then close with that last POST open, and aborts it.
        if body[-1]["status"] is None:
            assert (body[-1]["method"], body[-1].get("error")) == ("POST", "AbortError"), report
            body.pop()
        assert {(r["method"], r["status"]) for r in body} == {("GET", 200), ("POST", 202)}, report
        # The permission answer is a session-scoped POST (Acp-Session-Id), as the RFD asks.
        (answer,) = [r for r in rest if isinstance(r.get("message"), dict) and "outcome" in str(r["message"])]
        assert answer["session"] == result["session_id"], report
        streams = [r["session"] for r in rest if r["method"] == "GET"]
        assert sorted(streams, key=str) == sorted([None, result["session_id"]], key=str), report

    # Reconnecting with the same cookie store, the TS client sends serve's affinity cookie on the
    # new connection's first request (the WebSocket upgrade / the initialize POST).
    assert result["reconnect"] == {"agent": "acp-driver-reference-agent", "cookie": "acp_affinity=ts"}, report

    # The SDK closed the connections: the server reaps their agents.
    await eventually(
        lambda: serve.agents() == [], "the agent to be reaped after the TS client closed", REAPED
    )


@each_profile
@pytest.mark.parametrize("leave", ["close", "exit"])
async def test_ts_client_leaving_mid_turn_the_server_reaps_the_agent(
    serve: Serve, typescript: TypeScriptSdk, profile: str, leave: str
) -> None:
    await _no_agents(serve)
    process = await asyncio.create_subprocess_exec(
        *_argv(typescript, profile, serve.url, "leave", leave),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **_env(typescript)},
        start_new_session=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = await process.stdout.readline()
            assert json.loads(line or b"null") == {"event": "mid-turn"}, (
                line,
                (await process.stderr.read()).decode() if process.stderr else "",
            )
            agents = serve.agents()
            assert agents, "no agent process under serve while its turn streams"
            process.stdin.write(b"leave\n")
            await process.stdin.drain()
            out, err = await process.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    result = json.loads(out.decode().splitlines()[-1])
    assert process.returncode == 0, err.decode()
    assert "failure" not in result, err.decode()
    assert result["updates_seen"] >= 1
    if profile == "websocket" and leave == "close":
        assert result["socket"]["close_code"] == 1005, result["socket"]
    if profile == "http" and leave == "close":
        assert result["requests"][-1]["method"] == "DELETE", result["requests"]
        assert result["requests"][-1]["status"] == 202, result["requests"]
    if profile == "http" and leave == "exit":
        # No DELETE and no stream left: only the idle timeout tells the server the client is
        # gone (the RFD gives an HTTP server no other sign); it then ends the connection.
        assert all(r["method"] != "DELETE" for r in result["requests"]), result["requests"]
    # The turn was live when the client left: the server ends the connection -- for the reason
    # this way of leaving gives it -- cancels the turn and reaps the agent's group.
    if profile == "websocket":
        connection_id, why = result["socket"]["connection"], "the client closed the WebSocket"
    else:
        connection_id = result["requests"][0]["answered_connection"]
        why = (
            "the client ended the connection (DELETE)" if leave == "close" else f"idle for {IDLE_TIMEOUT:g} s"
        )
    await eventually(
        lambda: serve.end_reason(connection_id) is not None, "serve to end the connection", REAPED
    )
    assert (serve.end_reason(connection_id) or "").startswith(why), serve.log()[-3000:]
    await eventually(
        lambda: all(pid_gone(pid) for pid in agents) and serve.agents() == [],
        f"the agent ({agents}) to be reaped after the TS client left ({leave})\n{serve.log()[-3000:]}",
        REAPED,
    )


UNKNOWN_SESSION_404 = (
    "the RFD answers an unknown Acp-Session-Id 404, and so does serve; the TS SDK's HTTP client "
    "first opens the session's SSE stream, and takes any 404 as the whole connection gone: it "
    "fails every request and DELETEs the connection (its own server opens a stream for any "
    "session id, so it never answers 404 there). Over WebSocket the agent's error comes back and "
    "the connection lives on."
)


@pytest.mark.parametrize(
    "profile",
    ["websocket", pytest.param("http", marks=pytest.mark.xfail(strict=True, reason=UNKNOWN_SESSION_404))],
)
async def test_ts_client_prompting_an_unknown_session_keeps_the_connection(
    serve: Serve, typescript: TypeScriptSdk, profile: str
) -> None:
    await _no_agents(serve)
    run = await run_script(_argv(typescript, profile, serve.url, "unknown_session"), _env(typescript))
    result = run.json()
    report = f"{run.report()}\n--- result ---\n{ {k: v for k, v in result.items() if k != 'wire'} }"
    # The agent's own answer: a JSON-RPC error naming the session (-32002, resource not found).
    assert result["unknown_session"]["error"]["code"] == -32002, report
    assert result["after_unknown_session"] == {"result": {"still": "here"}}, report
    assert run.returncode == 0, report
