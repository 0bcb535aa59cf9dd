"""The in-flight ledger: one answer per request, tombstones, cancel-requested vs outcome."""

from __future__ import annotations

import orjson
import pytest

from acp_driver.core import (
    Endpoint,
    Ignored,
    LocalProtocolError,
    Outcome,
    ProtocolViolation,
    Quiet,
    Request,
    Violation,
)


def test_answering_twice_is_a_local_error() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    conn.send_result(1, "ok")
    with pytest.raises(LocalProtocolError, match="already ended"):
        conn.send_result(1, "again")
    with pytest.raises(LocalProtocolError, match="already ended"):
        conn.send_cancelled(1)
    assert conn.data_to_send().count(b"\n") == 1


def test_answering_an_unknown_id_is_a_local_error() -> None:
    conn = Endpoint()
    with pytest.raises(LocalProtocolError, match="no incoming request"):
        conn.send_result(5, None)
    assert conn.data_to_send() == b""


def test_an_unserializable_result_records_nothing() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    with pytest.raises(TypeError):
        conn.send_result(1, object())
    assert 1 in conn.incoming  # still in flight: it can still be answered once
    conn.send_error(1, -32603, "Internal error")
    assert orjson.loads(conn.data_to_send())["error"]["code"] == -32603


def test_incoming_and_outgoing_ids_are_separate_namespaces() -> None:
    conn = Endpoint()
    ours = conn.send_request("ours")
    assert conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"method":"theirs"}\n' % ours) == [
        Request(ours, "theirs", None)
    ]
    conn.send_result(ours, "answer to theirs")
    assert ours in conn.outgoing  # our request with the same number is untouched


def test_cancel_requested_is_kept_apart_from_the_outcome() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    conn.receive_data(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n')
    conn.send_result(1, {"partial": True})  # the handler chose to return a partial result
    stone = conn.incoming.tombstone(1)
    assert stone is not None
    assert stone.cancel_requested
    assert stone.outcome is Outcome.RESULT


def test_cancelled_outcome_for_minus_32800() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    conn.send_cancelled(1)
    stone = conn.incoming.tombstone(1)
    assert stone is not None
    assert stone.outcome is Outcome.CANCELLED
    assert not stone.cancel_requested  # internal cancellation: nobody asked


def test_late_cancel_and_repeated_cancel_are_quiet() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    cancel = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n'
    conn.receive_data(cancel)
    assert conn.receive_data(cancel) == [Quiet(Ignored.REPEATED_CANCEL, 1, "a")]
    conn.send_cancelled(1)
    assert conn.receive_data(cancel) == [Quiet(Ignored.LATE_CANCEL, 1, "a")]


def test_cancel_request_is_sent_once_and_late_reply_hits_the_tombstone() -> None:
    conn = Endpoint()
    rid = conn.send_request("slow")
    conn.data_to_send()
    assert conn.send_cancel_request(rid) is True
    assert conn.send_cancel_request(rid) is False
    sent = conn.data_to_send()
    assert orjson.loads(sent) == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": rid},
    }
    assert conn.abandon(rid)
    stone = conn.outgoing.tombstone(rid)
    assert stone is not None
    assert stone.outcome is Outcome.ABANDONED
    assert stone.cancel_requested
    assert conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":"c"}}\n' % rid) == [
        Quiet(Ignored.LATE_RESPONSE, rid, "slow")
    ]


def test_cancel_for_an_unknown_id_is_reported_but_never_answered() -> None:
    conn = Endpoint()
    (event,) = conn.receive_data(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":42}}\n')
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.UNKNOWN_CANCEL_ID
    assert not event.replied
    assert conn.data_to_send() == b""


def test_tombstones_are_bounded() -> None:
    conn = Endpoint(max_tombstones=3)
    ids = [conn.send_request("x") for _ in range(5)]
    for rid in ids:
        conn.abandon(rid)
    assert conn.outgoing.tombstone_count == 3
    assert conn.outgoing.tombstone(ids[0]) is None
    assert conn.outgoing.tombstone(ids[-1]) is not None


def test_a_result_without_jsonrpc_fails_the_request_it_names() -> None:
    conn = Endpoint()
    rid = conn.send_request("x")
    (event,) = conn.receive_data(b'{"id":%d,"result":1}\n' % rid)
    assert isinstance(event, ProtocolViolation)
    assert event.kind is Violation.INVALID_RESPONSE
    assert event.id == rid
    assert rid not in conn.outgoing


def test_tombstones_forget_the_oldest_first() -> None:
    conn = Endpoint(max_tombstones=3)
    ids = [conn.send_request("x") for _ in range(6)]
    for rid in ids:
        conn.abandon(rid)
        # Every ended request is remembered until three more ended after it.
        assert conn.outgoing.tombstone(rid) is not None
    assert [conn.outgoing.tombstone(rid) is not None for rid in ids] == [False] * 3 + [True] * 3


def test_a_reused_incoming_id_keeps_its_new_tombstone_when_the_old_one_is_forgotten() -> None:
    conn = Endpoint(max_tombstones=3)
    conn.receive_data(b'{"jsonrpc":"2.0","id":"a","method":"m"}\n')
    conn.send_result("a", 1)  # "a" remembered (the oldest)
    conn.receive_data(b'{"jsonrpc":"2.0","id":"a","method":"again"}\n')  # the peer reuses "a"
    conn.send_result("a", 2)  # remembered again, as the newest
    for rid in (b'"b"', b'"c"'):
        conn.receive_data(b'{"jsonrpc":"2.0","id":%s,"method":"m"}\n' % rid)
        conn.send_result(rid.decode().strip('"'), 3)
    # Three ended since the first "a": its slot is reused, but "a" itself ended since then.
    stone = conn.incoming.tombstone("a")
    assert stone is not None
    assert stone.method == "again"
    assert conn.incoming.tombstone_count == 3


def test_children_are_tracked_by_parent() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt"}\n')
    a = conn.send_request("session/request_permission", parent="p")
    b = conn.send_request("fs/read_text_file", parent="p")
    conn.send_request("unrelated")
    assert sorted(e.id for e in conn.outgoing.children("p")) == sorted([a, b])  # type: ignore[type-var]
    conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % a)
    assert [e.id for e in conn.outgoing.children("p")] == [b]


def test_nothing_can_be_sent_after_close() -> None:
    conn = Endpoint()
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    conn.close()
    with pytest.raises(LocalProtocolError):
        conn.send_request("x")
    with pytest.raises(LocalProtocolError):
        conn.send_result(1, None)
    assert conn.abandon_incoming(1)
    stone = conn.incoming.tombstone(1)
    assert stone is not None
    assert stone.outcome is Outcome.ABANDONED
