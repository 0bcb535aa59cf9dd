"""The relay's stdout protocol against a read bigger than the client's room.

asyncio's loop reads a pipe 64 KiB at a time; uvloop in bigger pieces. Paused in the middle of
one read (the outlet full), the relay must hold the rest of that read's lines -- not push them
into an outlet that would then count them against a client that does not read -- and deliver
them in order when resumed; the agent's end waits for them. (Run on uvloop, serve's two
backpressure tests ended a client after one read instead of pausing the agent.)"""

from __future__ import annotations

from acp_driver.core import LineFramer
from acp_driver.remote._relay import _StdoutProtocol


class Outlet:
    """Takes ``room`` lines, then pauses the relay (what the served connection does)."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.got: list[bytes] = []
        self.ended = False
        self.protocol: _StdoutProtocol | None = None

    def deliver(self, item: object) -> None:
        assert isinstance(item, bytes)
        assert self.protocol is not None
        assert not self.protocol.paused, "delivered while paused"
        self.got.append(item)
        if len(self.got) % self.room == 0:
            self.protocol.paused = True  # full: the backend's pause_output

    def end(self) -> None:
        self.ended = True


def relay(room: int) -> tuple[_StdoutProtocol, Outlet]:
    outlet = Outlet(room)
    protocol = outlet.protocol = _StdoutProtocol(LineFramer(1 << 20))
    protocol.bind(outlet.deliver, outlet.end)
    return protocol, outlet


def test_a_read_past_the_pause_is_held_and_delivered_in_order_on_resume() -> None:
    protocol, outlet = relay(room=3)
    lines = [b"line %d" % i for i in range(8)]
    protocol.data_received(b"".join(line + b"\n" for line in lines))  # one big read
    assert outlet.got == lines[:3]
    protocol.resume()
    assert outlet.got == lines[:6]  # paused again by the delivery that filled the room
    protocol.data_received(b"late\n")  # a read already under way when the pause came
    protocol.resume()
    assert outlet.got == [*lines, b"late"]


def test_the_end_waits_for_the_held_lines() -> None:
    protocol, outlet = relay(room=2)
    protocol.data_received(b"a\nb\nc\nd")  # the last line without its newline
    protocol.connection_lost(None)
    assert outlet.got == [b"a", b"b"]
    assert not outlet.ended
    protocol.resume()
    assert outlet.got == [b"a", b"b", b"c", b"d"]
    assert outlet.ended
