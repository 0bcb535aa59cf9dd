"""Injected encode and send failures: a request that cannot be encoded or written never hangs.

Hypothesis draws a sequence of requests and notifications -- some with params that cannot be
encoded (a lone surrogate, an object) -- and the write at which the transport starts raising
(and what: a broken pipe, or an unexpected error). Whatever is drawn:

- a message that cannot be encoded fails its call at once and records nothing;
- every request future resolves without help (no ``aclose`` from the test): answered by the
  peer, or failed at once once the transport failed -- also under an owner that closes the
  connection itself later (``on_peer_gone``, as the host driver does): a transport that raised
  (not a peer that stopped reading) fails every waiter at once, since nothing more can be sent;
- at the end nothing is in flight on our side and nothing reached the loop's exception handler.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_driver import Connection, ConnectionClosedError, RemoteProtocolError, RpcError

from .test_property import MemoryTransport


class FaultyTransport(MemoryTransport):
    """Delivers like ``MemoryTransport`` until write number ``fail_at``; from then on raises."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, peer: Connection, fail_at: int, error: type[Exception]
    ):
        super().__init__(loop, peer)
        self.fail_at = fail_at
        self.error = error
        self.writes = 0

    def send(self, messages: list[bytes]) -> None:
        self.writes += 1
        if self.writes >= self.fail_at:
            raise self.error("injected write failure")
        super().send(messages)


UNENCODABLE: list[Any] = [{"o": object()}, {"n": 2**70}]
ODD_BUT_SENT: list[Any] = [{"i": 0}, {"t": "caf\udce9"}, ["\ud83d"]]
"""Lone surrogates are sent, with U+FFFD in their place (core/_json.py)."""

operations = st.lists(
    st.tuples(st.sampled_from(["request", "request_nowait", "notify"]), st.booleans()),
    min_size=1,
    max_size=12,
)


async def scenario(
    ops: list[tuple[str, bool]], fail_at: int, error: type[Exception], pick: int, owner: bool
) -> None:
    loop = asyncio.get_running_loop()
    crashes: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _l, ctx: crashes.append(ctx))
    client, server = Connection(name="client"), Connection(name="server")
    if owner:
        client.on_peer_gone = lambda how: None  # the owner would close later (never, here)

    async def echo(params: Any) -> Any:
        return params

    server.on_request("echo", echo)
    client.attach(FaultyTransport(loop, server, fail_at, error))
    server.attach(MemoryTransport(loop, client))
    futures: list[asyncio.Future[Any]] = []
    for i, (op, encodable) in enumerate(ops):
        if encodable:
            params: Any = ODD_BUT_SENT[(pick + i) % len(ODD_BUT_SENT)]
        else:
            params = UNENCODABLE[(pick + i) % len(UNENCODABLE)]
        before = client.in_flight
        try:
            if op == "request":
                futures.append(asyncio.ensure_future(client.request("echo", params)))
                await asyncio.sleep(0)  # let it be sent (or fail)
            elif op == "request_nowait":
                futures.append(client.request_nowait("echo", params))
            else:
                client.notify_nowait("note", params)
        except (TypeError, ConnectionClosedError) as exc:
            # Refused at once: unencodable, or the connection already failed. Nothing recorded.
            refused_rightly = isinstance(exc, ConnectionClosedError) or not encodable
            assert refused_rightly, repr(exc)  # noqa: PT017
            assert client.in_flight == before
        else:
            assert encodable or op == "request", (op, params)
        await asyncio.sleep(0)
    if owner and issubclass(error, (OSError, RuntimeError)) and fail_at <= client.transport.writes:  # type: ignore[union-attr]
        # The peer stopped reading: it may still answer what it read; the owner closes.
        await client.aclose()
    # Otherwise no aclose here: every future must resolve on its own, within a bounded wait.
    async with asyncio.timeout(10):
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
    for i, outcome in enumerate(outcomes):
        assert not isinstance(outcome, asyncio.CancelledError), i
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, (ConnectionClosedError, TypeError, RpcError)), repr(outcome)
    assert client.in_flight[1] == 0
    await client.aclose()
    await server.aclose()
    assert crashes == []


@settings(max_examples=150, deadline=None)
@given(
    ops=operations,
    fail_at=st.integers(min_value=1, max_value=20),
    error=st.sampled_from([BrokenPipeError, ValueError, RuntimeError, OSError, KeyError]),
    pick=st.integers(0, 3),
    owner=st.booleans(),
)
def test_no_request_stays_pending_whatever_fails_to_encode_or_send(
    ops: list[tuple[str, bool]], fail_at: int, error: type[Exception], pick: int, owner: bool
) -> None:
    asyncio.run(scenario(ops, fail_at, error, pick, owner))


class EchoWrongId:
    """A peer that answers each request with its id turned into ``kind`` (3 -> 3.0 or "3")."""

    def __init__(self, loop: asyncio.AbstractEventLoop, conn: Connection, kind: type) -> None:
        self.loop, self.conn, self.kind = loop, conn, kind

    def send(self, messages: list[bytes]) -> None:
        for data in messages:
            msg = orjson.loads(data)
            if "id" in msg and "method" in msg:
                reply = {"jsonrpc": "2.0", "id": self.kind(msg["id"]), "result": {}}
                self.loop.call_soon(self.conn.feed_messages, [orjson.dumps(reply)])

    def close_write(self) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool:
        return False


@pytest.mark.parametrize("kind", [float, str])
async def test_an_answer_whose_id_only_looks_like_ours_fails_the_request_at_once(kind: type) -> None:
    # JSON-RPC ids match exactly: 3.0 or "3" does not answer request 3 -- but waiting forever
    # would hang the turn, so the request fails with a protocol error that says why.
    client = Connection(name="client")
    client.attach(EchoWrongId(asyncio.get_running_loop(), client, kind))
    async with asyncio.timeout(10):
        with pytest.raises(RemoteProtocolError, match="does not match our request id 1 exactly"):
            await client.request("x", {})
    assert client.in_flight == (0, 0)
    await client.aclose()
