"""Every message the core queues is one JSON text followed by exactly one newline.

NDJSON transports send the queued messages joined as they are; a message without its newline
would glue two messages into one line (spec, transports.mdx: "Messages are delimited by
newlines (\\n), and MUST NOT contain embedded newlines").
"""

from __future__ import annotations

import json

import orjson

from acp_driver.core import Endpoint


def assert_framed(messages: list[bytes]) -> None:
    assert messages
    for message in messages:
        assert message.endswith(b"\n"), message
        assert b"\n" not in message[:-1], message
        json.loads(message)  # the stdlib: it reads lone-surrogate escapes too


def test_every_kind_of_outgoing_message_ends_with_one_newline() -> None:
    core = Endpoint()
    core.send_request("a", {"text": "line one\nline two"})  # escaped inside the JSON text
    core.send_notification("n", {"x": 1})
    rid = core.send_request("b")
    core.send_cancel_request(rid)
    core.receive_data(b'{"jsonrpc":"2.0","id":7,"method":"m"}\n{"jsonrpc":"2.0","id":8,"method":"m"}\n')
    core.send_result(7, {"ok": True})
    core.send_error(8, -32603, "boom")
    core.receive_data(b"not json\n")  # -32700 reply
    core.receive_data(b'{"jsonrpc":"2.0","id":"\\ud83d","method":"m"}\n')  # a lone surrogate id
    core.send_result("\ud83d", None)
    core.receive_data(b'[{"jsonrpc":"2.0","id":9,"method":"m"},{"jsonrpc":"2.0","id":10}]\n')  # a batch
    core.send_result(9, 1)
    messages = core.messages_to_send()
    assert len(messages) == 9
    assert_framed(messages)
    batch = orjson.loads(messages[-1])
    assert [reply.get("id") for reply in batch] == [10, 9]
