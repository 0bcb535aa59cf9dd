"""Fuzzing the host driver: a fake agent process writes drawn lines in the middle of a turn.

The agent (``tests/driver/agents/fuzz_agent.py``) runs once per test; each example is one prompt
turn during which the agent writes the example's lines, then answers ``end_turn``. Invariants,
after every example:

- no crash: nothing reached the loop's exception handler; the connection is open;
- no hang: the turn resolves (whatever the lines did to it) within the bound;
- the connection still answers: a request made afterwards gets its answer;
- no reply to a response: what the host sends that answers none of the agent's requests is at
  most one error per line that was not response-shaped;
- bounded logging: O(log n) warnings for n hostile lines (checked at the end).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_driver import RpcError
from acp_driver.driver import RemoteAgent, RemoteSession, launch

from ._live import LiveLoop, LogCount, parse
from .corpus import CORPUS
from .strategies import EXAMPLES, bind, lines, shape

AGENT = [sys.executable, str(Path(__file__).parent.parent / "driver" / "agents" / "fuzz_agent.py")]


class LiveHost:
    def __init__(self) -> None:
        self.live = LiveLoop()
        self.out: list[Any] = []
        self.their_request_ids: set[Any] = set()
        self.sent_lines = 0
        self.logs = LogCount().__enter__()
        self.agent: RemoteAgent = self.live.run(launch(AGENT, tracer=self._trace), timeout=60)
        self.session: RemoteSession = self.live.run(self.agent.new_session(os.getcwd()))

    def _trace(self, direction: str, data: bytes) -> None:
        if direction == "out":
            self.out.append(parse(data))
            return
        try:
            message = parse(data)
        except (ValueError, RecursionError):
            return  # the agent's garbage
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and "method" in item and "id" in item:
                self.their_request_ids.add(repr(item["id"]))

    async def _turn(self, data: bytes) -> None:
        result = await self.session.prompt(data.hex())
        assert result.resolution is not None
        with pytest.raises(RpcError):  # -32601 from the fake agent: an answer all the same
            await self.agent.request("_fuzz/ping", {}, timeout=30)

    def check(self, batch: list[bytes]) -> None:
        start = len(self.out)
        data = b"".join(bind(line, self.session.id) + b"\n" for line in batch)
        self.sent_lines += len(batch)
        self.live.run(self._turn(data), timeout=30)
        assert self.live.crashes == []
        assert self.agent.connection.is_open
        replies = [
            m
            for m in self.out[start:]
            if isinstance(m, list)
            or (isinstance(m, dict) and "method" not in m and repr(m.get("id")) not in self.their_request_ids)
        ]
        answerable = sum(1 for line in batch if shape(bind(line, self.session.id)) != "response")
        assert len(replies) <= answerable, (batch, replies)

    def close(self) -> None:
        try:
            self.live.run(self.agent.aclose(), timeout=30)
        finally:
            self.logs.__exit__()
            self.live.close()


@pytest.fixture(scope="module")
def host() -> Iterator[LiveHost]:
    live = LiveHost()
    try:
        yield live
    finally:
        live.close()


@pytest.mark.parametrize(("name", "line"), CORPUS, ids=[name for name, _ in CORPUS])
def test_corpus_line(host: LiveHost, name: str, line: bytes) -> None:
    host.check([line])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(batch=st.lists(lines(), min_size=1, max_size=8))
def test_fuzzed_agent_output_never_crashes_hangs_or_floods_the_host(
    host: LiveHost, batch: list[bytes]
) -> None:
    host.check(batch)


def test_the_hosts_log_grew_logarithmically(host: LiveHost) -> None:
    bound = 40 + 15 * math.log10(max(host.sent_lines, 10)) + 2 * EXAMPLES
    assert host.logs.records <= bound, host.logs.records
