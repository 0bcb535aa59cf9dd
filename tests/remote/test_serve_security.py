"""Who may connect and how much: the bearer token, Origin, the loopback rule and every limit,
each with its HTTP status or WebSocket close code."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import websockets

from acp_driver.remote import ConfigError, ServerSettings

from ..waiting import eventually
from . import serving
from .serving import INIT_PARAMS, HttpClient, ServeProcess, WsClient, pid_gone, ws_url

make_server = serving.make_server  # the fixture

INIT = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
JSON = {"Content-Type": "application/json"}


async def _ws_status(url: str, **kwargs: Any) -> int:
    """The HTTP status that refused a WebSocket upgrade."""
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(ws_url(url), **kwargs):
            pass
    status: int = refused.value.response.status_code
    return status


async def test_token_required_on_every_request(make_server: Any) -> None:
    server = await make_server(token="s3cret")
    async with HttpClient.connect(server.url) as http:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Basic s3cret"},
            {"Authorization": "Bearer"},
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, **headers})
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert server.connections == {}
        good = {**JSON, "Authorization": "Bearer s3cret"}
        response = await http.client.post(server.url, content=INIT, headers=good)
        assert response.status_code == 200
        # GET and DELETE too, even with a valid connection id.
        cid = response.headers["acp-connection-id"]
        get = await http.client.get(
            server.url, headers={"Accept": "text/event-stream", "Acp-Connection-Id": cid}
        )
        assert get.status_code == 401
        delete = await http.client.request("DELETE", server.url, headers={"Acp-Connection-Id": cid})
        assert delete.status_code == 401
        assert cid in server.connections
    assert await _ws_status(server.url) == 401
    assert await _ws_status(server.url, additional_headers={"Authorization": "Bearer wrong"}) == 401
    async with WsClient.connect(server.url, additional_headers={"Authorization": "Bearer s3cret"}) as client:
        assert (await client.call("initialize", INIT_PARAMS))["result"]["protocolVersion"] == 1


async def test_cross_origin_requests_are_refused_unless_allowed(make_server: Any) -> None:
    server = await make_server(allow_origins=["https://editor.example"])
    same = f"http://127.0.0.1:{server.port}"
    async with HttpClient.connect(server.url) as http:
        for origin, status in (
            ("https://evil.example", 403),
            ("null", 403),
            (same, 200),
            ("https://editor.example", 200),
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, "Origin": origin})
            assert response.status_code == status, origin
    assert await _ws_status(server.url, origin="https://evil.example") == 403
    async with WsClient.connect(server.url, origin="https://editor.example") as client:
        assert "result" in await client.call("initialize", INIT_PARAMS)


async def test_too_many_connections_get_503(make_server: Any) -> None:
    server = await make_server(max_connections=1)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        assert await _ws_status(server.url) == 503
        async with HttpClient.connect(server.url) as http:
            response = await http.client.post(server.url, content=INIT, headers=JSON)
            assert response.status_code == 503
        assert len(server.connections) == 1


async def test_a_frame_over_the_limit_closes_with_1009(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with WsClient.connect(server.url) as client:
        (conn,) = server.connections.values()
        await client.ws.send('{"jsonrpc":"2.0","method":"x","params":"' + "a" * 2000 + '"}')
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1009
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert pid_gone(conn.backend.pid)


async def test_the_limit_counts_bytes_not_characters(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with WsClient.connect(server.url) as client:
        # 600 characters, 1200 bytes of UTF-8: over the limit.
        await client.ws.send('{"jsonrpc":"2.0","method":"x","params":"' + "é" * 600 + '"}')
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1009


async def test_a_body_over_the_limit_gets_413(make_server: Any) -> None:
    server = await make_server(max_message_bytes=1000)
    async with HttpClient.connect(server.url) as http:
        response = await http.client.post(server.url, content=b" " * 1001 + INIT, headers=JSON)
        assert response.status_code == 413
        assert server.connections == {}


async def test_an_idle_websocket_is_closed_1008_and_its_agent_reaped(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.3)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        (conn,) = server.connections.values()
        with pytest.raises(websockets.ConnectionClosed):
            await client.next()
        assert client.ws.close_code == 1008
    await asyncio.wait_for(conn.wait_ended(), 30)
    assert "idle" in (conn.end_reason or "")
    assert pid_gone(conn.backend.pid)


async def test_a_busy_websocket_is_not_idle(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.2)
    async with WsClient.connect(server.url) as client:
        await client.call("initialize", INIT_PARAMS)
        # A request in flight (the agent sleeps silently for longer than the idle timeout).
        rid = await client.request("_acp_driver/sleep", {"ms": 800})
        answer, _ = await client.answer_of(rid)
        assert "result" in answer


async def test_an_idle_http_connection_without_streams_is_ended(make_server: Any) -> None:
    server = await make_server(idle_timeout=0.3)
    async with HttpClient.connect(server.url) as http:
        await http.initialize()
        (conn,) = server.connections.values()
        await asyncio.wait_for(conn.wait_ended(), 30)
        assert "idle" in (conn.end_reason or "")
        assert (await http.delete()).status_code == 404


async def test_an_agent_slow_to_answer_initialize_is_not_idle(make_server: Any) -> None:
    # The agent takes longer to start than the idle timeout; its initialize is in flight.
    slow = ["sh", "-c", f"sleep 1; exec {sys.executable} -m acp_driver agent"]
    server = await make_server(argv=slow, idle_timeout=0.2)
    async with HttpClient.connect(server.url) as http:
        response = await http.initialize()  # 200, not "the agent failed: idle"
        answer = response.json()
        assert answer["result"]["protocolVersion"] == INIT_PARAMS["protocolVersion"], answer
        # (Not whether the connection is still open: idle once answered, it may end 0.2 s later
        # -- before this line, on a loaded machine.)


def test_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ConfigError, match="without --token"):
        ServerSettings(host="0.0.0.0").check()
    ServerSettings(host="0.0.0.0", token="t").check()
    ServerSettings(host="::1").check()
    for bad in (
        {"instance": "has space"},
        {"certfile": "c.pem"},
        {"max_connections": 0},
        {"idle_timeout": 0},
        {"cancel_budget": -1},
        {"allow_origins": ["not an origin"]},
        {"token": "has space"},
    ):
        with pytest.raises(ConfigError):
            ServerSettings(**bad).check()


async def _serve_refused(*args: str, env: dict[str, str] | None = None) -> str:
    """Run ``acp-driver serve ARGS`` expecting exit 2 before it listens; its stderr. A serve that
    starts listening instead fails the test at its ready line and is killed, never left behind."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_driver",
        "serve",
        "--port",
        "0",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    err = b""
    try:
        async with asyncio.timeout(60):
            while line := await process.stderr.readline():
                err += line
                assert b"listening on" not in line, f"serve started: {err.decode()}"
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 2, err.decode()
    return err.decode()


