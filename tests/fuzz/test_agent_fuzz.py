"""Fuzzing the agent runtime: hostile lines to a live agent process over real pipes.

The reference agent runs once per test; each example writes a few drawn lines (see
``strategies``) and then pings. Invariants, checked after every example:

- no crash: the agent process is alive;
- no hang: the ping is answered (an error is an answer) within the bound;
- no reply to a response: what the agent sends back that answers none of our requests is at
  most one error per line that was not response-shaped;
- bounded logging: the agent's stderr grows O(log n) with garbage (checked at the end).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_driver import Connection, RpcError
from acp_driver.aio import ProcessGroup

from ._live import LiveLoop, parse
from .corpus import CORPUS
from .strategies import EXAMPLES, bind, lines, request_ids, shape

REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]


class LiveAgent:
    def __init__(self) -> None:
        self.live = LiveLoop()
        self.incoming: list[Any] = []
        self.our_ids: set[Any] = set()
        self.their_requests: set[str] = set()
        self.sent_lines = 0
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- closed in close()
        self.conn = Connection(name="fuzz-client", tracer=self._trace)
        self.process: ProcessGroup | None = None
        self.session_id = ""
        self.live.run(self._start(), timeout=60)

    def _trace(self, direction: str, data: bytes) -> None:
        message = parse(data)
        if direction == "in":
            self.incoming.append(message)
        elif isinstance(message, dict) and "method" in message and "id" in message:
            self.our_ids.add(message["id"])

    async def _start(self) -> None:
        self.process = ProcessGroup.spawn(REFERENCE, stderr=self.stderr)
        popen = self.process.popen
        await self.conn.open_pipes(popen.stdout, popen.stdin)
        await self.conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        result = await self.conn.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        self.session_id = result["sessionId"]

    async def _ping(self) -> None:
        with pytest.raises(RpcError):  # -32601: unknown method -- an answer all the same
            await self.conn.request("_fuzz/ping", {})

    def check(self, batch: list[bytes]) -> None:
        start = len(self.incoming)
        for line in batch:
            line = bind(line, self.session_id)
            self.their_requests |= request_ids(line)
            self.conn.send_raw(line)
        self.sent_lines += len(batch)
        self.live.run(self._ping(), timeout=30)
        assert self.process is not None
        assert self.process.popen.poll() is None, "the agent died"
        # Replies that answer none of the requests we sent (valid or not): error replies to
        # garbage. (Answers to requests may come after the ping's: those are not counted.)
        unsolicited = [
            m
            for m in self.incoming[start:]
            if isinstance(m, list)
            or (
                isinstance(m, dict)
                and "method" not in m
                and m.get("id") not in self.our_ids
                and (m.get("id") is None or repr(m.get("id")) not in self.their_requests)
            )
        ]
        answerable = sum(1 for line in batch if shape(bind(line, self.session_id)) != "response")
        assert len(unsolicited) <= answerable, (batch, unsolicited)

    def stderr_lines(self) -> int:
        self.stderr.seek(0)
        return self.stderr.read().count(b"\n")

    def close(self) -> None:
        async def stop() -> None:
            await self.conn.aclose()
            if self.process is not None:
                await self.process.reap(term_timeout=2.0)

        try:
            self.live.run(stop(), timeout=30)
        finally:
            self.live.close()
            self.stderr.close()


@pytest.fixture(scope="module")
def agent() -> Iterator[LiveAgent]:
    live = LiveAgent()
    try:
        yield live
    finally:
        live.close()
    assert live.live.crashes == []


@pytest.mark.parametrize(("name", "line"), CORPUS, ids=[name for name, _ in CORPUS])
def test_corpus_line(agent: LiveAgent, name: str, line: bytes) -> None:
    agent.check([line])


def test_responses_alone_get_no_reply_at_all(agent: LiveAgent) -> None:
    # The ping-pong of two peers answering each other's error objects: never start it.
    responses = [line for _, line in CORPUS if shape(line) == "response"]
    assert len(responses) >= 5
    start = len(agent.incoming)
    agent.check(responses * 3)
    assert [
        m for m in agent.incoming[start:] if not (isinstance(m, dict) and m.get("id") in agent.our_ids)
    ] == []


def test_a_garbage_flood_gets_bounded_replies_and_bounded_logging(agent: LiveAgent) -> None:
    before = agent.stderr_lines()
    start = len(agent.incoming)
    agent.check([b"garbage %d" % i for i in range(5000)])
    replies = [m for m in agent.incoming[start:] if isinstance(m, dict) and m.get("id") is None]
    assert len(replies) <= 64  # the core's bound on error replies in a row
    assert agent.stderr_lines() - before <= 20


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
def test_fuzzed_lines_never_crash_hang_or_flood_the_agent(agent: LiveAgent, batch: list[bytes]) -> None:
    agent.check(batch)


def test_the_agents_log_grew_logarithmically(agent: LiveAgent) -> None:
    # Runs after the others (module order): every line sent so far, one log bound.
    bound = 40 + 15 * math.log10(max(agent.sent_lines, 10)) + 2 * EXAMPLES
    assert agent.stderr_lines() <= bound, agent.stderr_lines()
