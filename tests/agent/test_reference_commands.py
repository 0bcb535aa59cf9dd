"""The reference agent's command lines: split like a shell (``shlex``), whichever path splits."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from acp_driver.reference_agent import split_command

# Plain words, every quote and escape, the whitespace both splitters agree on and the ASCII and
# Unicode whitespace only ``str.split`` splits on.
CHARS = st.sampled_from(list("ab/1 -_.\t\r\n'\"\\\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2003é"))


def _split(split: object, line: str) -> list[str] | str:
    try:
        return split(line)  # type: ignore[operator,no-any-return]
    except ValueError:
        return "unbalanced"


@given(st.lists(CHARS, max_size=16).map("".join))
def test_split_command_is_shlex_split(line: str) -> None:
    assert _split(split_command, line) == _split(shlex.split, line)


def test_a_plain_command_is_split_on_whitespace_and_a_quoted_one_keeps_its_words() -> None:
    assert split_command("/sleep  60000\t") == ["/sleep", "60000"]
    assert split_command("/write a.txt 'two words'") == ["/write", "a.txt", "two words"]
