"""The official Python SDK's remote server (``acp.http.asgi.create_asgi_app``: WebSocket and
Streamable HTTP on ``/acp``) under hypercorn, serving an SDK agent -- the far end our
``connect`` is tested against.

Run as ``python sdk_server.py --fd N [--token T] [--cookie] [--certfile C --keyfile K]``: it serves on the listening
socket inherited as fd N (the test binds it on 127.0.0.1, port 0: no port race, and connections
queue in the backlog until hypercorn accepts them). The agent is the interop SDK agent
(``tests/interop/peers/sdk_agent.py``: ``/sleep MS``, ``/permission``, echo) with more prompts:

- ``/stream N MS``: N ``agent_message_chunk`` "chunk I", MS ms apart; ``session/cancel`` stops
  it (``stopReason: cancelled``); ``$/cancel_request`` cancels the task (the SDK answers -32800).
- ``/ignore-cancel MS``: one chunk "ignoring", then MS ms during which both cancels are ignored.
- ``remember TEXT``: kept in the session's history (module-level: it outlives the connection),
  replayed as ``user_message_chunk``/``agent_message_chunk`` by ``session/load``.

An ASGI wrapper around the SDK app records every request's ``Authorization``, ``Cookie``,
``Acp-*`` headers and the start of its body (``GET /seen`` returns them as JSON: the tests read
what reached the server), and with
``--token T`` refuses requests without ``Authorization: Bearer T`` (HTTP 401; WebSocket
handshake closed before accept, 403). With ``--cookie`` it sets ``affinity=<random>`` on each
request without an ``Acp-Connection-Id`` (``initialize``, the WebSocket handshake) and refuses
(HTTP 403) every request that names a connection but does not send that cookie back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop" / "peers"))

from acp.http.asgi import create_asgi_app
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    UserMessageChunk,
)
from hypercorn.asyncio import serve
from hypercorn.config import Config
from sdk_agent import SDK_VERSION, InteropAgent, log

HISTORY: dict[str, list[tuple[str, str]]] = {}
"""session id -> [(role, text)]: outlives a connection, so a reconnect can load the session."""


class RemoteTestAgent(InteropAgent):
    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,  # the SDK example's way: the client's own, echoed
            agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name="sdk-remote-agent", title="SDK remote agent", version=SDK_VERSION),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        response = await super().new_session(cwd, mcp_servers, **kwargs)
        HISTORY[response.session_id] = []
        return response

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        history = HISTORY.get(session_id)
        if history is None:
            from acp import RequestError

            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})
        self.cancelled.setdefault(session_id, asyncio.Event())
        for role, text in history:
            content = {"type": "text", "text": text}
            chunk: Any = (
                UserMessageChunk.model_validate({"sessionUpdate": "user_message_chunk", "content": content})
                if role == "user"
                else AgentMessageChunk.model_validate(
                    {"sessionUpdate": "agent_message_chunk", "content": content}
                )
            )
            await self.conn.session_update(session_id=session_id, update=chunk)
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        if text.startswith("/stream"):
            cancelled.clear()
            _, count, ms = text.split()
            return await self.stream(session_id, int(count), int(ms), cancelled)
        if text.startswith("/ignore-cancel"):
            cancelled.clear()
            return await self.ignore(session_id, int(text.split()[1]))
        if text.startswith("remember "):
            HISTORY.setdefault(session_id, []).extend([("user", text), ("agent", f"noted: {text[9:]}")])
            await self.say(session_id, f"noted: {text[9:]}")
            return PromptResponse(stop_reason="end_turn")
        return await super().prompt(prompt, session_id, **kwargs)

    async def stream(self, session_id: str, count: int, ms: int, cancelled: asyncio.Event) -> PromptResponse:
        for i in range(count):
            if cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await self.say(session_id, f"chunk {i}")
            waiter = asyncio.ensure_future(cancelled.wait())
            try:
                await asyncio.wait({waiter}, timeout=ms / 1000)
            finally:
                waiter.cancel()
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def ignore(self, session_id: str, ms: int) -> PromptResponse:
        await self.say(session_id, "ignoring")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ms / 1000
        while loop.time() < deadline:
            try:
                await asyncio.sleep(deadline - loop.time())
            except asyncio.CancelledError:
                log("ignoring a cancellation of the prompt task")
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
        return PromptResponse(stop_reason="end_turn")


class Wrapper:
    """Records credentials and cookies; enforces --token and --cookie (see the module docstring)."""

    def __init__(self, app: Any, token: str | None, cookie: bool) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie
        self.value = secrets.token_hex(8)
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["type"] == "http" and scope["path"] == "/seen":
            await _json(send, 200, self.seen)
            return
        record = {
            "type": scope["type"],
            "method": scope.get("method", "WS"),
            "authorization": headers.get("authorization"),
            "cookie": headers.get("cookie"),
            "connection": headers.get("acp-connection-id"),
            "session": headers.get("acp-session-id"),
            "http_version": scope.get("http_version"),
        }
        self.seen.append(record)
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _json(send, 401, {"error": "missing or wrong bearer token"})
            return
        wanted = f"affinity={self.value}"
        if self.cookie and "acp-connection-id" in headers and wanted not in (headers.get("cookie") or ""):
            await _json(send, 403, {"error": "affinity cookie missing"})
            return
        body = bytearray()

        async def recording() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b"")[: 4096 - len(body)])
            return message

        if not (self.cookie and "acp-connection-id" not in headers):
            try:
                await self.app(scope, recording, send)
            finally:
                record["body"] = body.decode("utf-8", "replace")
            return
        cookie_header = (b"set-cookie", f"{wanted}; Path=/; HttpOnly".encode())

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] in ("http.response.start", "websocket.accept"):
                message = dict(message)
                message["headers"] = [*message.get("headers", []), cookie_header]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


async def _json(send: Any, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--token", default=None)
    parser.add_argument("--cookie", action="store_true")
    parser.add_argument("--certfile", default=None)
    parser.add_argument("--keyfile", default=None)
    opts = parser.parse_args()
    app = Wrapper(create_asgi_app(lambda conn: RemoteTestAgent()), opts.token, opts.cookie)
    config = Config()
    config.bind = [f"fd://{opts.fd}"]
    config.accesslog = None
    config.errorlog = "-"
    config.graceful_timeout = 1.0
    if opts.certfile is not None:
        config.certfile = opts.certfile  # TLS: HTTP/2 offered by ALPN
        config.keyfile = opts.keyfile
    log(f"serving ACP (SDK {SDK_VERSION}) on fd {opts.fd}")
    asyncio.run(serve(app, config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
