"""What the loopback model stand-ins share (``fake_anthropic``, ``fake_openai_chat``): an HTTP/1.1
server on 127.0.0.1 (keep-alive, JSON bodies), the requests it records, and the steps a test
scripts. Each API's module says which requests take a step and how a step is written.

- ``Words(prefix, n, interval=0)``: the words ``prefix0 .. prefix{n-1}``, ``interval`` seconds
  apart, then the end of the answer;
- ``Endless(prefix, interval=0.02)``: a word every ``interval`` seconds until the agent hangs up;
- ``Silent()`` (also when the script is empty): the request is read and never answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar


@dataclass(frozen=True)
class Words:
    prefix: str
    n: int
    interval: float = 0.0
    """Seconds between two words (a slow stream that still ends)."""


@dataclass(frozen=True)
class Endless:
    prefix: str
    interval: float = 0.02


@dataclass(frozen=True)
class Silent:
    pass


@dataclass
class Request:
    """One request the agent made: its request line and its JSON body."""

    line: str
    body: dict[str, Any]
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the agent closed the connection before the answer ended (a cancelled stream)."""


R = TypeVar("R", bound=Request)
S = TypeVar("S")


class FakeModelServer(Generic[R, S]):
    """The server: ``await start()``, point the agent at it, append steps to ``script``. A
    subclass says which requests are scripted (``recognise``), answers the others
    (``answer_other``) and writes a step's answer (``answer``)."""

    def __init__(self) -> None:
        self.script: list[S | Silent] = []
        self.decide: Callable[[R], S | Silent] | None = None
        """When set, picks each scripted request's answer instead of ``script``."""
        self.requests: list[R] = []
        self._arrived = asyncio.Condition()
        self._held: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._held:
            writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def wait_for_request(self, index: int, among: Callable[[], list[R]]) -> R:
        """Wait until ``among()`` (the requests, or a subset of them) has an item ``index``."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(among()) > index)
        return among()[index]

    # ------------------------------------------------------------------ what a subclass says

    def recognise(self, line: str, body: dict[str, Any]) -> R | None:
        """The request to record and answer with a step (None: ``answer_other`` answers it)."""
        raise NotImplementedError

    def step_for(self, request: R) -> S | Silent:
        """The step that answers ``request``: ``decide``'s pick, else the script's next."""
        if self.decide is not None:
            return self.decide(request)
        return self.script.pop(0) if self.script else Silent()

    async def answer(self, writer: asyncio.StreamWriter, request: R, step: S) -> None:
        raise NotImplementedError

    async def answer_other(self, writer: asyncio.StreamWriter, line: str) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ the connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._held.append(writer)
        request: R | None = None
        try:
            while True:  # keep-alive: one connection may carry several requests
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                raw = await reader.readexactly(length) if length else b""
                first = head.split(b"\r\n", 1)[0].decode(errors="replace")
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                request = self.recognise(first, body if isinstance(body, dict) else {})
                if request is None:
                    await self.answer_other(writer, first)
                    continue
                async with self._arrived:
                    self.requests.append(request)
                    self._arrived.notify_all()
                step = self.step_for(request)
                if isinstance(step, Silent):
                    await reader.read()  # until the agent hangs up
                    request.hung_up.set()
                    return
                # Endless ends when the agent hangs up: writing then fails with ConnectionError.
                await self.answer(writer, request, step)
        except (ConnectionError, asyncio.IncompleteReadError):
            if request is not None:
                request.hung_up.set()
        except asyncio.CancelledError:
            pass  # close(): the test is over
        finally:
            self._tasks.discard(task)


def head(status: int, content_type: str, length: int) -> bytes:
    """A response's head with a body of ``length`` bytes."""
    reason = {200: "OK", 404: "Not Found"}[status]
    return f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n".encode()


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
"""A server-sent event stream's head: each event is then one HTTP chunk, ``0\\r\\n\\r\\n`` last."""


def write_json(writer: asyncio.StreamWriter, status: int, document: Any) -> None:
    """A whole JSON response."""
    payload = json.dumps(document).encode()
    writer.write(head(status, "application/json", len(payload)) + payload)


def write_event(writer: asyncio.StreamWriter, text: str) -> None:
    """One server-sent event (its lines, then the blank line), framed as one HTTP chunk."""
    payload = f"{text}\n\n".encode()
    writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
