"""The WebSocket profile: GET ``/acp`` with ``Upgrade: websocket``, one JSON-RPC message per frame.

The upgrade is accepted with ``Acp-Connection-Id`` (and the affinity cookie); refusals (token,
Origin, too many connections, an agent that cannot start) are plain HTTP answers to the upgrade
(401/403/503/500) through the ASGI ``websocket.http.response`` extension. Text frames are
messages; binary frames are ignored (logged once per connection); a frame over the size limit
closes with 1009; text that is not a JSON object is answered with a JSON-RPC error and not
forwarded. When the client closes (or its socket drops) the connection ends through the ladder;
when the server ends it, the close code says why: 1001 shutdown, 1008 idle or a client that does
not read, 1011 the agent ended.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..core import parse_json
from ..net import CONNECTION_ID_HEADER, WS_POLICY, WS_TOO_BIG
from ._asgi import Receive, Refused, Scope, Send, error_body, jsonrpc_error
from ._outlet import Outlet

if TYPE_CHECKING:
    from ._server import RemoteServer

logger = logging.getLogger("acp_driver.remote.server")


async def deny_upgrade(
    scope: Scope, send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    """Refuse a WebSocket upgrade with an HTTP status (or close 1008 where the server cannot)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        body = error_body(message)
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [
                    *headers,
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
    else:
        await send({"type": "websocket.close", "code": WS_POLICY, "reason": message[:120]})


async def serve_websocket(server: RemoteServer, scope: Scope, receive: Receive, send: Send) -> None:
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    refusal = server.refusal(scope)
    if refusal is not None:
        await deny_upgrade(scope, send, *refusal)
        return
    try:
        conn = await server.open_connection("websocket")
    except Refused as exc:
        await deny_upgrade(scope, send, exc.status, exc.message, [])
        return
    settings = server.settings
    outlet = Outlet(settings.max_buffered_bytes, lambda full: conn.output_pressure(outlet, full))
    closing: list[Any] = [1000, ""]

    def on_message(text: bytes, route: str) -> None:
        if not outlet.put(text) and not outlet.closed:
            conn.end(
                f"the client does not read (over {settings.max_buffered_bytes} bytes waiting)", WS_POLICY
            )

    def on_end(reason: str, code: int) -> None:
        closing[0] = code
        closing[1] = reason.encode("utf-8")[:120].decode("utf-8", "ignore")
        outlet.close()

    conn.on_message = on_message
    conn.on_end.append(on_end)
    await send(
        {
            "type": "websocket.accept",
            "headers": [(CONNECTION_ID_HEADER.lower().encode(), conn.id.encode()), server.affinity_cookie()],
        }
    )
    conn.start()

    async def write() -> None:
        while True:
            await outlet.wait()
            for item in outlet.take_all():
                await send({"type": "websocket.send", "text": item.decode("utf-8", "replace")})
            if outlet.closed:
                break
        await send({"type": "websocket.close", "code": closing[0], "reason": closing[1]})

    writer = asyncio.get_running_loop().create_task(write(), name=f"ws-writer-{conn.id}")
    binary_logged = False
    limit = settings.max_message_bytes
    try:
        while True:
            event = await receive()
            kind = event["type"]
            if kind == "websocket.disconnect":
                conn.end(f"the client closed the WebSocket (code {event.get('code')})")
                break
            if kind != "websocket.receive":
                continue
            text = event.get("text")
            if text is None:
                if not binary_logged:
                    binary_logged = True
                    logger.info("%s: binary frames are ignored (ACP messages are text frames)", conn.id)
                continue
            data = text.encode("utf-8", "surrogatepass")
            if len(data) > limit:
                conn.end(f"a message of {len(data)} bytes (limit {limit})", WS_TOO_BIG)
                continue
            try:
                message = parse_json(data)
            except ValueError as exc:
                outlet.put(jsonrpc_error(-32700, f"Parse error: {exc}"))
                continue
            if not isinstance(message, dict):
                outlet.put(
                    jsonrpc_error(-32600, "Invalid Request: one JSON-RPC object per frame (no batches)")
                )
                continue
            conn.from_client(data, message)
    finally:
        conn.end("the WebSocket ended")
        outlet.close()
        try:
            await asyncio.wait_for(writer, timeout=5.0)
        except (TimeoutError, Exception):
            writer.cancel()
