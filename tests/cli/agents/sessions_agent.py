"""An ACP v1 agent (on the runtime) for ``--session``: ``--load`` implements ``session/load``
only (it replays one message of the session's history, then answers), without it neither load
nor resume is advertised. Each prompt answers ``SESSION_ID: TEXT``."""

from __future__ import annotations

import sys

from acp_driver.agent import Agent, Session, Turn, run_agent


class Loads(Agent):
    name = "sessions-agent"
    protocol_versions = (1,)

    async def load_session(self, session: Session) -> dict[str, object] | None:
        await session.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "replayed"}}
        )
        return None

    async def prompt(self, turn: Turn) -> str:
        await turn.message(f"{turn.session.id}: {turn.text}")
        return "end_turn"


class Neither(Agent):
    name = "sessions-agent"
    protocol_versions = (1,)

    async def prompt(self, turn: Turn) -> str:
        await turn.message(f"{turn.session.id}: {turn.text}")
        return "end_turn"


if __name__ == "__main__":
    run_agent(Loads() if "--load" in sys.argv[1:] else Neither())