async def test_cli_refuses_a_public_bind_without_a_token() -> None:
    assert "without --token" in await _serve_refused("--host", "0.0.0.0")


ENV_DUMPER = [
    sys.executable,
    "-c",
    "import os, sys, runpy; open(sys.argv[1], 'w').write(repr(dict(os.environ))); "
    "sys.argv = ['acp-driver', 'agent']; runpy.run_module('acp_driver', run_name='__main__')",
]


async def test_the_token_from_a_file_or_the_environment_never_on_the_command_line(tmp_path: Any) -> None:
    token = "file-t0ken-9f2c"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    seen_env = tmp_path / "agent-env"
    for args, env in (
        (["--token-file", str(token_file)], None),
        ([], {**os.environ, "ACP_DRIVER_SERVE_TOKEN": token}),
    ):
        async with ServeProcess.start(*args, "--", *ENV_DUMPER, str(seen_env), env=env) as serve:
            cmdline = Path(f"/proc/{serve.process.pid}/cmdline").read_bytes()
            assert token.encode() not in cmdline
            async with HttpClient.connect(serve.url) as http:
                refused = await http.client.post(serve.url, content=INIT, headers=JSON)
                assert refused.status_code == 401
                good = {**JSON, "Authorization": f"Bearer {token}"}
                assert (await http.client.post(serve.url, content=INIT, headers=good)).status_code == 200
            await eventually(seen_env.exists, "the agent to start")
            assert token not in seen_env.read_text()  # the agent does not inherit the token
            assert not any("warning" in line for line in serve.lines), serve.lines
            seen_env.unlink()


