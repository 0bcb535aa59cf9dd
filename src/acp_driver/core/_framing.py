"""Newline-delimited framing: bytes in arbitrary chunks -> complete lines.

Rules:
- a message ends at ``\\n``; a trailing ``\\r`` is dropped (``\\r\\n`` tolerated);
- blank lines are skipped;
- at end of input, a last line without a newline is still a line;
- a line longer than ``max_line_bytes`` is discarded: the framer reports it once and
  resumes at the next newline, so the connection survives.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the limit was discarded; ``size`` is how many bytes were dropped."""

    size: int
    limit: int


class LineFramer:
    """Splits a byte stream into lines; see the module docstring for the rules."""

    __slots__ = ("_discarding", "_dropped", "_max", "_partial", "_partial_len")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._partial: list[bytes] = []
        self._partial_len = 0
        self._discarding = False
        self._dropped = 0

    @property
    def max_line_bytes(self) -> int:
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the end of a line."""
        return self._partial_len

    def feed(self, data: bytes) -> list[bytes | OversizedLine]:
        """Add ``data``; return the complete lines (and oversize reports), in order.

        ``b""`` means end of input: the pending partial line, if any, is returned as the last line.
        """
        if not data:
            return self._finish()
        pieces = data.split(b"\n")
        last = pieces.pop()  # the bytes after the last newline: start of the next line
        limit = self._max
        if (
            pieces
            and not self._discarding
            and self._partial_len + len(data) <= limit
            and b"\r" not in data
            and (not self._partial or b"\r" not in self._partial[-1])
        ):
            # The common case, one pass: none too long, no \r to strip. The start of the first
            # line may have come before. A blank or all-whitespace line is skipped (``isspace``
            # stops at the first other byte).
            if self._partial:
                self._partial.append(pieces[0])
                pieces[0] = b"".join(self._partial)
                self._partial.clear()
                self._partial_len = 0
            if last:
                self._keep(last)
            return [line for line in pieces if line and not line.isspace()]
        out: list[bytes | OversizedLine] = []
        for piece in pieces:
            if self._discarding:
                self._dropped += len(piece)
                out.append(OversizedLine(self._dropped, limit))
                self._discarding = False
                self._dropped = 0
                continue
            if self._partial:
                self._partial.append(piece)
                line = b"".join(self._partial)
                self._partial.clear()
                self._partial_len = 0
            else:
                line = piece
            if len(line) > limit + 1:  # +1: a trailing \r does not count
                out.append(OversizedLine(len(line), limit))
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > limit:
                out.append(OversizedLine(len(line), limit))
            elif line and not line.isspace():
                out.append(line)
        if last:
            if self._discarding:
                self._dropped += len(last)
            else:
                self._keep(last)
        return out

    def _keep(self, piece: bytes) -> None:
        """Hold ``piece``, the start of a line whose end has not come yet."""
        self._partial.append(piece)
        self._partial_len += len(piece)
        if self._partial_len > self._max + 1:
            # Too long already: stop buffering, drop until the next newline.
            self._discarding = True
            self._dropped = self._partial_len
            self._partial.clear()
            self._partial_len = 0

    def _finish(self) -> list[bytes | OversizedLine]:
        if self._discarding:
            dropped = self._dropped
            self._discarding = False
            self._dropped = 0
            return [OversizedLine(dropped, self._max)]
        if not self._partial:
            return []
        line = b"".join(self._partial)
        self._partial.clear()
        self._partial_len = 0
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self._max:
            return [OversizedLine(len(line), self._max)]
        if not line or line.isspace():
            return []
        return [line]
