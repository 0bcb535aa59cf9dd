"""Secrets never reach a trace file, its summary, its page, or a span: one rule (trace/_redact.py),
a test per shape a secret takes (docs/trace.md, "Redacted")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_driver.driver import AgentMessageChunk, ClientServices, launch
from acp_driver.services import LocalTerminals
from acp_driver.trace import REDACTED, OtelSink, TraceRecorder, read_trace, render_html, summarize

SECRET = "hunter2-s3cr3t"
"""No word the pre-scan looks for is in it: what is redacted is found by its context."""


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def record(tmp_path: Path, *messages: tuple[str, Any], **header: Any) -> list[dict[str, Any]]:
    """``messages`` (direction, message) through a fresh recorder; the file's events. Asserts
    that the secret is nowhere in the file, nor in its summary and page."""
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path, **header) as rec:
        for direction, message in messages:
            rec.wire(direction, orjson.dumps(message) + b"\n")
    assert SECRET not in path.read_text()
    trace = read_trace(path)
    assert SECRET not in summarize(trace)
    assert SECRET not in render_html(trace)
    return lines(path)


def request(rid: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def chunk(text: str) -> dict[str, Any]:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}


def test_options_on_a_terminal_command_line_and_an_mcp_servers_never_reach_the_file(tmp_path: Path) -> None:
    args = ["--password", SECRET, f"--api-key={SECRET}", f"GITHUB_TOKEN={SECRET}", "--verbose", "x"]
    server = {"name": "m", "command": "mcp", "args": args, "env": []}
    found = record(
        tmp_path,
        ("in", request(7, "terminal/create", {"sessionId": "s", "command": "deploy", "args": args})),
        ("out", request(2, "session/new", {"cwd": "/w", "mcpServers": [server]})),
    )
    kept = ["--password", REDACTED, f"--api-key={REDACTED}", f"GITHUB_TOKEN={REDACTED}", "--verbose", "x"]
    assert found[1]["msg"]["params"]["args"] == kept
    assert found[2]["msg"]["params"]["mcpServers"][0]["args"] == kept
    assert found[1]["msg"]["params"]["command"] == "deploy"


def test_the_same_options_in_text_never_reach_the_file(tmp_path: Path) -> None:
    """A command line written as text: a tool call's title, its raw input, the terminal's output."""
    line = f"mysql --password {SECRET} -u root; run --api-key={SECRET}; GITHUB_TOKEN={SECRET} make"
    update = {"sessionUpdate": "tool_call", "toolCallId": "c", "title": line, "rawInput": {"command": line}}
    params = {"sessionId": "s", "update": update}
    found = record(tmp_path, ("in", {"jsonrpc": "2.0", "method": "session/update", "params": params}))
    title = found[1]["msg"]["params"]["update"]["title"]
    assert title == (
        f"mysql --password {REDACTED} -u root; run --api-key={REDACTED}; GITHUB_TOKEN={REDACTED} make"
    )


def test_a_url_password_never_reaches_the_header_or_a_message(tmp_path: Path) -> None:
    found = record(
        tmp_path,
        ("in", chunk(f"cloning http://bob:{SECRET}@git.example/r.git and https://{SECRET}@gh.example/r")),
        agent=[f"ws://user:{SECRET}@agents.example:9000/acp"],
    )
    assert found[0]["agent"] == [f"ws://user:{REDACTED}@agents.example:9000/acp"]
    text = found[1]["msg"]["params"]["update"]["content"]["text"]
    assert text == f"cloning http://bob:{REDACTED}@git.example/r.git and https://{REDACTED}@gh.example/r"


def test_a_token_in_a_url_query_never_reaches_the_file(tmp_path: Path) -> None:
    found = record(tmp_path, agent=[f"wss://agents.example/acp?token={SECRET}&v=2"])
    assert found[0]["agent"] == [f"wss://agents.example/acp?token={REDACTED}&v=2"]


@pytest.mark.parametrize("method", ["auth/login", "authenticate"])
@pytest.mark.parametrize("answer", ["error", "result"])
def test_the_answer_to_authentication_is_replaced_whole(tmp_path: Path, method: str, answer: str) -> None:
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": 4}
    if answer == "error":
        reply["error"] = {"code": -32000, "message": f"rejected: {SECRET}", "data": {"echo": SECRET}}
    else:
        reply["result"] = {"session": SECRET}
    found = record(
        tmp_path,
        ("out", request(4, method, {"methodId": "pw", "password": SECRET})),
        ("in", reply),
    )
    assert found[1]["msg"]["params"] == {"methodId": "pw", "password": REDACTED}
    kept = found[2]["msg"]
    if answer == "error":
        assert kept == {"jsonrpc": "2.0", "id": 4, "error": {"code": -32000, "message": REDACTED}}
    else:
        assert kept == {"jsonrpc": "2.0", "id": 4, "result": REDACTED}


def test_an_answer_to_authentication_with_an_odd_id_is_still_known(tmp_path: Path) -> None:
    """An id that is not a string or a number (a peer's mistake) keys the request all the same."""
    found = record(
        tmp_path,
        ("in", {"jsonrpc": "2.0", "id": {"n": [1]}, "method": "auth/login", "params": {}}),
        ("out", {"jsonrpc": "2.0", "id": {"n": [1]}, "result": {"cookie2": SECRET}}),
    )
    assert found[2]["msg"]["result"] == REDACTED


@pytest.mark.parametrize(
    "key",
    [
        "auth", "Auth", "AUTH", "basicAuth", "proxy_auth", "X-Auth",
        "pass", "Pass", "DB_PASS", "dbPass", "db-pass",
        "pwd", "PWD", "userPwd", "user_pwd",
        "jwt", "JWT", "idJwt", "jwt_bearer",
        "accessKey", "access_key", "ACCESS-KEY", "AccessKey",
        "sessionKey", "session_key", "SESSION-KEY",
        "apiKey", "password", "token", "clientSecret", "Cookie", "credentials", "Authorization",
    ],
)  # fmt: skip
def test_a_value_under_a_key_naming_a_secret_never_reaches_the_file(tmp_path: Path, key: str) -> None:
    update = {"sessionUpdate": "x_custom", "config": {key: SECRET}, "list": [{key: [SECRET, 7]}]}
    params = {"sessionId": "s", "update": update}
    found = record(tmp_path, ("in", {"jsonrpc": "2.0", "method": "session/update", "params": params}))
    kept = found[1]["msg"]["params"]["update"]
    assert kept["config"] == {key: REDACTED}
    count = 7 if "token" in key.lower() else REDACTED  # a number goes too, but a token count
    assert kept["list"] == [{key: [REDACTED, count]}]


def test_names_that_only_look_like_secrets_and_counts_are_kept(tmp_path: Path) -> None:
    capabilities = {"auth": {"terminal": False}, "fs": {"readTextFile": True}}
    answer = {
        "protocolVersion": 1,
        "agentCapabilities": {"auth": {}},
        "authMethods": [{"id": "pw", "name": "Password", "description": "log in"}],
    }
    usage = {
        "sessionUpdate": "usage_update",
        "used": 10,
        "size": 100,
        "inputTokens": 42,
        "passthrough": "yes",
    }
    found = record(
        tmp_path,
        ("out", request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})),
        ("in", {"jsonrpc": "2.0", "id": 1, "result": answer}),
        ("in", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": usage}}),
    )
    assert found[1]["msg"]["params"]["clientCapabilities"] == capabilities
    assert found[2]["msg"]["result"] == answer
    assert found[3]["msg"]["params"]["update"] == usage


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR", "Basic", "BASIC"])
def test_a_bearer_token_in_any_case_never_reaches_the_file(tmp_path: Path, scheme: str) -> None:
    found = record(tmp_path, ("in", chunk(f"use {scheme} {SECRET} now")))
    assert found[1]["msg"]["params"]["update"]["content"]["text"] == f"use {scheme} {REDACTED} now"


