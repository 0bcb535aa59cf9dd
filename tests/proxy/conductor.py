"""A test conductor, following acp-spec/rfd-proxy-chains.mdx and the Rust SDK's conductor: one
proxy component (``acp-driver proxy`` with no agent command) and a final agent, each on its own
pipes; the test is the client.

- the client's ``initialize`` reaches the proxy as ``_proxy/initialize`` (or ``proxy/initialize``);
- a ``_proxy/successor`` from the proxy is unwrapped and sent to the agent under the conductor's
  own id; the agent's answer goes back as the answer to the proxy's request;
- what the agent sends reaches the proxy wrapped in ``_proxy/successor`` (a request under the
  conductor's id; the proxy's answer goes back to the agent under the agent's id);
- cancellation is hop by hop: each hop's ``$/cancel_request`` names that hop's own id
  (``hop_cancels`` records those sent to the agent); a ``_proxy/successor`` wrapping a
  ``$/cancel_request`` is a violation (``wrapped_cancels``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from typing import Any

from .editor import proxy_argv


class Conductor:
    def __init__(
        self, proxy: asyncio.subprocess.Process, agent: asyncio.subprocess.Process, spelling: str
    ) -> None:
        self.proxy = proxy
        self.agent = agent
        self.spelling = spelling
        self.received: list[tuple[float, dict[str, Any]]] = []
        """What reached the client, with when."""
        self.hop_cancels: list[Any] = []
        self.wrapped_cancels: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._ids = itertools.count(1000)
        self._to_proxy: dict[Any, tuple[str, Any]] = {}
        """Our requests to the proxy: our id -> ("client", client id) | ("agent", agent id)."""
        self._to_agent: dict[Any, Any] = {}
        """Our requests to the agent: our id -> the proxy's outer id."""
        self._outer_to_ours: dict[Any, Any] = {}
        self._arrived = asyncio.Event()
        self._tasks = [
            asyncio.ensure_future(self._pump(proxy, self._from_proxy)),
            asyncio.ensure_future(self._pump(agent, self._from_agent)),
            asyncio.ensure_future(self._drain_stderr(proxy)),
        ]

    @classmethod
    async def start(cls, agent: list[str], *options: str, spelling: str = "_proxy") -> Conductor:
        pipes = {"stdin": asyncio.subprocess.PIPE, "stdout": asyncio.subprocess.PIPE}
        proxy = await asyncio.create_subprocess_exec(
            *proxy_argv([], *options), **pipes, stderr=asyncio.subprocess.PIPE
        )
        agent_process = await asyncio.create_subprocess_exec(*agent, **pipes)
        return cls(proxy, agent_process, spelling)

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def _write(process: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
        assert process.stdin is not None
        if not process.stdin.is_closing():
            process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def _pump(self, process: asyncio.subprocess.Process, handle: Any) -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            handle(json.loads(line))

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def _to_client(self, message: dict[str, Any]) -> None:
        self.received.append((time.monotonic(), message))
        self._arrived.set()

    # ------------------------------------------------------------------ the client's side

    def client_send(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is not None and "id" in message:
            ours = next(self._ids)
            self._to_proxy[ours] = ("client", message["id"])
            if method == "initialize":
                method = f"{self.spelling}/initialize"
            self._write(self.proxy, {**message, "id": ours, "method": method})
        elif method == "$/cancel_request":
            target = message["params"]["requestId"]
            for ours, (side, theirs) in self._to_proxy.items():
                if side == "client" and theirs == target:
                    self._write(self.proxy, {"method": method, "params": {"requestId": ours}})
        else:
            self._write(self.proxy, message)

    async def wait_for(
        self, predicate: Any, what: str, timeout: float = 15.0
    ) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            for at, message in self.received:
                if predicate(message):
                    return at, message
            self._arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}\n{self.report()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))

    def report(self) -> str:
        return "\n".join(json.dumps(m)[:300] for _, m in self.received) + "\n" + "\n".join(self.stderr)

    # ------------------------------------------------------------------ routing

    def _from_proxy(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method in ("_proxy/successor", "proxy/successor"):
            inner = message["params"]
            if inner.get("method") == "$/cancel_request":
                self.wrapped_cancels.append(message)
                return
            out: dict[str, Any] = {"method": inner["method"]}
            if "params" in inner:
                out["params"] = inner["params"]
            if "id" in message:
                ours = next(self._ids)
                self._to_agent[ours] = message["id"]
                self._outer_to_ours[message["id"]] = ours
                out["id"] = ours
            self._write(self.agent, out)
        elif method == "$/cancel_request":
            target = message["params"]["requestId"]
            ours = self._outer_to_ours.get(target)
            if ours is not None:  # the proxy withdrew its successor request: our hop re-issues
                self.hop_cancels.append(ours)
                self._write(self.agent, {"method": method, "params": {"requestId": ours}})
            else:
                self._to_client(message)
        elif method is not None:
            self._to_client(message)
        else:
            side, theirs = self._to_proxy.pop(message["id"], ("?", None))
            answer = {k: v for k, v in message.items() if k in ("result", "error")}
            if side == "client":
                self._to_client({"jsonrpc": "2.0", "id": theirs, **answer})
            elif side == "agent":
                self._write(self.agent, {"id": theirs, **answer})

    def _from_agent(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            outer = self._to_agent.pop(message["id"], None)
            self._outer_to_ours.pop(outer, None)
            answer = {k: v for k, v in message.items() if k in ("result", "error")}
            self._write(self.proxy, {"id": outer, **answer})
        elif method == "$/cancel_request":
            target = message["params"]["requestId"]
            for ours, (side, theirs) in self._to_proxy.items():
                if side == "agent" and theirs == target:
                    self._write(self.proxy, {"method": method, "params": {"requestId": ours}})
        else:
            inner: dict[str, Any] = {"method": method}
            if "params" in message:
                inner["params"] = message["params"]
            wrapped: dict[str, Any] = {"method": "_proxy/successor", "params": inner}
            if "id" in message:
                ours = next(self._ids)
                self._to_proxy[ours] = ("agent", message["id"])
                wrapped["id"] = ours
            self._write(self.proxy, wrapped)

    async def close(self) -> tuple[int, int]:
        for process in (self.proxy, self.agent):
            assert process.stdin is not None
            process.stdin.close()
        codes = await asyncio.wait_for(asyncio.gather(self.proxy.wait(), self.agent.wait()), 15)
        await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 15)
        return codes[0], codes[1]

    async def aclose(self) -> None:
        for process in (self.proxy, self.agent):
            if process.returncode is None:
                process.kill()
                await process.wait()
        for task in self._tasks:
            task.cancel()
