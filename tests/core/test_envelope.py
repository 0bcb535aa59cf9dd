"""Envelope parsing: one table row per class of malformed input, plus the valid shapes."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from acp_driver.core import (
    CancelRequest,
    EndOfInput,
    Endpoint,
    ErrorResponse,
    Notification,
    NotificationRun,
    ProtocolViolation,
    Request,
    Response,
    Violation,
)


def replies(conn: Endpoint) -> list[Any]:
    data = conn.data_to_send()
    return [json.loads(line) for line in data.splitlines()]  # not orjson: lone surrogates too


def error_reply(id: Any, code: int) -> tuple[Any, int]:
    return (id, code)


# (name, line, expected reply (id, code) -- None: a response, never answered -- and violation kind)
MALFORMED = [
    ("invalid json", b"{not json", (None, -32700), Violation.PARSE_ERROR),
    ("truncated json", b'{"jsonrpc":"2.0","id":1,"method":"x"', (None, -32700), Violation.PARSE_ERROR),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', (None, -32700), Violation.PARSE_ERROR),
    ("scalar number", b"42", (None, -32600), Violation.INVALID_MESSAGE),
    ("scalar string", b'"hello"', (None, -32600), Violation.INVALID_MESSAGE),
    ("scalar null", b"null", (None, -32600), Violation.INVALID_MESSAGE),
    ("missing jsonrpc", b'{"id":1,"method":"x"}', (1, -32600), Violation.INVALID_MESSAGE),
    ("wrong jsonrpc", b'{"jsonrpc":"1.0","id":"a","method":"x"}', ("a", -32600), Violation.INVALID_MESSAGE),
    ("jsonrpc as number", b'{"jsonrpc":2.0,"id":3,"method":"x"}', (3, -32600), Violation.INVALID_MESSAGE),
    ("non-string method", b'{"jsonrpc":"2.0","id":4,"method":5}', (4, -32600), Violation.INVALID_MESSAGE),
    ("non-string method, no id", b'{"jsonrpc":"2.0","method":5}', (None, -32600), Violation.INVALID_MESSAGE),
    (
        "notification, missing jsonrpc",
        b'{"method":"x","params":{}}',
        (None, -32600),
        Violation.INVALID_MESSAGE,
    ),
    (
        "notification, wrong jsonrpc",
        b'{"jsonrpc":"1.0","method":"x"}',
        (None, -32600),
        Violation.INVALID_MESSAGE,
    ),
    (
        "notification, scalar params",
        b'{"jsonrpc":"2.0","method":"x","params":"p"}',
        (None, -32600),
        Violation.INVALID_MESSAGE,
    ),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"x"}', (None, -32600), Violation.INVALID_MESSAGE),
    ("float id", b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', (None, -32600), Violation.INVALID_MESSAGE),
    ("object id", b'{"jsonrpc":"2.0","id":{},"method":"x"}', (None, -32600), Violation.INVALID_MESSAGE),
    ("array id", b'{"jsonrpc":"2.0","id":[1],"method":"x"}', (None, -32600), Violation.INVALID_MESSAGE),
    (
        "scalar params",
        b'{"jsonrpc":"2.0","id":6,"method":"x","params":3}',
        (6, -32600),
        Violation.INVALID_MESSAGE,
    ),
    ("no method no result", b'{"jsonrpc":"2.0","id":7}', (7, -32600), Violation.INVALID_MESSAGE),
    ("empty object", b"{}", (None, -32600), Violation.INVALID_MESSAGE),
    (
        "both result and error",
        b'{"jsonrpc":"2.0","id":8,"result":1,"error":{"code":1,"message":"m"}}',
        None,
        Violation.INVALID_MESSAGE,
    ),
    (
        "error not an object",
        b'{"jsonrpc":"2.0","id":9,"error":"bad"}',
        None,
        Violation.INVALID_MESSAGE,
    ),
    (
        "error without code",
        b'{"jsonrpc":"2.0","id":9,"error":{"message":"m"}}',
        None,
        Violation.INVALID_MESSAGE,
    ),
    ("response without id", b'{"jsonrpc":"2.0","result":1}', None, Violation.INVALID_MESSAGE),
    (
        "error object without id (codex-acp answering a notification)",
        b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"}}',
        None,
        Violation.INVALID_MESSAGE,
    ),
    ("response with float id", b'{"jsonrpc":"2.0","id":1.0,"result":1}', None, Violation.INVALID_MESSAGE),
    ("NaN", b'{"jsonrpc":"2.0","id":1,"method":"x","params":[NaN]}', (None, -32700), Violation.PARSE_ERROR),
    (
        "Infinity",
        b'{"jsonrpc":"2.0","method":"x","params":[-Infinity]}',
        (None, -32700),
        Violation.PARSE_ERROR,
    ),
    ("bad escape", b'{"jsonrpc":"2.0","method":"x\\q"}', (None, -32700), Violation.PARSE_ERROR),
    ("nested too deep", b"[" * 100_000, (None, -32700), Violation.PARSE_ERROR),
    (
        "response wrong jsonrpc",
        b'{"jsonrpc":"1","id":1,"result":1}',
        None,
        Violation.INVALID_MESSAGE,
    ),
    ("empty batch", b"[]", (None, -32600), Violation.EMPTY_BATCH),
]


@pytest.mark.parametrize(
    ("line", "reply", "kind"), [row[1:] for row in MALFORMED], ids=[r[0] for r in MALFORMED]
)
def test_malformed_input_is_answered_and_reported(
    line: bytes, reply: tuple[Any, int] | None, kind: Violation
) -> None:
    conn = Endpoint()
    events = conn.receive_data(line + b"\n")
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, ProtocolViolation)
    assert event.kind is kind
    if reply is None:
        assert not event.replied
        assert conn.data_to_send() == b""  # a response is never answered
    else:
        assert event.replied
        (answer,) = replies(conn)
        assert answer["jsonrpc"] == "2.0"
        assert (answer["id"], answer["error"]["code"]) == reply
    # The connection survives: the next valid message is processed normally.
    assert conn.receive_data(b'{"jsonrpc":"2.0","id":99,"method":"ok"}\n') == [Request(99, "ok", None)]
    assert len(conn.incoming) == 1


def test_oversized_line_is_answered_and_the_connection_survives() -> None:
    conn = Endpoint(max_line_bytes=64)
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"pad":"' + b"a" * 200 + b'"}}\n'
    events = conn.receive_data(big + b'{"jsonrpc":"2.0","id":2,"method":"x"}\n')
    assert isinstance(events[0], ProtocolViolation)
    assert events[0].kind is Violation.OVERSIZED_LINE
    assert events[1] == Request(2, "x", None)
    (answer,) = replies(conn)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600


def test_valid_shapes() -> None:
    conn = Endpoint()
    rid = conn.send_request("fs/read_text_file", {"path": "/x"})
    conn.data_to_send()
    events = conn.receive_data(
        b'{"jsonrpc":"2.0","id":"s1","method":"session/prompt","params":{"a":1}}\n'
        b'{"jsonrpc":"2.0","method":"session/update","params":[1,2]}\n'
        b'{"jsonrpc":"2.0","id":null,"method":"nullid"}\n'
        b'{"jsonrpc":"2.0","id":%d,"result":{"content":"hi"}}\n' % rid
    )
    assert events == [
        Request("s1", "session/prompt", {"a": 1}),
        Notification("session/update", [1, 2]),
        Request(None, "nullid", None),
        Response(rid, {"content": "hi"}),
    ]
    assert conn.data_to_send() == b""  # nothing valid is answered by the core itself


def test_error_response_is_delivered() -> None:
    conn = Endpoint()
    rid = conn.send_request("x")
    events = conn.receive_data(
        b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32000,"message":"auth","data":[1]}}\n' % rid
    )
    assert events == [ErrorResponse(rid, -32000, "auth", [1])]


def test_notifications_are_never_answered() -> None:
    conn = Endpoint()
    conn.receive_data(
        b'{"jsonrpc":"2.0","method":"unknown/thing"}\n'
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":12345}}\n'
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}\n'
        b'{"jsonrpc":"2.0","method":"$/whatever"}\n'
    )
    assert conn.data_to_send() == b""


def test_a_run_method_comes_as_one_event_per_run_in_the_order_read() -> None:
    conn = Endpoint()
    conn.run_methods = frozenset({"u", "v"})
    rid = conn.send_request("prompt", {})
    conn.data_to_send()
    events = conn.receive_data(
        b'{"jsonrpc":"2.0","method":"u","params":{"n":1}}\n'
        b'{"jsonrpc":"2.0","method":"u","params":{"n":2}}\n'
        b'{"jsonrpc":"2.0","method":"other"}\n'
        b'{"jsonrpc":"2.0","method":"u","params":{"n":3}}\n'
        b'{"jsonrpc":"2.0","method":"v","params":{"n":4}}\n'
        b'{"jsonrpc":"2.0","method":"u"}\n'
        b'{"jsonrpc":"2.0","id":%d,"result":{}}\n'
        b'{"jsonrpc":"2.0","method":"u","params":{"n":5}}\n'
        b'{"jsonrpc":"2.0","method":"u","params":{"n":6}}\n'
        b'[{"jsonrpc":"2.0","method":"u","params":{"n":7}},{"jsonrpc":"2.0","method":"u","params":{"n":8}}]\n'
        b'{"jsonrpc":"2.0","method":"u","jsonrpc-typo":1}\n' % rid
    )
    # Any other message ends a run (its event comes between); a batch's items make their own.
    assert events[:8] == [
        NotificationRun("u", [{"n": 1}, {"n": 2}]),
        Notification("other"),
        NotificationRun("u", [{"n": 3}]),
        NotificationRun("v", [{"n": 4}]),
        NotificationRun("u", [None]),
        Response(rid, {}),
        NotificationRun("u", [{"n": 5}, {"n": 6}]),
        NotificationRun("u", [{"n": 7}, {"n": 8}]),
    ]
    assert events[8:] == [NotificationRun("u", [None])]
    assert conn.data_to_send() == b""  # never answered


def test_batch_of_requests_is_answered_as_one_array_when_all_are_answered() -> None:
    conn = Endpoint()
    events = conn.receive_data(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},'
        b'{"jsonrpc":"2.0","id":2,"method":"b"}, 5]\n'
    )
    assert [type(e) for e in events] == [Request, Notification, Request, ProtocolViolation]
    assert conn.data_to_send() == b""  # held until every request of the batch is answered
    conn.send_result(2, "two")
    assert conn.data_to_send() == b""
    conn.send_error(1, -32601, "nope")
    data = conn.data_to_send()
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    batch = orjson.loads(data)
    assert isinstance(batch, list)
    assert sorted(str(r["id"]) for r in batch) == ["1", "2", "None"]
    by_id = {r["id"]: r for r in batch}
    assert by_id[2]["result"] == "two"
    assert by_id[1]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32600


def test_batch_of_notifications_gets_no_reply() -> None:
    conn = Endpoint()
    events = conn.receive_data(b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]\n')
    assert events == [Notification("a"), Notification("b")]
    assert conn.data_to_send() == b""


def test_batch_of_invalid_items_is_answered_at_once() -> None:
    conn = Endpoint()
    conn.receive_data(b"[1, 2]\n")
    batch = orjson.loads(conn.data_to_send())
    assert [r["error"]["code"] for r in batch] == [-32600, -32600]


def test_responses_in_a_batch_resolve_our_requests() -> None:
    conn = Endpoint()
    a = conn.send_request("a")
    b = conn.send_request("b")
    events = conn.receive_data(
        b'[{"jsonrpc":"2.0","id":%d,"result":1},{"jsonrpc":"2.0","id":%d,"result":2}]\n' % (a, b)
    )
    assert events == [Response(a, 1), Response(b, 2)]
    assert len(conn.outgoing) == 0


def test_invalid_response_to_a_pending_request_fails_it() -> None:
    conn = Endpoint()
    rid = conn.send_request("x")
    (event,) = conn.receive_data(
        b'{"jsonrpc":"2.0","id":%d,"result":1,"error":{"code":1,"message":"m"}}\n' % rid
    )
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.INVALID_RESPONSE
    assert event.id == rid
    assert rid not in conn.outgoing


def test_unknown_and_duplicate_responses_are_violations_not_crashes() -> None:
    conn = Endpoint()
    rid = conn.send_request("x")
    conn.data_to_send()
    conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"result":1}\n' % rid)
    (dup,) = conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"result":1}\n' % rid)
    assert isinstance(dup, ProtocolViolation)
    assert dup.kind is Violation.DUPLICATE_RESPONSE
    (unknown,) = conn.receive_data(b'{"jsonrpc":"2.0","id":777,"result":1}\n')
    assert isinstance(unknown, ProtocolViolation)
    assert unknown.kind is Violation.UNKNOWN_RESPONSE_ID
    (null_err,) = conn.receive_data(
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
    )
    assert isinstance(null_err, ProtocolViolation)
    assert null_err.kind is Violation.NULL_ID_ERROR
    assert conn.data_to_send() == b""  # responses are never answered


def test_duplicate_request_id_in_flight_is_refused_without_touching_the_first() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    (event,) = conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"b"}\n')
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.DUPLICATE_REQUEST_ID
    (answer,) = replies(conn)
    assert answer["id"] is None  # echoing 1 would look like the answer to the first request
    entry = conn.incoming.get(1)
    assert entry is not None
    assert entry.method == "a"


def test_id_may_be_reused_after_its_request_ended() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    conn.send_result(1, None)
    assert conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"b"}\n') == [Request(1, "b", None)]


def test_eof_event() -> None:
    conn = Endpoint()
    events = conn.receive_data(b'{"jsonrpc":"2.0","method":"tail"}')
    assert events == []
    assert conn.receive_data(b"") == [Notification("tail"), EndOfInput()]
    assert conn.their_eof


def test_cancel_request_for_in_flight_request() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":"r","method":"slow"}\n')
    assert conn.receive_data(
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r"}}\n'
    ) == [CancelRequest("r")]
    entry = conn.incoming.get("r")
    assert entry is not None
    assert entry.cancel_requested


# ---------------------------------------------------------------------------- odd but valid input


def test_lone_surrogate_escapes_are_valid_json_on_every_kind_of_message() -> None:
    # RFC 8259 allows "\ud83d" alone; JavaScript's JSON.stringify emits it. orjson rejects it:
    # the fallback parser must read it (a request, a notification and a response).
    conn = Endpoint()
    rid = conn.send_request("x")
    conn.data_to_send()
    events = conn.receive_data(
        b'{"jsonrpc":"2.0","id":5,"method":"m","params":{"t":"\\ud83d"}}\n'
        b'{"jsonrpc":"2.0","method":"n","params":{"t":"a\\udce9b"}}\n'
        b'{"jsonrpc":"2.0","id":%d,"result":{"t":"\\udfff"}}\n' % rid
    )
    assert events == [
        Request(5, "m", {"t": "\ud83d"}),
        Notification("n", {"t": "a\udce9b"}),
        Response(rid, {"t": "\udfff"}),
    ]
    assert conn.data_to_send() == b""


def test_a_string_that_is_not_unicode_is_sent_with_u_fffd() -> None:
    """Our own messages never carry a lone surrogate (strict peers refuse the whole line): it is
    replaced by U+FFFD, and the request goes out (core/_json.py)."""
    conn = Endpoint()
    assert conn.send_request("x", {"t": "caf\udce9"}) == 1
    conn.send_notification("n", ["\ud83d"])
    assert (
        conn.data_to_send()
        == (
            '{"jsonrpc":"2.0","id":1,"method":"x","params":{"t":"caf\ufffd"}}\n'
            '{"jsonrpc":"2.0","method":"n","params":["\ufffd"]}\n'
        ).encode()
    )


def test_sending_a_value_that_is_not_json_fails_at_once_and_records_nothing() -> None:
    conn = Endpoint()
    with pytest.raises(TypeError):
        conn.send_request("x", {"t": object()})
    assert len(conn.outgoing) == 0
    assert conn.send_request("x") == 1  # the id was not consumed
    with pytest.raises(TypeError):
        conn.send_notification("n", [object()])


@pytest.mark.parametrize("wrong", [b"1.0", b'"1"', b'" 1"'])
def test_a_response_id_that_only_looks_like_ours_fails_our_request_at_once(wrong: bytes) -> None:
    conn = Endpoint()
    rid = conn.send_request("x")
    assert rid == 1
    conn.data_to_send()
    (event,) = conn.receive_data(b'{"jsonrpc":"2.0","id":%s,"result":{}}\n' % wrong)
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.INVALID_RESPONSE
    assert event.id == rid
    assert "does not match" in event.detail
    assert rid not in conn.outgoing
    assert conn.data_to_send() == b""  # never answered
    # A late exact answer is now a duplicate, not a crash.
    (late,) = conn.receive_data(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    assert isinstance(late, ProtocolViolation)
    assert late.kind is Violation.DUPLICATE_RESPONSE


def test_a_string_id_that_is_not_ours_is_an_unknown_response() -> None:
    conn = Endpoint()
    conn.send_request("x")
    (event,) = conn.receive_data(b'{"jsonrpc":"2.0","id":"abc","result":{}}\n')
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.UNKNOWN_RESPONSE_ID
    assert len(conn.outgoing) == 1


def test_error_replies_to_garbage_are_bounded_and_a_valid_message_resets_the_bound() -> None:
    conn = Endpoint(max_error_replies=3)
    events = conn.receive_data(b"garbage\n" * 10)
    assert [e.replied for e in events if isinstance(e, ProtocolViolation)] == [True] * 3 + [False] * 7
    assert len(replies(conn)) == 3
    conn.receive_data(b'{"jsonrpc":"2.0","method":"ok"}\n')
    conn.receive_data(b"garbage\n" * 5)
    assert len(replies(conn)) == 3


def test_a_parse_error_quotes_the_start_of_its_line() -> None:
    conn = Endpoint()
    (event,) = conn.receive_data(b"Starting agent v1.2 ..." + b"x" * 1000 + b"\n")
    assert isinstance(event, ProtocolViolation)
    assert event.line is not None
    assert event.line.startswith(b"Starting agent v1.2")
    assert len(event.line) < 1000


def test_a_peer_id_with_lone_surrogates_is_echoed_as_it_came() -> None:
    # Found by the fuzzer: echoing such an id used to raise inside receive_data (a crash of the
    # reader); an answer to a request with such an id could not be sent at all.
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":"\\ud83d","method":5}\n')  # invalid: echoes the id
    (reply,) = replies(conn)
    assert reply["id"] == "\ud83d"
    conn.receive_data(b'{"jsonrpc":"2.0","id":"a\\udce9","method":"m"}\n')
    conn.send_result("a\udce9", {"ok": True})
    assert conn.data_to_send() == b'{"jsonrpc":"2.0","id":"a\\udce9","result":{"ok":true}}\n'
    conn.receive_data(b'{"jsonrpc":"2.0","id":"b\\udce9","method":"m"}\n')
    conn.send_result("b\udce9", {"t": "\udce9"})  # our own content: U+FFFD, never a lone surrogate
    assert conn.data_to_send() == '{"jsonrpc":"2.0","id":"b\\udce9","result":{"t":"\ufffd"}}\n'.encode()


def test_a_peer_id_beyond_64_bits_is_echoed_as_it_came() -> None:
    # Found by the fuzzer: the fallback parser reads big integers; echoing one crashed the reader.
    # (orjson reads them as floats: only a line it rejects, here for a lone surrogate, keeps them.)
    big = 2**70
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"method":5,"x":"\\ud83d"}\n' % big)
    conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"method":"m","x":"\\ud83d"}\n' % (big + 1))
    conn.send_result(big + 1, None)
    assert [r["id"] for r in replies(conn)] == [big, big + 1]


def test_a_reply_to_garbage_whose_detail_quotes_non_unicode_text_is_still_sent() -> None:
    # Found by the long fuzz run: a duplicate request id whose method had lone surrogates made
    # the reply's detail unencodable, which raised inside receive_data (the reader died).
    conn = Endpoint()
    line = b'{"jsonrpc":"2.0","id":2,"method":"\\ud8a4","params":{}}\n'
    conn.receive_data(line)
    (event,) = conn.receive_data(line)
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.DUPLICATE_REQUEST_ID
    (reply,) = replies(conn)
    assert (reply["id"], reply["error"]["code"]) == (None, -32600)


def test_an_error_quoting_a_lone_surrogate_is_sent_with_u_fffd() -> None:
    """Our own text never carries a lone surrogate (core/_json.py): the method name the error
    quotes comes back with U+FFFD in its place, in the message and the data alike."""
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"\\ud83d"}\n')
    conn.send_error(1, -32601, "Method not found: \ud83d", {"method": "\ud83d"})
    (reply,) = replies(conn)
    assert reply["error"] == {
        "code": -32601,
        "message": "Method not found: \ufffd",
        "data": {"method": "\ufffd"},
    }
    assert len(conn.incoming) == 0


def test_an_error_whose_data_is_not_json_is_still_sent_without_its_data() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    conn.send_error(1, -32603, "Internal error", {"what": object()})
    (reply,) = replies(conn)
    assert reply["error"] == {"code": -32603, "message": "Internal error"}
    assert len(conn.incoming) == 0
