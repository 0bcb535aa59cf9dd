"""The local-process peer: an agent the host started (``launch``), owned whole.

The process itself is one ``aio.AgentProcess`` (its own process group, under the supervisor
on Linux, stderr drained into a bounded tail). This module decides what its end means for the
agent handle: an exit (read what it wrote first; a group that still holds stdout is killed),
an agent that closed its stdout or stopped reading its stdin but keeps running (terminated:
it is useless), and the reason every later error names (exit status, last stderr lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ..aio import AgentProcess, ProcessGroup, StderrTail, exit_description, timeout_on
from ..core import OUTPUT_GRACE
from ._errors import AgentExitedError

if TYPE_CHECKING:
    from ._agent import AgentHandle

logger = logging.getLogger("acp_driver.driver")


class ProcessPeer:
    """One agent process (see the module docstring); implements ``driver.Peer``."""

    remote = False

    def __init__(self, child: AgentProcess) -> None:
        self.child = child
        self.process: ProcessGroup = child.process
        self.stderr: StderrTail = child.stderr
        self._agent: AgentHandle | None = None
        self._stdout_eof = asyncio.Event()
        self._gone: str | None = None
        """Why the host is ending an agent that keeps running (``closed its stdout``...)."""

    @property
    def where(self) -> str:
        return f"pid {self.process.pid}"

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def attach(self, agent: AgentHandle) -> None:
        self._agent = agent
        self.process.clock = agent.clock  # its SIGTERM -> SIGKILL graces run on the agent's clock
        agent.connection.on_peer_gone = self._on_peer_gone
        self.child.on_exit(self._on_exit)

    # ------------------------------------------------------------------ the ladder's rungs

    def close_input(self) -> None:
        if self._agent is not None:
            self._agent.connection.close_write()

    def terminate(self) -> None:
        self.process.terminate()

    def kill(self) -> None:
        self.process.kill()

    # ------------------------------------------------------------------ ending

    async def shutdown(self, grace: float, term_grace: float) -> tuple[int, str]:
        if self.process.returncode is None and grace > 0:
            with contextlib.suppress(TimeoutError):
                async with timeout_on(self.process.clock, grace):
                    await self.process.wait()
        code = await self.child.reap(term_timeout=term_grace)
        return code, f"agent {exit_description(code)}"

    async def kill_now(self) -> tuple[int, str]:
        self.child.kill()
        code = await self.child.reap(term_timeout=0)
        return code, f"agent {exit_description(code)}"

    def final_reason(self, reason: str) -> str:
        if self._gone is not None and self._gone not in reason:  # say why the host ended it
            reason = f"agent {self._gone} and kept running; {reason}"
        return f"{reason}; {self.stderr.describe()}"

    async def release(self) -> None:
        if self.process.returncode is None:
            await self.child.reap()
        else:
            self.process.kill_stragglers()
        self.child.close_stderr()

    def error(self, message: str) -> AgentExitedError:
        return AgentExitedError(message)

    # ------------------------------------------------------------------ what the process did

    def _on_peer_gone(self, how: str) -> None:
        agent = self._agent
        assert agent is not None
        if how == "eof":
            self._stdout_eof.set()
        agent.spawn(self._after_peer_gone(agent, how), f"agent {how}")

    async def _after_peer_gone(self, agent: AgentHandle, how: str) -> None:
        # Usually the agent is exiting; if it keeps running without stdin/stdout, it is useless.
        with contextlib.suppress(TimeoutError):
            async with timeout_on(self.process.clock, OUTPUT_GRACE):
                await self.process.wait()
        if self.process.returncode is None:
            what = "closed its stdout" if how == "eof" else "stopped reading its stdin"
            logger.warning("%s %s but keeps running; terminating its group", agent.name, what)
            self._gone = what
            code = await self.child.reap()
            await agent.finalize(f"agent {what} ({exit_description(code)} after SIGTERM)")
        else:
            await agent.finalize(f"agent {exit_description(self.process.returncode)}")

    def _on_exit(self, code: int) -> None:
        agent = self._agent
        assert agent is not None
        agent.spawn(self._after_exit(agent, code), "agent exit")

    async def _after_exit(self, agent: AgentHandle, code: int) -> None:
        # Read what the agent wrote before it died; a grandchild holding stdout must not stall us.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                await self._stdout_eof.wait()
        if not self._stdout_eof.is_set() and self.process.group_alive():
            logger.info("%s exited but its group holds stdout; killing the group", agent.name)
            self.child.kill()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._stdout_eof.wait()
        self.process.kill_stragglers()
        await agent.finalize(f"agent {exit_description(code)}")
