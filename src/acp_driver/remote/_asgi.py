"""Small raw-ASGI helpers shared by the front-ends (no framework: the app is one endpoint)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]


class Refused(Exception):
    """A new connection is refused: ``status`` (HTTP) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ClientGone(Exception):
    """The client disconnected while we were reading its request."""


def header(scope: Scope, name: bytes) -> bytes | None:
    """The last value of header ``name`` (lower case), or None."""
    found = None
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            found = value
    return found


def header_text(scope: Scope, name: bytes) -> str | None:
    value = header(scope, name)
    return None if value is None else value.decode("latin-1")


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: Iterable[tuple[bytes, bytes]] = (),
    content_type: bytes | None = None,
) -> None:
    out: Headers = list(headers)
    if content_type is not None:
        out.append((b"content-type", content_type))
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


async def respond_error(
    send: Send, status: int, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await respond(send, status, error_body(message), headers, b"application/json")


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes ``limit`` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def jsonrpc_error(code: int, message: str, request_id: Any = None) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})
