"""An agent whose prompt handler misbehaves in the ways the runtime must absorb.

The prompt text picks the behaviour:
  raise      -- raises RuntimeError once cancelled (API clients throw on abort)
  end_turn   -- catches the cancellation and returns end_turn
  swallow    -- swallows the cancellation, keeps going; once the runtime has answered for it
                (the turn is fenced) tries an update and a request, and reports what happened
                in a ``_tricky/fenced`` notification (not part of the turn)
  permission -- asks permission and waits (for the cascade)
  two        -- starts two client requests from a sub-task and waits (cascade of untracked children)
  stream     -- streams updates until cancelled
  error      -- raises an RpcError without any cancel
  print      -- prints to stdout, as a careless library would (the runtime keeps it off the wire)
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp_driver import RpcError
from acp_driver.agent import Agent, Turn, TurnEndedError, run_agent

LOG: list[str] = []


class Tricky(Agent):
    name = "tricky"

    async def prompt(self, turn: Turn) -> str:
        mode = turn.text.strip()
        await turn.message(f"mode {mode}\n")
        if mode == "raise":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                raise RuntimeError("stream aborted") from None
        if mode == "end_turn":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                return "end_turn"
        if mode == "swallow":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                pass  # swallowed: keep going as if nothing happened
            for _ in range(2000):  # the runtime answers for us after its cancel_timeout
                if turn.ended:
                    break
                try:
                    await asyncio.sleep(0.005)
                except asyncio.CancelledError:
                    pass
            report = {"ended": turn.ended}
            try:
                await turn.message("after the fence\n")
                report["update"] = "sent"
            except TurnEndedError:
                report["update"] = "refused"
            try:
                await asyncio.wait_for(turn.request("_test/after_fence", {}), 5)
                report["request"] = "sent"
            except TurnEndedError:
                report["request"] = "refused"
            except Exception as exc:
                report["request"] = f"sent ({type(exc).__name__})"
            await turn.runtime.connection.notify("_tricky/fenced", report)
            return "end_turn"
        if mode == "permission":
            call = await turn.tool_call("risky", kind="edit")
            await turn.request_permission(call)
            return "end_turn"
        if mode == "two":

            async def ask(path: str) -> Any:
                return await turn.request("_test/slow", {"path": path})

            tasks = [asyncio.ensure_future(ask("a")), asyncio.ensure_future(ask("b"))]
            await asyncio.sleep(60)
            for task in tasks:
                task.cancel()
            return "end_turn"
        if mode == "stream":
            i = 0
            while True:
                i += 1
                await turn.message(f"{i}\n")
                await asyncio.sleep(0.005)
        if mode == "print":
            print("a stray line from some library")
            return "end_turn"
        if mode == "error":
            raise RpcError(-32042, "custom failure", {"why": "test"})
        return "end_turn"


if __name__ == "__main__":
    run_agent(Tricky(), cancel_timeout=0.5)
