"""The proxy as a component of a conductor's chain (``_proxy/initialize``, ``_proxy/successor``;
the RFD's ``proxy/*`` spellings too): a turn, and a cancel that lands, with ``$/cancel_request``
re-issued hop by hop and never wrapped."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from .conductor import Conductor
from .editor import AGENT

BUDGET = 2.0


def _answer(request_id: int) -> Any:
    return lambda m: "method" not in m and m.get("id") == request_id


@pytest.mark.parametrize("spelling", ["_proxy", "proxy"])
async def test_a_turn_and_a_cancel_through_the_proxy_in_a_chain(spelling: str) -> None:
    chain = await Conductor.start(
        [*AGENT, "--behavior", "ignore-cancel"], "--cancel-budget", str(BUDGET), spelling=spelling
    )
    try:
        chain.client_send(
            {"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
        )
        _, init = await chain.wait_for(_answer(1), "initialize's answer")
        assert init["result"]["agentInfo"]["name"] == "acp-driver-reference-agent", chain.report()
        chain.client_send(
            {"id": 2, "method": "session/new", "params": {"cwd": os.getcwd(), "mcpServers": []}}
        )
        _, opened = await chain.wait_for(_answer(2), "session/new's answer")
        sid = opened["result"]["sessionId"]
        chain.client_send(
            {
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]},
            }
        )
        _, turn = await chain.wait_for(_answer(3), "the first turn's answer")
        assert turn["result"]["stopReason"] == "end_turn", chain.report()
        chain.client_send(
            {
                "id": 4,
                "method": "session/prompt",
                "params": {
                    "sessionId": sid,
                    "prompt": [{"type": "text", "text": "/stream 1 0\n/sleep 30000"}],
                },
            }
        )
        await chain.wait_for(
            lambda m: m.get("params", {}).get("update", {}).get("content", {}).get("text") == "chunk 1/1\n",
            "the chunk",
        )
        cancelled_at = time.monotonic()
        chain.client_send({"method": "session/cancel", "params": {"sessionId": sid}})
        at, answer = await chain.wait_for(_answer(4), "the cancelled turn's answer")
        assert answer["result"]["stopReason"] == "cancelled", chain.report()
        assert at - cancelled_at <= BUDGET + 0.5, chain.report()
        assert chain.hop_cancels, chain.report()  # the ladder's $/cancel_request, re-issued by the conductor
        assert 4 not in chain.hop_cancels  # each hop names its own id, never the client's
        assert chain.wrapped_cancels == [], chain.report()
        proxy_code, _ = await chain.close()
        assert proxy_code == 0, chain.report()
    finally:
        await chain.aclose()


async def test_a_question_the_successor_withdraws_is_withdrawn_hop_by_hop() -> None:
    """The agent asks permission and withdraws it (``/permission 200``): the conductor's
    ``$/cancel_request`` names its ``_proxy/successor`` request, the proxy's names the request it
    put to the client; the client never answers, and the turn still ends."""
    chain = await Conductor.start(AGENT, "--answer-grace", "0.3")
    try:
        chain.client_send(
            {"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
        )
        await chain.wait_for(_answer(1), "initialize's answer")
        chain.client_send(
            {"id": 2, "method": "session/new", "params": {"cwd": os.getcwd(), "mcpServers": []}}
        )
        _, opened = await chain.wait_for(_answer(2), "session/new's answer")
        sid = opened["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "/permission 200"}]}
        chain.client_send({"id": 3, "method": "session/prompt", "params": prompt})
        _, asked = await chain.wait_for(
            lambda m: m.get("method") == "session/request_permission", "the question"
        )
        _, withdrawn = await chain.wait_for(lambda m: m.get("method") == "$/cancel_request", "its withdrawal")
        assert withdrawn["params"]["requestId"] == asked["id"], chain.report()
        _, answer = await chain.wait_for(_answer(3), "the turn's answer")
        assert answer["result"]["stopReason"] == "end_turn", chain.report()
        assert chain.wrapped_cancels == [], chain.report()
        proxy_code, _ = await chain.close()
        assert proxy_code == 0, chain.report()
    finally:
        await chain.aclose()
