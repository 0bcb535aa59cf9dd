"""The backends with no process of ours (``proxy/_channel.py``): the conductor's successor and a
remote agent. Their channel may end before the relay starts them: the end is still reported."""

from __future__ import annotations

import pytest

from acp_driver.proxy._channel import ChannelBackend
from acp_driver.proxy._conductor import ConductorBackend
from acp_driver.proxy._network import NetworkBackend


def backends() -> list[ChannelBackend]:
    return [ConductorBackend(lambda _text: None), NetworkBackend("ws://127.0.0.1:9/")]


@pytest.mark.parametrize("backend", backends(), ids=["conductor", "network"])
async def test_an_end_before_start_is_reported_at_start_and_only_once(backend: ChannelBackend) -> None:
    gone: list[str] = []
    backend.ended()
    assert backend.exited
    backend.start(lambda _item: None, lambda: gone.append("gone"))
    backend.ended()
    assert gone == ["gone"]
    await backend.wait_exited()
    assert backend.pid is None


@pytest.mark.parametrize("backend", backends(), ids=["conductor", "network"])
async def test_an_end_after_start_is_reported_once(backend: ChannelBackend) -> None:
    gone: list[str] = []
    backend.start(lambda _item: None, lambda: gone.append("gone"))
    assert not backend.exited
    backend.ended()
    backend.ended()
    assert gone == ["gone"]
