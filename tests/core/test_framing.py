"""NDJSON framing across chunk boundaries, CRLF, EOF without newline, oversized lines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_driver.core import LineFramer, OversizedLine


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes | OversizedLine]:
    out: list[bytes | OversizedLine] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    out.extend(framer.feed(b""))
    return out


def test_one_line_per_message() -> None:
    assert feed_all(LineFramer(), [b'{"a":1}\n{"b":2}\n']) == [b'{"a":1}', b'{"b":2}']


def test_crlf_is_tolerated() -> None:
    assert feed_all(LineFramer(), [b'{"a":1}\r\n{"b":2}\r\n']) == [b'{"a":1}', b'{"b":2}']


def test_last_line_without_newline_is_delivered_at_eof() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}") == []
    assert framer.feed(b"") == [b'{"b":2}']


def test_blank_lines_are_skipped() -> None:
    assert feed_all(LineFramer(), [b"\n\n  \n\r\n{}\n\n"]) == [b"{}"]


def test_blank_lines_are_skipped_without_a_carriage_return_in_the_read() -> None:
    # (a read with no \r takes the one-pass path)
    framer = LineFramer()
    assert framer.feed(b"\n \t\n{}\n  \n[1]\n{") == [b"{}", b"[1]"]
    assert framer.feed(b"}\n \n") == [b"{}"]


def test_oversized_line_is_discarded_and_reading_resumes() -> None:
    framer = LineFramer(max_line_bytes=10)
    out = feed_all(framer, [b'{"ok":1}\n', b"x" * 6, b"y" * 20, b"z" * 5 + b'\n{"ok":2}\n'])
    assert out[0] == b'{"ok":1}'
    assert isinstance(out[1], OversizedLine)
    assert out[1].size == 31
    assert out[1].limit == 10
    assert out[2] == b'{"ok":2}'
    assert len(out) == 3
    assert framer.buffered == 0


def test_oversized_line_within_one_chunk() -> None:
    out = feed_all(LineFramer(max_line_bytes=4), [b"123456789\nabc\n"])
    assert isinstance(out[0], OversizedLine)
    assert out[1:] == [b"abc"]


def test_line_exactly_at_the_limit_passes_even_with_cr() -> None:
    assert feed_all(LineFramer(max_line_bytes=4), [b"abcd\r\nabcd\n"]) == [b"abcd", b"abcd"]


def test_oversized_tail_at_eof_is_reported() -> None:
    out = feed_all(LineFramer(max_line_bytes=4), [b"ok\n", b"toolongtail"])
    assert out[0] == b"ok"
    assert isinstance(out[1], OversizedLine)


def test_invalid_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineFramer(max_line_bytes=0)


lines = st.lists(
    st.binary(min_size=1, max_size=40)
    .map(lambda b: b.replace(b"\n", b"n").replace(b"\r", b"r"))
    .filter(lambda b: not b.isspace()),
    max_size=20,
)


@given(lines=lines, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30), crlf=st.booleans())
def test_any_chunking_gives_the_same_lines(lines: list[bytes], cuts: list[int], crlf: bool) -> None:
    sep = b"\r\n" if crlf else b"\n"
    stream = sep.join(lines)  # the last line has no newline: delivered at EOF
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert feed_all(LineFramer(), [c for c in chunks if c]) == lines
