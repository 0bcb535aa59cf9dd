"""The Streamable HTTP profile, client side: POSTs out, server-sent events in.

- ``initialize`` is POSTed first; its ``200`` answer carries the JSON-RPC response and the
  ``Acp-Connection-Id`` every later request names. Then the connection-scoped event stream
  (a long GET) is opened; its end is the end of the connection (``feed_eof``).
- Every later message is one POST, in order (a ``session/cancel`` never overtakes the prompt it
  cancels), answered ``202``; ``Acp-Session-Id`` on the methods of ``SESSION_SCOPED_METHODS`` and
  on our answers to the agent's requests that came on a session's stream (permission answers).
- A session's own event stream is opened when its id is learnt: a response whose result names a
  ``sessionId`` (``session/new``), or the successful answer to a ``session/load``/``resume``.
- A POST refused (an HTTP status other than 200/202, or a network error) fails the request it
  carried with a clear JSON-RPC error (fed in as the answer: exactly one outcome, never a hang);
  for a notification or a response it is logged and kept in ``failures``. A ``404`` without a
  session header means the server forgot the connection: it ends; with one, the server does not
  know that session: the request fails ``-32002`` (resource not found), as the agent itself
  answers over stdio or WebSocket (v2 counts it as a successful ``session/close``).
- ``close`` sends ``DELETE``; the cookie jar is the client's (``Set-Cookie`` of every answer
  kept, ``Cookie`` sent on every request).

The HTTP client is ``httpx`` with HTTP/2 on: over TLS HTTP/2 is negotiated by ALPN; over
cleartext ``http://`` it is HTTP/1.1 unless ``http2_prior_knowledge`` (h2c without upgrade).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import logging
import ssl
from typing import Any

import httpx
import orjson

from .. import protocol as p
from ..aio import Connection
from ..core import ErrorCode, OversizedLine, Received, parse_json
from ._client_base import ClientTransport
from ._protocol import (
    CONNECTION_ID_HEADER,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    HTTP_STATUS_KEY,
    SESSION_ATTACH_METHODS,
    SESSION_ID_HEADER,
    SESSION_SCOPED_METHODS,
    SseDecoder,
    id_key,
    session_id_of,
)

logger = logging.getLogger("acp_driver.remote")

TRANSPORT_ERROR = -32603
"""The JSON-RPC code of the error a refused POST fails its request with (internal error)."""


class HttpTransport(ClientTransport):
    kind = "http"

    def __init__(self, url: str, receiver: Connection, client: httpx.AsyncClient, headers: dict[str, str]):
        super().__init__(url, receiver)
        self.client = client
        self.headers = headers
        self.connection_id: str | None = None
        self.failures: list[str] = []
        """POSTs of notifications and responses the server refused (requests fail instead)."""
        self._asked_in: dict[str, str] = {}
        """The agent's requests that came on a session's stream: id key -> that session (our
        answer's POST names it: the RFD's "permission responses" are session-scoped)."""
        self._attaching: dict[str, str] = {}
        """``session/load``/``resume`` in flight: id key -> the session id they attach."""
        self._session_streams: dict[str, asyncio.Task[None]] = {}
        self._connection_stream: asyncio.Task[None] | None = None
        self._by_host = False

    # ------------------------------------------------------------------ out

    async def _write(self, message: bytes) -> None:
        try:
            decoded = parse_json(message)
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict):
            # Only ``send_raw`` (audits) writes what is not a JSON object: POST it as it is.
            decoded = {}
        method = decoded.get("method")
        headers = {"Content-Type": CONTENT_TYPE_JSON, "Accept": f"{CONTENT_TYPE_JSON}, {CONTENT_TYPE_SSE}"}
        headers.update(self.headers)
        initialize = method == p.INITIALIZE and self.connection_id is None
        if not initialize:
            if self.connection_id is None:
                self._refused(decoded, "no connection yet (initialize must be the first message)")
                return
            headers[CONNECTION_ID_HEADER] = self.connection_id
        session = None
        if method in SESSION_SCOPED_METHODS:
            session = session_id_of(decoded)
        elif method is None and self._asked_in:
            answered = id_key(decoded.get("id"))
            session = self._asked_in.pop(answered, None) if answered is not None else None
        if session is not None:
            headers[SESSION_ID_HEADER] = session
        key = id_key(decoded.get("id")) if method is not None else None
        if method in SESSION_ATTACH_METHODS and key is not None:
            attached = session_id_of(decoded)
            if attached is not None:
                self._attaching[key] = attached
        try:
            response = await self.client.post(self.url, content=message[:-1], headers=headers)
        except httpx.HTTPError as exc:
            self._refused(decoded, f"network error: {exc!r}")
            if key is not None:
                self._attaching.pop(key, None)
            return
        status = response.status_code
        if initialize:
            await self._initialized(decoded, response)
            return
        if status not in (200, 202):
            if key is not None:
                self._attaching.pop(key, None)
            if status == 404 and session is not None:
                # The RFD's answer to an Acp-Session-Id the server does not know: as over stdio, the
                # session was not found (v2 counts that as a successful session/close).
                what = (
                    f"the server does not know session {session!r} ({_status(response)}{_excerpt(response)})"
                )
                self._refused(decoded, what, ErrorCode.RESOURCE_NOT_FOUND, {"sessionId": session})
                return
            self._refused(decoded, f"{_status(response)}{_excerpt(response)}", data={HTTP_STATUS_KEY: status})
            if status == 404 and session is None:
                self._ended(f"the server does not know the connection any more (HTTP 404 on POST {method})")
            return
        if status == 200 and response.content:
            self._incoming([response.content])  # a server may answer inline

    async def _initialized(self, message: dict[str, Any], response: httpx.Response) -> None:
        status = response.status_code
        connection_id = response.headers.get(CONNECTION_ID_HEADER)
        if status != 200:
            self._refused(message, f"{_status(response)}{_excerpt(response)}", data={HTTP_STATUS_KEY: status})
            return
        if not connection_id:
            self._refused(message, f"the answer (HTTP 200) has no {CONNECTION_ID_HEADER} header")
            return
        try:
            answer = parse_json(response.content)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("id") != message.get("id") or "method" in answer:
            # Not its answer (a proxy's page, a stray body): fail initialize now, not at init_timeout.
            self._refused(message, f"the answer (HTTP 200) is not the JSON-RPC response{_excerpt(response)}")
            return
        self.connection_id = connection_id
        self._connection_stream = self.spawn(self._stream(None), "connection stream")
        self._incoming([response.content])

    def _refused(
        self, message: dict[str, Any], what: str, code: int = TRANSPORT_ERROR, data: Any = None
    ) -> None:
        method = message.get("method")
        label = method if isinstance(method, str) else "response" if "id" in message else "message"
        text = f"POST {label} to {self.url} failed: {what}"
        if isinstance(method, str) and "id" in message:
            body: dict[str, Any] = {"code": code, "message": text}
            if data is not None:
                body["data"] = data
            error = {"jsonrpc": "2.0", "id": message["id"], "error": body}
            self.receiver.feed_messages([orjson.dumps(error)])
            return
        logger.warning("%s", text)
        self.failures.append(text)

    # ------------------------------------------------------------------ in

    def _incoming(self, payloads: list[bytes | None], session: str | None = None) -> None:
        messages: list[Received] = []
        for payload in payloads:
            if payload is None:
                limit = self.receiver.max_message_bytes
                messages.append(OversizedLine(limit + 1, limit))
                continue
            if session is not None:
                if b'"id"' in payload and b'"method"' in payload:
                    self._note_request(payload, session)
            elif b'"sessionId"' in payload or (self._attaching and b'"result"' in payload):
                self._route(payload)
            messages.append(payload)
        if messages:
            self.receiver.feed_messages(messages)

    def _note_request(self, payload: bytes, session: str) -> None:
        """An agent request on ``session``'s stream: its answer will name the session."""
        try:
            message = parse_json(payload)
        except ValueError:
            return
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            key = id_key(message.get("id"))
            if key is not None:
                self._asked_in[key] = session

    def _route(self, payload: bytes) -> None:
        """Open the event stream of a session learnt from a response."""
        try:
            message = parse_json(payload)
        except ValueError:
            return
        if not isinstance(message, dict) or "method" in message:
            return
        key = id_key(message.get("id"))
        attached = self._attaching.pop(key, None) if key is not None else None
        if "result" not in message:
            return
        sid = attached or session_id_of(message)
        if sid is not None and sid not in self._session_streams and not self._closing:
            self._session_streams[sid] = self.spawn(self._stream(sid), f"session {sid} stream")

    async def _stream(self, session: str | None) -> None:
        assert self.connection_id is not None
        headers = {"Accept": CONTENT_TYPE_SSE, CONNECTION_ID_HEADER: self.connection_id}
        headers.update(self.headers)
        if session is not None:
            headers[SESSION_ID_HEADER] = session
        what = (
            "the connection's event stream" if session is None else f"the event stream of session {session}"
        )
        reason = f"the server ended {what}"
        try:
            async with self.client.stream(
                "GET", self.url, headers=headers, timeout=_STREAM_TIMEOUT
            ) as answer:
                if answer.status_code != 200:
                    await answer.aread()
                    reason = f"the server refused {what}: {_status(answer)}"
                    reason += _excerpt(answer)
                    return
                decoder = SseDecoder(max_event_bytes=self.receiver.max_message_bytes)
                async for chunk in answer.aiter_bytes():
                    events = decoder.feed(chunk)
                    if events:
                        self._incoming(events, session)
                self._incoming(decoder.end(), session)
        except asyncio.CancelledError:
            reason = "the host closed the connection"
            raise
        except httpx.HTTPError as exc:
            reason = f"{what} was lost: {exc!r}"
        except Exception as exc:  # a bug or an odd medium error: never leave the connection hanging
            reason = f"reading {what} failed: {exc!r}"
        finally:
            if self._by_host:
                reason = "the host closed the connection"
            if session is None:
                self._ended(reason)
            else:
                self._session_streams.pop(session, None)
                if not self._closing:
                    logger.info("%s: %s", self.url, reason)

    # ------------------------------------------------------------------ close

    async def _close_gracefully(self) -> None:
        self._by_host = True
        if self.connection_id is None:
            return
        headers = {CONNECTION_ID_HEADER: self.connection_id, **self.headers}
        response = await self.client.request("DELETE", self.url, headers=headers)
        if response.status_code not in (200, 202, 204, 404):
            logger.info("%s: DELETE answered HTTP %d", self.url, response.status_code)
        stream = self._connection_stream
        if stream is not None and not stream.done():
            # The server ends the stream once the connection is gone (bounded by the grace).
            await asyncio.wait({stream})

    def _abort_medium(self) -> None:
        self._by_host = True
        for task in list(self._session_streams.values()):
            task.cancel()
        if self._connection_stream is not None:
            self._connection_stream.cancel()

    async def _release(self) -> None:
        try:
            await self.client.aclose()
        except Exception as exc:
            logger.debug("%s: closing the HTTP client failed: %r", self.url, exc)


_STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)
"""Event streams are long and may be quiet: no read timeout (the server sends keepalives)."""


def _status(response: httpx.Response) -> str:
    phrase = response.reason_phrase
    return f"HTTP {response.status_code} {phrase}" if phrase else f"HTTP {response.status_code}"


def _excerpt(response: httpx.Response) -> str:
    try:
        text = response.text.strip()
    except Exception:
        return ""
    return f": {text[:200]}" if text else ""


def open_http(
    url: str,
    receiver: Connection,
    *,
    headers: dict[str, str],
    jar: http.cookiejar.CookieJar,
    http2_prior_knowledge: bool = False,
    request_timeout: float = 30.0,
    ssl_context: ssl.SSLContext | None = None,
) -> HttpTransport:
    """Attach a Streamable HTTP transport to ``receiver`` (nothing is sent before ``initialize``)."""
    client = httpx.AsyncClient(
        http1=not http2_prior_knowledge,
        http2=True,
        cookies=jar,
        timeout=httpx.Timeout(request_timeout),
        headers={"User-Agent": "acp-driver"},
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        verify=ssl_context if ssl_context is not None else True,
    )
    transport = HttpTransport(url, receiver, client, headers)
    receiver.attach(transport)
    transport.start()
    return transport