def test_an_environment_or_headers_alone_reach_redaction(tmp_path: Path) -> None:
    """The pre-scan lets a message through unwalked when it holds no word a secret hides behind:
    an environment's or headers' values are secrets whatever their names."""
    env = [{"name": "HOME_DIR", "value": SECRET}]
    server = {"type": "http", "name": "m", "url": "http://h", "headers": [{"name": "X-Org", "value": SECRET}]}
    found = record(
        tmp_path,
        ("in", request(9, "terminal/create", {"sessionId": "s", "command": "ls", "env": env})),
        ("out", request(3, "session/new", {"cwd": "/w", "mcpServers": [server]})),
    )
    assert found[1]["msg"]["params"]["env"] == [{"name": "HOME_DIR", "value": REDACTED}]
    assert found[2]["msg"]["params"]["mcpServers"][0]["headers"] == [{"name": "X-Org", "value": REDACTED}]


def test_a_line_that_is_not_json_is_redacted(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path, max_message_bytes=1000) as rec:
        rec.wire("in", f"Authorization: Bearer {SECRET}\n".encode())
        rec.wire("in", b"y" * 992 + f" token={SECRET} tail".encode())  # the bound cuts through the secret
    assert SECRET not in path.read_text()
    found = lines(path)
    assert found[1]["raw"] == f"Authorization: {REDACTED}"
    assert found[2]["raw"] == "y" * 992 + " token=["  # redacted whole, then cut


