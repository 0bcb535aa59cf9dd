"""Valid JSON that strict parsers refuse: lone-surrogate escapes (``"\\ud800"``), which
JavaScript's ``JSON.stringify`` emits. The reference agent, over real pipes, reads them, never
answers -32603 for them, and never sends a lone surrogate back (U+FFFD in its place)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import orjson

REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]
TIMEOUT = 30.0


class RawPipe:
    """The reference agent on real pipes, spoken to in raw lines (so a test can send any text)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *argv: str) -> RawPipe:
        process = await asyncio.create_subprocess_exec(
            *REFERENCE,
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def send(self, raw: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw.encode("ascii") + b"\n")
        await self.process.stdin.drain()

    async def next(self, strict: bool = True) -> tuple[bytes, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT)
        assert line, "the agent closed its output"
        if strict:
            orjson.loads(line)  # nothing of the agent's own may need the lenient parser
        return line, json.loads(line)

    async def answer_to(self, rid: int) -> tuple[Any, list[Any]]:
        before = []
        while True:
            _, message = await self.next()
            if message.get("id") == rid and "method" not in message:
                return message, before
            before.append(message)

    async def close(self) -> bytes:
        assert self.process.stdin is not None
        assert self.process.stderr is not None
        self.process.stdin.close()
        err = await asyncio.wait_for(self.process.stderr.read(), TIMEOUT)
        await asyncio.wait_for(self.process.wait(), TIMEOUT)
        return err


async def test_a_lone_surrogate_in_a_prompt_is_read_and_echoed_as_u_fffd() -> None:
    agent = await RawPipe.start()
    try:
        await agent.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
        await agent.answer_to(1)
        await agent.send(
            '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}'
        )
        session = (await agent.answer_to(2))[0]["result"]["sessionId"]
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "PLACEHOLDER"}]}
        raw = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})
        await agent.send(raw.replace("PLACEHOLDER", "a\\ud800b \\udfff"))
        answer, updates = await agent.answer_to(3)
        assert answer["result"] == {"stopReason": "end_turn"}
        echoed = "".join(u["params"]["update"]["content"]["text"] for u in updates)
        assert echoed == "a\ufffdb \ufffd\n"
        # An extension request whose params carry one is echoed the same way, and its id too.
        await agent.send(
            '{"jsonrpc":"2.0","id":"k\\ud83d","method":"_acp_driver/echo","params":{"t":"\\udc00"}}'
        )
        line, echo = await agent.next(strict=False)
        assert echo["result"] == {"t": "\ufffd"}
        assert echo["id"] == "k\ud83d"  # the peer's own id, echoed exactly as it came
        assert b'"k\\ud83d"' in line
    finally:
        err = await agent.close()
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert agent.process.returncode == 0


async def test_sleep_with_a_bad_ms_is_invalid_params() -> None:
    agent = await RawPipe.start()
    try:
        await agent.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
        await agent.answer_to(1)
        for rid, params in enumerate(('{"ms":"soon"}', '{"ms":true}', '{"ms":-1}', "[1]", '{"ms":1e300}'), 2):
            await agent.send(f'{{"jsonrpc":"2.0","id":{rid},"method":"_acp_driver/sleep","params":{params}}}')
            answer, _ = await agent.answer_to(rid)
            assert answer["error"]["code"] == -32602, params
        await agent.send('{"jsonrpc":"2.0","id":9,"method":"_acp_driver/sleep","params":{"ms":1}}')
        assert (await agent.answer_to(9))[0]["result"] == {"slept": 1}
    finally:
        err = await agent.close()
    assert b"Traceback" not in err, err.decode(errors="replace")