async def test_token_sources_are_checked(tmp_path: Any) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert "no token" in await _serve_refused("--token-file", str(empty))
    assert "cannot read the token file" in await _serve_refused("--token-file", str(tmp_path / "missing"))
    both = await _serve_refused("--token", "a", env={**os.environ, "ACP_DRIVER_SERVE_TOKEN": "b"})
    assert "give the token once" in both
    readable = tmp_path / "readable"
    readable.write_text("t0k\n")
    readable.chmod(0o644)
    async with ServeProcess.start("--token-file", str(readable)) as serve:
        assert any("readable by others" in line and "t0k" not in line for line in serve.lines)
    async with ServeProcess.start("--token", "t0k") as serve:
        assert any("prefer --token-file" in line for line in serve.lines)


async def test_query_and_headers_never_reach_the_command(make_server: Any) -> None:
    """The agent's argv is fixed when the server starts: a client's query string or headers are
    not read for it (the connection serves the configured agent whatever the client sends)."""
    server = await make_server()
    url = server.url + "?cmd=/bin/false&agent=/bin/false"
    async with WsClient.connect(url, additional_headers={"X-Agent": "/bin/false"}) as client:
        init = await client.call("initialize", INIT_PARAMS)
        assert init["result"]["agentInfo"]["name"] == "acp-driver-reference-agent"
    await eventually(lambda: not server.connections, "the connection to end")


