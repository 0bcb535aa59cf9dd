"""The CLI with a remote agent: ``run --agent URL``, ``--header``, Ctrl-C through the network
ladder, ``check -- URL`` (the process rules are "n/a", never passed or failed), exit codes.
Real processes: the CLI and the official SDK's server, on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from ..waiting import eventually
from .conftest import PROFILES
from .serving import ServeProcess, descendants

LIMIT = 90


async def cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(LIMIT):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("profile", PROFILES)
async def test_run_with_a_url_end_to_end(sdk_server: Any, profile: str) -> None:
    server = sdk_server(token="tok")
    url = server.url(profile)
    code, out, err = await cli(
        "run", "--json", "--agent", url, "--header", "Authorization: Bearer tok", "/stream 3 1"
    )
    assert code == 0, err
    found = events(out)
    assert found[0]["type"] == "agent"
    assert found[0]["url"] == url
    assert found[0]["pid"] is None
    chunks = [e["update"]["content"]["text"] for e in found if e["type"] == "update"]
    assert chunks == ["chunk 0", "chunk 1", "chunk 2"]
    assert found[-1]["resolution"] == "completed"
    assert any(r["authorization"] == "Bearer tok" for r in await server.seen())


async def test_without_the_header_the_start_fails_clearly(sdk_server: Any) -> None:
    server = sdk_server(token="tok")
    code, _out, err = await cli("run", "--agent", server.http, "hi")
    assert code == 1
    assert "HTTP 401" in err
    assert server.http in err


async def test_header_needs_a_url_and_a_name() -> None:
    code, _out, err = await cli("run", "--header", "Authorization: Bearer x", "hi")
    assert code == 2
    assert "--header needs a remote agent" in err
    code, _out, err = await cli("run", "--agent", "ws://127.0.0.1:9/acp", "--header", "no colon here", "hi")
    assert code == 2
    assert "expected 'Name: value'" in err


@pytest.mark.parametrize("profile", PROFILES)
async def test_ctrl_c_cancels_a_remote_turn(shared_sdk_server: Any, profile: str) -> None:
    server = shared_sdk_server
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "run",
        "--json",
        "--agent",
        server.url(profile),
        "/sleep 600000",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(LIMIT):
        while True:
            line = await process.stdout.readline()
            assert line, "the CLI ended before the turn started"
            seen.append(json.loads(line))
            if seen[-1]["type"] == "update":
                break
        process.send_signal(signal.SIGINT)
        rest, err = await process.communicate()
    assert process.returncode == 130, err.decode()
    result = events(rest.decode())[-1]
    assert result["type"] == "result"
    assert result["resolution"] == "cancelled"
    assert result["cancel"]["resolvedBy"] == "session_cancel"


async def test_check_a_remote_agent(shared_sdk_server: Any) -> None:
    server = shared_sdk_server
    code, out, err = await cli("check", "--json", "--timeout", "5", "--", server.ws)
    assert code == 0, err
    document = json.loads(out)
    by_rule = {r["rule"]: r for r in document["results"]}
    eof = by_rule["exits after stdin EOF"]
    assert eof["result"] == "n/a"
    assert "not applicable over a network" in eof["evidence"]
    assert document["verdict"] == "passed"
    musts = [r for r in document["results"] if r["level"] == "MUST"]
    assert musts
    assert all(r["result"] == "pass" for r in musts)


async def test_chat_with_a_url(shared_sdk_server: Any) -> None:
    server = shared_sdk_server
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "chat",
        "--agent",
        server.http,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(LIMIT):
        out, err = await process.communicate(b"first line\nsecond line\n")
    assert process.returncode == 0, err.decode()
    assert "first line" in out.decode()
    assert "second line" in out.decode()
    assert server.http in err.decode()  # "agent: SDK remote agent ... (URL)"


async def test_a_server_gone_mid_turn_exits_7(sdk_server: Any) -> None:
    server = sdk_server()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "run",
        "--json",
        "--agent",
        server.ws,
        "/sleep 600000",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    async with asyncio.timeout(LIMIT):
        while True:
            line = await process.stdout.readline()
            assert line, "the CLI ended before the turn started"
            if json.loads(line)["type"] == "update":
                break
        server.kill()
        rest, err = await process.communicate()
    assert process.returncode == 7, err.decode()
    found = events(rest.decode())
    result = found[-1]
    assert result["resolution"] == "disconnected"
    assert server.ws in result["error"]["message"]
    errors = [e["message"] for e in found if e["type"] == "error"]
    assert any("the connection was lost during the turn" in m for m in errors), found


async def test_cacert_trusts_a_private_authority(certificate: tuple[Path, Path]) -> None:
    """``--cacert`` makes ``run`` trust a server whose certificate the system does not (our
    ``serve`` over TLS, a self-signed certificate); without it the start fails, naming why."""
    cert, key = certificate
    async with ServeProcess.start("--certfile", str(cert), "--keyfile", str(key)) as serve:
        assert serve.url.startswith("https://")
        for url in (serve.url, "wss" + serve.url[len("https") :]):
            code, _out, err = await cli("run", "--agent", url, "hi")
            assert code == 1, err
            assert "certificate verify failed" in err.lower(), err
            code, out, err = await cli("run", "--json", "--agent", url, "--cacert", str(cert), "/stream 2 1")
            assert code == 0, err
            assert events(out)[-1]["resolution"] == "completed"


async def test_cacert_usage_errors(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, _key = certificate
    code, _out, err = await cli("run", "--cacert", str(cert), "hi")
    assert code == 2, err
    assert "--cacert needs a TLS agent URL" in err, err
    code, _out, err = await cli("run", "--agent", "ws://127.0.0.1:9/acp", "--cacert", str(cert), "hi")
    assert code == 2, err
    assert "--cacert needs a TLS agent URL" in err, err
    bogus = tmp_path / "not-a-cert.pem"
    bogus.write_text("hello")
    code, _out, err = await cli("check", "--cacert", str(bogus), "--", "wss://127.0.0.1:9/acp")
    assert code == 2, err
    assert "not a readable PEM certificate file" in err, err


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_a_reader_that_goes_away_cancels_the_remote_turn(scheme: str) -> None:
    """``run --agent URL … | head -1``: stdout's reader exits mid-turn. The CLI cancels the turn
    (exit 128 + SIGPIPE, no traceback) and the server, its connection ended, reaps the agent."""
    async with ServeProcess.start() as serve:
        url = scheme + serve.url[len("http") :]
        read_end, write_end = os.pipe()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_driver", "run", "--agent", url, "/stream 100000 20",
            stdin=asyncio.subprocess.DEVNULL, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        os.close(write_end)
        async with asyncio.timeout(LIMIT):
            first = await asyncio.to_thread(os.read, read_end, 1)
            assert first, "no output before the pipe was closed"
            assert descendants(serve.process.pid), "serve runs no agent for the turn"
            os.close(read_end)
            # The reader is gone: the CLI's next write gets EPIPE.
            _out, err = await process.communicate()
        text = err.decode(errors="replace")
        assert process.returncode == 128 + signal.SIGPIPE, text
        assert "Traceback" not in text
        assert "cancelling the turn (SIGPIPE)" in text
        await eventually(lambda: not descendants(serve.process.pid), "the agent behind serve reaped")
