"""A result too deep to encode (an echo of params nested 500 deep: orjson stops at 255 levels)
is answered ``-32603``, whether its handler is inline or a task, and the connection goes on:
never a ``RecursionError`` out of the read loop and a request left unanswered."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_driver import Connection

from .test_requests import RecordingTransport, spin

DEPTH = 500


async def _echo(params: Any) -> Any:
    return params


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "task"])
async def test_a_reply_too_deep_to_encode_is_answered_with_an_error(inline: bool) -> None:
    conn = Connection(name="t")
    wire = RecordingTransport()
    conn.attach(wire)
    conn.on_request("echo", (lambda params: params) if inline else _echo)
    deep = b"[" * DEPTH + b"]" * DEPTH
    try:
        conn.feed_messages(
            [
                b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"deep":%s}}' % deep,
                orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"flat": 1}}),
            ]
        )
        await spin()
        first, second = (m for m in wire.messages() if "method" not in m)
        assert first["id"] == 1
        assert first["error"]["code"] == -32603
        assert second == {"jsonrpc": "2.0", "id": 2, "result": {"flat": 1}}
    finally:
        await conn.aclose()