async def _raw_upgrade(port: int, host: str, origin: str | None = None) -> int:
    """The status of a WebSocket upgrade sent by hand, with any ``Host`` (a browser after DNS
    rebinding sends the attacker's name; client libraries derive it from the URL)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [
            "GET /acp HTTP/1.1",
            f"Host: {host}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13",
        ]
        if origin is not None:
            lines.append(f"Origin: {origin}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_dns_rebinding_is_refused_on_both_profiles(make_server: Any) -> None:
    """A page on attacker.example whose name now resolves to 127.0.0.1: its Host and its Origin
    agree with each other, so only the Host check can refuse it."""
    server = await make_server()
    evil = f"attacker.example:{server.port}"
    async with HttpClient.connect(server.url) as http:
        response = await http.client.post(
            server.url, content=INIT, headers={**JSON, "Host": evil, "Origin": f"http://{evil}"}
        )
        assert response.status_code == 403
        assert "does not name this server" in response.json()["error"]
        # No Origin at all (a non-browser client on a rebound name) is refused too.
        response = await http.client.post(server.url, content=INIT, headers={**JSON, "Host": evil})
        assert response.status_code == 403
    assert await _raw_upgrade(server.port, evil, f"http://{evil}") == 403
    assert await _raw_upgrade(server.port, evil) == 403
    assert server.connections == {}
    # The same requests with the server's own name go through (the refusals above are the Host's).
    own = f"127.0.0.1:{server.port}"
    assert await _raw_upgrade(server.port, own, f"http://{own}") == 101


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST.:{port}", 200),
        ("app.localhost:{port}", 200),
        ("127.0.0.2", 200),
        ("[::1]:{port}", 200),
        ("attacker.example:{port}", 403),
        ("localhost.attacker.example:{port}", 403),
        ("10.0.0.1:{port}", 403),
        ("0.0.0.0:{port}", 403),
        ("127.0.0.1:notaport", 403),
        ("user@127.0.0.1", 403),
    ],
)
async def test_a_loopback_server_admits_only_loopback_hosts(make_server: Any, host: str, status: int) -> None:
    server = await make_server()
    async with HttpClient.connect(server.url) as http:
        headers = {**JSON, "Host": host.format(port=server.port)}
        response = await http.client.post(server.url, content=INIT, headers=headers)
        assert response.status_code == status


async def test_allow_host_adds_names(make_server: Any) -> None:
    server = await make_server(allow_hosts=["acp.example", ".corp.example"])
    async with HttpClient.connect(server.url) as http:
        for host, status in (
            ("acp.example", 200),
            ("ACP.example:8765", 200),
            ("corp.example", 200),
            ("dev.corp.example:1", 200),
            ("other.example", 403),
            ("evilcorp.example", 403),
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, "Host": host})
            assert response.status_code == status, host
    anyone = await make_server(allow_hosts=["*"])
    async with HttpClient.connect(anyone.url) as http:
        response = await http.client.post(anyone.url, content=INIT, headers={**JSON, "Host": "x.example"})
        assert response.status_code == 200


async def test_a_request_without_host_is_refused(make_server: Any) -> None:
    server = await make_server()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            b"POST /acp HTTP/1.0\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(INIT)}\r\n\r\n".encode()
            + INIT
        )
        status_line = await asyncio.wait_for(reader.readline(), 30)
    finally:
        writer.close()
    assert status_line.split()[1] in (b"400", b"403")
    assert server.connections == {}


def test_host_policy_by_bind() -> None:
    from acp_driver.remote._guard import HostPolicy

    loopback = HostPolicy("127.0.0.1")
    assert loopback.admits(b"localhost:1")
    assert loopback.admits(b"[::1]")
    assert not loopback.admits(None)
    assert not loopback.admits(b"")
    assert not loopback.admits(b"evil.example")
    public = HostPolicy("0.0.0.0")  # a token is required there; IP literals cannot be rebound
    assert public.admits(b"192.0.2.7:8765")
    assert not public.admits(b"devbox.example")
    named = HostPolicy("devbox.example")
    assert named.admits(b"DEVBOX.example:8765")
    assert not named.admits(b"other.example")
    specific = HostPolicy("192.0.2.7")
    assert specific.admits(b"192.0.2.7")
    assert not specific.admits(b"192.0.2.8")
    for bad in ("http://acp.example", "acp.example:80", "a b", ""):
        with pytest.raises(ValueError, match="not a host name"):
            HostPolicy("127.0.0.1", [bad])


async def test_an_origin_differing_only_in_port_or_scheme_is_another_site(make_server: Any) -> None:
    server = await make_server()
    own = f"127.0.0.1:{server.port}"
    async with HttpClient.connect(server.url) as http:
        for origin, status in (
            ("http://127.0.0.1:3000", 403),  # another web app on this machine
            (f"https://{own}", 403),
            (f"http://localhost:{server.port}", 403),  # another host name is another origin
            (f"http://{own}", 200),
        ):
            response = await http.client.post(server.url, content=INIT, headers={**JSON, "Origin": origin})
            assert response.status_code == status, origin
    assert await _raw_upgrade(server.port, own, "http://127.0.0.1:3000") == 403
    assert await _raw_upgrade(server.port, own, f"https://{own}") == 403


async def test_a_bearer_token_must_match_whole(make_server: Any) -> None:
    server = await make_server(token="s3cret")
    async with HttpClient.connect(server.url) as http:
        for value in ("Bearer s3cretX", "Bearer s3c", "Bearer S3CRET", "Bearer  s3cret trailing"):
            response = await http.client.post(
                server.url, content=INIT, headers={**JSON, "Authorization": value}
            )
            assert response.status_code == 401, value
        response = await http.client.post(
            server.url, content=INIT, headers={**JSON, "Authorization": "bearer s3cret"}
        )
        assert response.status_code == 200  # the scheme is case-insensitive (RFC 9110)
    assert server.connections


async def test_a_client_gives_its_token_from_the_environment_not_the_command_line(tmp_path: Path) -> None:
    token = "agent-t0ken-51"
    async with ServeProcess.start(env={**os.environ, "ACP_DRIVER_SERVE_TOKEN": token}) as serve:
        env = {**os.environ, "ACP_DRIVER_AGENT_TOKEN": token, "ACP_DRIVER_PROTOCOL": "1"}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_driver", "run", "--agent", ws_url(serve.url), "hello",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert out.decode() == "hello\n"
        assert token.encode() not in cmdline
        refused = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_driver", "run", "--agent", ws_url(serve.url), "hello",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={k: v for k, v in env.items() if k != "ACP_DRIVER_AGENT_TOKEN"},
        )  # fmt: skip
        _, err = await asyncio.wait_for(refused.communicate(), 60)
        assert refused.returncode != 0
        assert "401" in err.decode()


async def _run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str, bytes]:
    """``acp-driver run ARGS``: exit status, stdout, stderr, and its command line as the process
    list shows it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_driver", "run", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        env={**os.environ, "ACP_DRIVER_PROTOCOL": "1", "NO_COLOR": "1", **(env or {})},
    )  # fmt: skip
    cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode(), cmdline


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_a_client_gives_its_token_from_a_file_and_never_shows_it(tmp_path: Path, scheme: str) -> None:
    token = "file-t0ken-77"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    async with ServeProcess.start("--token-file", str(token_file)) as serve:
        url = ws_url(serve.url) if scheme == "ws" else serve.url
        # -vv: every debug record, the WebSocket handshake's headers among them.
        code, out, err, cmdline = await _run_cli(
            "-vv", "--agent", url, "--token-file", str(token_file), "hello"
        )
        assert code == 0, err
        assert out == "hello\n"
        assert token.encode() not in cmdline
        assert token not in err
        if scheme == "ws":
            assert "> Authorization: [redacted]" in err  # the header was logged, its value was not


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_a_401_names_the_token_options(tmp_path: Path, scheme: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("right-t0ken\n")
    token_file.chmod(0o600)
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong-t0ken\n")
    wrong.chmod(0o600)
    async with ServeProcess.start("--token-file", str(token_file)) as serve:
        url = ws_url(serve.url) if scheme == "ws" else serve.url
        for given in ((), ("--token-file", str(wrong))):
            code, out, err, _ = await _run_cli("--agent", url, *given, "hello")
            assert code == 1, err
            assert out == ""
            assert "HTTP 401" in err
            assert (
                "the server wants a bearer token: give it with --token-file FILE (the token on its "
                "first line), $ACP_DRIVER_AGENT_TOKEN, or --header 'Authorization: Bearer TOKEN'"
            ) in err
            assert "wrong-t0ken" not in err


async def test_the_token_file_is_checked_before_anything_starts(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    shared = tmp_path / "shared"
    shared.write_text("t0ken\n")
    shared.chmod(0o644)
    url = "ws://127.0.0.1:9/acp"  # nothing listens: a start would fail another way
    cases = [
        (("--agent", url, "--token-file", str(tmp_path / "missing")), {}, "cannot read the token file"),
        (("--agent", url, "--token-file", str(empty)), {}, "has no token on its first line"),
        (("--token-file", str(shared)), {}, "--token-file needs a remote agent"),
        (
            ("--agent", url, "--token-file", str(shared)),
            {"ACP_DRIVER_AGENT_TOKEN": "x"},
            "give the token once",
        ),
        (
            ("--agent", url, "--token-file", str(shared), "--header", "Authorization: Bearer x"),
            {},
            "give the token once: --token-file and an Authorization --header",
        ),
    ]
    for args, env, reason in cases:
        code, _, err, _ = await _run_cli(*args, "hello", env=env)
        assert code == 2, (args, err)
        assert reason in err, (args, err)
    code, _, err, _ = await _run_cli("--agent", url, "--token-file", str(shared), "hello")
    assert f"the token file {str(shared)!r} is readable by others (mode 644); chmod 600 it" in err
    assert "t0ken" not in err


async def test_a_refused_request_says_its_connection_closes(tmp_path: Any) -> None:
    """A request refused before its body is read (here: no token) is answered with
    ``Connection: close`` and the connection closed: a client that reused it would race the
    server closing it ("server disconnected without sending a response", seen under load)."""
    token_file = tmp_path / "token"
    token_file.write_text("t0ken\n")
    token_file.chmod(0o600)
    async with ServeProcess.start("--token-file", str(token_file)) as serve:
        host, port = serve.url.split("//")[1].split("/")[0].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            # The headers only: the body (declared) is still to come when the refusal is sent.
            writer.write(
                f"POST /acp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(INIT)}\r\n\r\n".encode()
            )
            await writer.drain()
            async with asyncio.timeout(30):
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                assert head.startswith("http/1.1 401"), head
                assert "\r\nconnection: close\r\n" in head, head
                length = int(head.split("content-length: ")[1].split("\r\n")[0])
                await reader.readexactly(length)
                assert await reader.read() == b""  # and the server closes it
        finally:
            writer.close()


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_check_refused_with_401_names_the_token_options(tmp_path: Path, scheme: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("right-t0ken\n")
    token_file.chmod(0o600)
    async with ServeProcess.start("--token-file", str(token_file)) as serve:
        url = ws_url(serve.url) if scheme == "ws" else serve.url
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_driver", "check", "--timeout", "2", "--", url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 1, err.decode()
        line = err.decode().strip()
        assert "HTTP 401" in line
        assert line.endswith(
            "; the server wants a bearer token: give it with --token-file FILE (the token on its first "
            "line), $ACP_DRIVER_AGENT_TOKEN, or --header 'Authorization: Bearer TOKEN'"
        )
        # and given from a file, the audit starts (its first check opens a session)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_driver", "check", "--timeout", "2", "--json", "--token-file",
            str(token_file), "--", url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 300)
        assert process.returncode == 0, err.decode()
        assert json.loads(out)["verdict"] == "passed"