def test_a_line_that_is_not_json_is_cut_at_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with TraceRecorder(path, max_message_bytes=1000) as rec:
        rec.wire("in", b"x" * 5000 + b"\n")
        rec.wire("in", "é".encode() * 2000)  # never cut mid-character
    found = lines(path)
    assert (found[1]["raw"], found[1]["size"]) == ("x" * 1000, 5000)
    assert (found[2]["raw"], found[2]["size"]) == ("é" * 500, 4000)


def test_a_file_written_without_redaction_is_redacted_when_read(tmp_path: Path) -> None:
    """A file from an older version, or written by hand: the summary and the page apply the
    same rule when they read it."""
    path = tmp_path / "old.ndjson"
    events = [
        {"id": 0, "t": 0.0, "kind": "trace", "v": 1, "role": "host", "agent": ["a", "--token", SECRET]},
        {"id": 1, "t": 0.1, "kind": "wire", "dir": "out", "msg": request(1, "session/prompt", {
            "sessionId": "s", "prompt": [{"type": "text", "text": f"use password={SECRET}"}]})},
        {"id": 2, "t": 0.2, "kind": "wire", "dir": "in", "msg": {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32603, "message": f"upstream said Bearer {SECRET}"}}},
        {"id": 3, "t": 0.3, "kind": "wire", "dir": "in", "raw": f"GITHUB_TOKEN={SECRET}"},
        {"id": 4, "t": 0.4, "kind": "connection_end", "reason": f"closed by ws://u:{SECRET}@h"},
    ]  # fmt: skip
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    trace = read_trace(path)
    assert SECRET not in orjson.dumps(trace.events).decode()
    assert trace.header["agent"] == ["a", "--token", REDACTED]
    (turn,) = trace.turns
    assert turn.prompt == f"use password={REDACTED}"
    assert SECRET not in summarize(trace)
    assert SECRET not in render_html(trace)


def test_spans_never_carry_a_secret(tmp_path: Path) -> None:
    """OpenTelemetry: the same rule, before anything reaches a span (its status, attributes,
    events)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelSink(provider)
    for direction, message in [
        ("out", request(1, "auth/login", {"methodId": "pw", "password": SECRET})),
        ("in", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": f"password={SECRET}"}}),
        ("out", request(2, "authenticate", {"methodId": "pw"})),
        ("in", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": f"Bearer {SECRET} refused"}}),
        ("out", request(3, "session/prompt", {"sessionId": "s", "prompt": []})),
        ("in", {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": f"BEARER {SECRET} expired"}}),
    ]:
        sink.wire(direction, orjson.dumps(message))
    sink.event("cancel", scope="session", session="s", reason=f"token={SECRET}")
    sink.event("exit", status=1, description=f"died: ws://u:{SECRET}@h")
    sink.close()
    finished = exporter.get_finished_spans()
    assert {s.name for s in finished} >= {"auth/login", "authenticate", "session/prompt"}
    assert any(s.name.startswith("invoke_agent") for s in finished)  # the turn's span
    statuses = {s.name: s.status.description for s in finished if s.status.description}
    assert statuses == {
        "auth/login": REDACTED,  # an authentication error is replaced whole
        "authenticate": REDACTED,
        "session/prompt": f"BEARER {REDACTED} expired",
    }
    seen = repr(
        [(s.name, s.status, s.attributes, [(e.name, e.attributes) for e in s.events]) for s in finished]
    )
    assert SECRET not in seen


async def test_a_real_terminal_and_mcp_server_command_line_are_redacted_end_to_end(tmp_path: Path) -> None:
    """The reference agent runs ``/terminal`` through the library's local terminals; its command
    line, the prompt that asked for it and the terminal's output hold the secret."""
    path = tmp_path / "t.ndjson"
    agent = await launch(
        [sys.executable, "-m", "acp_driver", "agent"],
        services=ClientServices(terminals=LocalTerminals()),
        trace=path,
        protocol=1,
    )
    try:
        server = {"name": "m", "command": "mcp-x", "args": ["--api-key", SECRET], "env": []}
        session = await agent.new_session(tmp_path, mcp_servers=[server])
        turn = session.prompt(f"/terminal echo --password {SECRET} GITHUB_TOKEN={SECRET}")
        text = "".join([u.text async for u in turn if isinstance(u, AgentMessageChunk)])
        assert (await turn).stop_reason == "end_turn"
    finally:
        await agent.aclose()
    assert SECRET in text  # the host saw it; the trace does not hold it
    assert SECRET not in path.read_text()
    (create,) = [
        e["msg"] for e in lines(path) if e["kind"] == "wire" and e["msg"].get("method") == "terminal/create"
    ]
    assert create["params"]["args"] == ["--password", REDACTED, f"GITHUB_TOKEN={REDACTED}"]
    trace = read_trace(path)
    assert SECRET not in summarize(trace) + render_html(trace)
