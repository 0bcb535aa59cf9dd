"""ACP v2 on the agent side, in process (``inprocess.py``): the races that need one exact loop
iteration, and the runtime's timeouts asserted by time on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

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
        a, b, c = (served.next_id() for _ in range(3))
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


class Swallows(Agent):
    """A handler that catches its cancellation and carries on until the test lets it end."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.swallowed = asyncio.Event()
        self.finish = asyncio.Event()
        self.late: list[BaseException] = []

    async def prompt(self, turn: Turn) -> str:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed.set()  # and goes on
        await self.finish.wait()
        try:
            await turn.message("too late")
        except Exception as exc:
            self.late.append(exc)
        return "end_turn"


async def test_a_swallowed_cancel_still_ends_the_span_cancelled_at_cancel_timeout() -> None:
    """session/cancel; the handler swallows it. The span's idle ``cancelled`` comes exactly
    ``cancel_timeout`` later on the runtime's clock, not before, and nothing of the handler after."""
    agent = Swallows()
    served = InProcessAgent(agent, cancel_timeout=2.0)
    try:
        await served.start_v2()
        await served.answered(served.prompt("work"), "the prompt inserted")
        await agent.started.wait()
        cancelled_at = served.clock.now()
        served.feed(served.message("session/cancel", {"sessionId": served.session_id}))
        await agent.swallowed.wait()
        await eventually(lambda: served.clock.deadlines != [], "the runtime to wait for the turn")
        assert served.clock.deadlines == [cancelled_at + 2.0]

        served.clock.advance_to(cancelled_at + 1.999)
        await asyncio.sleep(0)
        assert served.states() == [("running", None)]  # not before cancel_timeout
        served.clock.advance_to(cancelled_at + 2.0)
        await eventually(lambda: len(served.states()) == 2, "the idle")
        assert served.states() == [("running", None), ("idle", "cancelled")]
        assert served.clock.now() == cancelled_at + 2.0

        count = len(served.sent)
        agent.finish.set()
        await eventually(lambda: agent.late != [], "the handler's late message to be refused")
        assert served.sent[count:] == []  # fenced
    finally:
        agent.finish.set()
        await served.close()


class Background(Gated):
    """``Gated``, plus session updates the test sends at will (background work)."""

    async def send_background(self, served: InProcessAgent) -> BaseException | None:
        session = served.runtime.sessions.get(served.session_id) or self.closed_session
        try:
            await session.update({"sessionUpdate": "session_info_update", "title": "late"})
        except Exception as exc:
            return exc
        return None

    closed_session: Any = None


async def test_nothing_of_a_session_is_sent_after_its_close_is_answered() -> None:
    """A span running, a prompt held, then ``session/close``: the idle ``cancelled`` and the held
    prompt's -32800 before the close's answer; after it, nothing of the session: not the agent's
    session updates (background work), not its turn, not the held prompt."""
    agent = Background()
    served = InProcessAgent(agent, cancel_timeout=2.0)
    try:
        await served.start_v2()
        sid = served.session_id
        session = served.runtime.sessions[sid]
        agent.closed_session = session
        served.prompt("A")
        await agent.began("A").wait()
        held = served.prompt("B")
        await eventually(lambda: len(session.held) == 1, "B held")
        assert await agent.send_background(served) is None  # before the close: sent

        close = served.request("session/close", {"sessionId": sid})
        assert (await served.answered(close, "the close"))["result"] == {}
        closed_at = served.sent.index(served.answer(close))
        assert served.answer(held)["error"]["code"] == CANCELLED
        assert served.states() == [("running", None), ("idle", "cancelled")]

        refused = await agent.send_background(served)
        assert refused is not None  # the agent's code is told
        agent.gate("A").set()
        agent.gate("B").set()
        await served.answered(served.request("session/list", {}), "a round trip")
        after = [m for m in served.sent[closed_at + 1 :] if m.get("params", {}).get("sessionId") == sid]
        assert after == []
    finally:
        await served.close()


async def test_a_span_ending_after_its_client_left_leaves_no_task_error() -> None:
    """The connection closes while a cancelled span waits for its handler: the idle cannot be
    sent any more, and that is no error (it used to be left in the span's task: "Task exception
    was never retrieved" on the agent's stderr)."""
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    agent = Swallows()
    served = InProcessAgent(agent, cancel_timeout=2.0)
    await served.start_v2()
    await served.answered(served.prompt("work"), "the prompt inserted")
    await agent.started.wait()
    session = served.runtime.sessions[served.session_id]
    turn = session.turn
    assert turn is not None
    assert turn.span is not None
    served.feed(served.message("session/cancel", {"sessionId": served.session_id}))
    await agent.swallowed.wait()
    await served.connection.aclose()
    served.clock.advance(2.0)
    await asyncio.wait({turn.span}, timeout=15)
    assert turn.span.done()
    assert turn.span.exception() is None
    assert session.turn is None
    agent.finish.set()
    assert errors == []
