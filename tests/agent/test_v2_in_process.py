"""ACP v2 on the agent side, in process (``inprocess.py``): the races that need one exact loop
iteration, and the runtime's timeouts asserted by time on a fake clock."""

from __future__ import annotations

import asyncio

from acp_driver.agent import Agent, Turn

from ..waiting import eventually
from .inprocess import InProcessAgent

CANCELLED = -32800


class Gated(Agent):
    """Each prompt's turn runs until the test opens its gate (by the prompt's text)."""

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.turns: dict[str, Turn] = {}
        self.started: dict[str, asyncio.Event] = {}

    def gate(self, text: str) -> asyncio.Event:
        return self.gates.setdefault(text, asyncio.Event())

    def began(self, text: str) -> asyncio.Event:
        return self.started.setdefault(text, asyncio.Event())

    async def prompt(self, turn: Turn) -> str:
        self.turns[turn.text] = turn
        self.began(turn.text).set()
        await self.gate(turn.text).wait()
        await turn.message(f"{turn.text} done")
        return "end_turn"


async def test_a_withdrawal_read_as_its_prompt_is_released_does_not_strand_the_next() -> None:
    """A runs, B and C are held. A's turn ends; the span releases B's gate; in that same loop
    iteration, before B's task runs again, the client's ``$/cancel_request`` for B is read (it is
    queued from a done-callback of A's handler task, so it lands exactly there). B is answered
    -32800 -- and C must still be inserted and answered (it used to be never released: the
    session accepted nothing more)."""
    agent = Gated()
    served = InProcessAgent(agent)
    try:
        await served.start_v2()
        a, b, c = 3, 4, 5
        served.feed(served.prompt_message("A", a))
        await served.answered(a, "A inserted")
        await agent.began("A").wait()
        served.feed(served.prompt_message("B", b), served.prompt_message("C", c))
        session = served.runtime.sessions[served.session_id]
        await eventually(lambda: len(session.held) == 2, "B and C held")
        assert served.answer(b) is None
        assert served.answer(c) is None

        task = agent.turns["A"].task
        assert task is not None
        loop = asyncio.get_running_loop()
        window: list[tuple[int, bool]] = []

        def withdraw_b() -> None:
            window.append((len(session.held), session.turn is None))  # B released, not yet running
            served.feed(served.withdrawal(b))

        task.add_done_callback(lambda _: loop.call_soon(withdraw_b))
        agent.gate("A").set()

        assert (await served.answered(b, "B withdrawn"))["error"]["code"] == CANCELLED
        assert window == [(1, True)]  # the race was hit: only C held, no turn running
        c_answer = await served.answered(c, "C inserted after B's withdrawal")
        assert "messageId" in c_answer["result"]
        await agent.began("C").wait()
        agent.gate("C").set()
        await eventually(lambda: len(served.states()) >= 4, "C's idle")
        assert served.states() == [("running", None), ("idle", "end_turn")] * 2  # A's span, C's
        assert [u["content"]["text"] for u in served.updates("agent_message_chunk")] == ["A done", "C done"]
    finally:
        await served.close()
