"""The proxy as an editor runs it: ``acp-driver proxy ... -- AGENT`` on real pipes, messages in
and out, everything it wrote kept (to count the answers to each request)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from ..procs import descendants, pid_alive
from ..waiting import eventually

AGENT = [sys.executable, "-m", "acp_driver", "agent"]
LONG = 15.0


def proxy_argv(agent: list[str], *options: str) -> list[str]:
    return [sys.executable, "-m", "acp_driver", "proxy", *options, "--", *agent]


class Editor:
    """One proxy process, driven the way an editor drives an agent."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[tuple[float, dict[str, Any]]] = []
        self.stderr: list[str] = []
        self._next_id = 0
        self._arrived = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())
        self._err_reader = asyncio.ensure_future(self._read_stderr())
        self.tree: list[int] = []

    @classmethod
    async def start(
        cls, agent: list[str], *options: str, env: dict[str, str] | None = None, cwd: Any = None
    ) -> Editor:
        process = await asyncio.create_subprocess_exec(
            *proxy_argv(agent, *options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.received.append((time.monotonic(), json.loads(line)))
            self._arrived.set()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, method: str, params: Any) -> int:
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    async def wait_for(
        self, predicate: Any, what: str, timeout: float = LONG
    ) -> tuple[float, dict[str, Any]]:
        """The first message received that ``predicate`` accepts (with when it came)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for at, message in self.received[seen:]:
                if predicate(message):
                    return at, message
            seen = len(self.received)
            self._arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}\n{self.report()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))

    async def answer(self, request_id: int, timeout: float = LONG) -> tuple[float, dict[str, Any]]:
        return await self.wait_for(
            lambda m: "method" not in m and m.get("id") == request_id, f"answer {request_id}"
        )

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        _, message = await self.answer(self.request(method, params))
        assert "result" in message, self.report()
        return message["result"]  # type: ignore[no-any-return]

    async def open_session(self, version: int = 1, cwd: str | None = None) -> str:
        result = await self.call("initialize", {"protocolVersion": version, "clientCapabilities": {}})
        assert result["protocolVersion"] == version
        self.tree = descendants(self.process.pid)
        session = await self.call("session/new", {"cwd": cwd or os.getcwd(), "mcpServers": []})
        return session["sessionId"]  # type: ignore[no-any-return]

    def answers_to(self, request_id: int) -> list[dict[str, Any]]:
        return [m for _, m in self.received if "method" not in m and m.get("id") == request_id]

    def updates(self, sid: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for _, m in self.received
            if m.get("method") == "session/update" and m["params"].get("sessionId") == sid
        ]

    async def close(self, timeout: float = LONG) -> int:
        """Close the proxy's stdin; its exit status once it ended (its output read to the end)."""
        assert self.process.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.process.stdin.close()
        return await self.exited(timeout)

    async def exited(self, timeout: float = LONG) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await asyncio.wait_for(asyncio.gather(self._reader, self._err_reader), timeout)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)

    async def tree_gone(self) -> None:
        """Every process the proxy had below it (the supervisor, the agent, its tools) is gone."""
        await eventually(
            lambda: not any(pid_alive(pid) for pid in self.tree),
            "the agent's tree to be gone",
            details=lambda: f"alive: {[pid for pid in self.tree if pid_alive(pid)]}",
        )

    def every_request_answered_once(self, ids: range | list[int]) -> None:
        for request_id in ids:
            assert len(self.answers_to(request_id)) == 1, f"request {request_id}\n{self.report()}"

    def report(self) -> str:
        lines = [json.dumps(m)[:300] for _, m in self.received]
        return "--- to the editor ---\n" + "\n".join(lines) + "\n--- stderr ---\n" + "\n".join(self.stderr)

    async def aclose(self) -> None:
        if self.process.returncode is None:
            self.kill()
            await self.process.wait()
        for task in (self._reader, self._err_reader):
            task.cancel()
