"""The WebSocket profile, client side: one JSON-RPC message per text frame, both ways.

``open_websocket`` performs the handshake (``headers`` on it, the cookie jar's ``Cookie`` for
the URL; the ``Set-Cookie`` of the ``101`` answer stored back into the jar, as the RFD asks),
then reads frames for ever into the connection. A frame bigger than the connection's
``max_message_bytes`` is reported in place as a ``core.OversizedLine``; one bigger than four
times that ends the connection (close code 1009) rather than growing memory. Binary frames are
read as text (the RFD says text frames; a lenient reader loses nothing).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import logging
import re
import ssl
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ..aio import Connection
from ..core import OversizedLine
from ._client_base import ClientTransport

_CREDENTIAL_HEADER = re.compile(
    r"(?im)^([<>] (?:authorization|proxy-authorization|cookie|set-cookie)\s*:\s*).*$"
)


class _NoCredentials(logging.Filter):
    """websockets logs each handshake header at debug level (``> Authorization: Bearer ...``):
    the values of credential headers are replaced before any handler sees the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        cleaned = _CREDENTIAL_HEADER.sub(r"\1[redacted]", text)
        if cleaned != text:
            record.msg, record.args = cleaned, None
        return True


HANDSHAKE_LOGGER = logging.getLogger("acp_driver.remote.websocket")
"""The WebSocket client's own log (websockets' ``logger=``), credentials redacted."""
HANDSHAKE_LOGGER.addFilter(_NoCredentials())


class WebSocketRefused(OSError):
    """The server refused the WebSocket handshake (an HTTP status instead of ``101``:
    ``http_status``; None when the handshake failed otherwise)."""

    http_status: int | None = None


class WebSocketTransport(ClientTransport):
    kind = "websocket"

    def __init__(self, url: str, receiver: Connection, ws: ClientConnection) -> None:
        super().__init__(url, receiver)
        self.ws = ws
        self._by_host = False

    def start(self) -> None:
        super().start()
        self.spawn(self._read_loop(), "reader")

    async def _write(self, message: bytes) -> None:
        try:
            await self.ws.send(message[:-1].decode("utf-8"))
        except ConnectionClosed:
            self._closing = True  # the reader reports how it ended

    async def _read_loop(self) -> None:
        receiver = self.receiver
        limit = receiver.max_message_bytes
        reason = "the WebSocket ended"
        try:
            async for frame in self.ws:
                data = frame.encode("utf-8") if isinstance(frame, str) else frame
                if len(data) > limit:
                    receiver.feed_messages([OversizedLine(len(data), limit)])
                else:
                    receiver.feed_messages([data])
            reason = self._describe_close()
        except ConnectionClosed:
            reason = self._describe_close()
        except asyncio.CancelledError:
            reason = "the host closed the connection"
            raise
        except Exception as exc:  # a bug or an odd medium error: never leave the connection hanging
            reason = f"reading the WebSocket failed: {exc!r}"
        finally:
            self._ended(reason)

    def _describe_close(self) -> str:
        protocol = self.ws.protocol
        if self._by_host:
            return "the host closed the connection"
        received = protocol.close_rcvd
        if received is not None:
            why = f": {received.reason}" if received.reason else ""
            return f"the server closed the WebSocket (code {received.code}{why})"
        sent = protocol.close_sent
        if sent is not None and sent.code == 1009:
            return "a message from the server was too big (close code 1009)"
        return "the connection dropped without a WebSocket close (server gone or network lost)"

    async def _close_gracefully(self) -> None:
        self._by_host = True
        await self.ws.close(1000, "host closed the connection")

    def _abort_medium(self) -> None:
        self._by_host = True
        transport = self.ws.transport
        if transport is not None:
            transport.abort()


def http_url(url: str) -> str:
    """The http(s) URL a ws(s) URL stands for (cookie matching and error messages)."""
    if url.startswith("ws://"):
        return "http://" + url[5:]
    if url.startswith("wss://"):
        return "https://" + url[6:]
    return url


async def open_websocket(
    url: str,
    receiver: Connection,
    *,
    headers: dict[str, str],
    jar: http.cookiejar.CookieJar,
    open_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
) -> WebSocketTransport:
    """Connect, attach the transport to ``receiver`` and start reading (raises ``OSError``)."""
    cookies = httpx.Cookies(jar)  # shares the jar: what the server sets is the caller's
    handshake = httpx.Request("GET", http_url(url), headers=headers)
    cookies.set_cookie_header(handshake)
    sent: dict[str, str] = dict(headers)
    cookie = handshake.headers.get("Cookie")
    if cookie and not any(k.lower() == "cookie" for k in sent):
        sent["Cookie"] = cookie
    limit = receiver.max_message_bytes
    tls: dict[str, Any] = (
        {"ssl": ssl_context} if ssl_context is not None and url.lower().startswith("wss://") else {}
    )
    try:
        ws = await ws_connect(
            url,
            additional_headers=sent,
            max_size=4 * limit,
            open_timeout=open_timeout,
            compression=None,
            user_agent_header="acp-driver",
            logger=HANDSHAKE_LOGGER,
            **tls,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        reason = exc.response.reason_phrase
        body = exc.response.body.decode("utf-8", "replace")[:200].strip() if exc.response.body else ""
        refused = WebSocketRefused(
            f"WebSocket handshake with {url} refused: HTTP {status} {reason}" + (f": {body}" if body else "")
        )
        refused.http_status = status
        raise refused from exc
    except InvalidHandshake as exc:
        raise WebSocketRefused(f"WebSocket handshake with {url} failed: {exc}") from exc
    except TimeoutError as exc:
        raise TimeoutError(f"WebSocket handshake with {url} timed out after {open_timeout:g} s") from exc
    response = ws.response
    if response is not None:
        set_cookies = response.headers.get_all("Set-Cookie")
        if set_cookies:
            answer: Any = httpx.Response(
                101, headers=[("Set-Cookie", value) for value in set_cookies], request=handshake
            )
            cookies.extract_cookies(answer)
    transport = WebSocketTransport(url, receiver, ws)
    receiver.attach(transport)
    transport.start()
    return transport
