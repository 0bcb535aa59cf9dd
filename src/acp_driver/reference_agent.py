"""The bundled reference agent: deterministic, no model, scriptable from the prompt.

Each prompt line starting with ``/`` is a command; any other text is echoed back as chunks.

    /stream N MS        N message chunks, MS milliseconds apart (MS may be 0)
    /sleep MS           sleep MS milliseconds
    /think TEXT         a thought chunk
    /plan               a three-entry plan, then its progress
    /permission [MS]    ask session/request_permission for a pretend tool call; report the outcome
                        (MS: withdraw the question after MS milliseconds, $/cancel_request)
    /read PATH          fs/read_text_file; report the content
    /write PATH TEXT    fs/write_text_file; report success
    /terminal CMD ARGS  run a command through the client's terminal; report output and exit status
    /tool NAME [N]      a tool call with N (3) progress updates; v2: cancellable (tool_call/cancel)
    /title TEXT         a session_info_update with a title, sent just after the turn's response
    /background N MS    (v2) a tool call left running as background work: N progress updates,
                        MS apart, after the span's idle, then its completion
    /fail MESSAGE       end the turn with a JSON-RPC error
    /stop REASON        end the turn with this stop reason

In v2 (``--protocol 2``, or a client asking for 2) the runtime keeps the lifecycle: held prompts,
``user_message``, ``running``/``requires_action``, one idle per span. ``session/resume`` with
``replayFrom: {"type": "start"}`` replays the session's messages before the state snapshot.

Extension methods: ``_acp_driver/echo`` (returns its params) and ``_acp_driver/sleep``
``{"ms": N}`` (answers after N ms; cancellable with ``$/cancel_request``).

``--behavior`` makes it misbehave the way real agents do, so hosts can test against it:

    polite                       (default) follows the spec
    ignore-cancel                ignores session/cancel and $/cancel_request; finishes the turn
    end-turn-on-cancel           stops on cancel but answers stopReason end_turn
    error-on-cancel              stops on cancel but answers a JSON-RPC error
    no-answer-on-cancel-request  ignores $/cancel_request only (the request runs on)
    hang                         never answers a prompt, ignores SIGTERM (only SIGKILL ends it)
    never-idle                   (v2) stops on cancel but never sends the idle that ends the span
    idle-without-reason          (v2) every idle state_update without a stopReason

``--protocol 1`` / ``2`` restricts the versions it speaks (default: both; a client asking for
another gets the nearest, as the spec says).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

from . import __version__
from .agent import Agent, CapabilityError, Faults, Session, Turn, run_agent
from .core import RpcError

BEHAVIORS = (
    "polite",
    "ignore-cancel",
    "end-turn-on-cancel",
    "error-on-cancel",
    "no-answer-on-cancel-request",
    "hang",
    "never-idle",
    "idle-without-reason",
)


_NOT_PLAIN = frozenset("'\"\\\x0b\x0c\x1c\x1d\x1e\x1f")
"""Quotes, the escape, and the ASCII whitespace ``str.split`` splits on but ``shlex`` does not."""


def split_command(line: str) -> list[str]:
    """``shlex.split(line)``: words, with shell quoting. A line of plain ASCII words (no quote,
    no backslash) is split by ``str.split``, which gives the same words there: ``shlex`` parses a
    character at a time (~17 µs for ``/sleep 60000``, paid by every slash command)."""
    if line.isascii() and _NOT_PLAIN.isdisjoint(line):
        return line.split()
    import shlex  # quoted commands only: not at start-up

    return shlex.split(line)


class TurnFailure(RpcError):
    """``/fail``: end the turn with this JSON-RPC error."""


class ReferenceAgent(Agent):
    name = "acp-driver-reference-agent"
    title = "acp-driver reference agent"
    version = __version__
    prompt_capabilities = {"embeddedContext": True}

    def __init__(self, behavior: str = "polite") -> None:
        if behavior not in BEHAVIORS:
            raise ValueError(f"unknown behavior {behavior!r}; choose from {', '.join(BEHAVIORS)}")
        self.behavior = behavior

    async def new_session(self, session: Session) -> dict[str, Any] | None:
        session.state["turns"] = 0
        session.state["history"] = []
        if session.runtime.profile.modes_are_options:
            return None  # no session modes in this version (v2: a "mode" config option)
        return {
            "modes": {
                "currentModeId": "default",
                "availableModes": [
                    {"id": "default", "name": "Default"},
                    {"id": "plan", "name": "Plan", "description": "Plans before acting"},
                ],
            }
        }

    async def set_mode(self, session: Session, mode_id: str) -> dict[str, Any] | None:
        if mode_id not in ("default", "plan"):
            raise RpcError.invalid_params(f"unknown mode {mode_id!r}")
        await session.update({"sessionUpdate": "current_mode_update", "currentModeId": mode_id})
        return None

    async def close_session(self, session: Session) -> None:
        return None

    async def resume_session(self, session: Session) -> dict[str, Any] | None:
        """Replays the session's messages when asked to (v2 ``replayFrom: start``); a session
        of another connection starts empty (nothing is kept on disk)."""
        history = session.state.setdefault("history", [])
        replay = session.params.get("replayFrom")
        if isinstance(replay, dict) and replay.get("type") == "start":
            for update in list(history):
                await session.update(update)
        return None

    def extensions(self) -> dict[str, Any]:
        return {"_acp_driver/echo": _echo, "_acp_driver/sleep": _sleep}

    async def prompt(self, turn: Turn) -> str | dict[str, Any] | None:
        if self.behavior == "hang":
            # A wedged agent: the whole process stops responding (only SIGKILL ends it).
            while True:
                time.sleep(3600)  # noqa: ASYNC251 - blocking the loop is the point
        turn.session.state["turns"] = turn.session.state.get("turns", 0) + 1
        history = turn.session.state.setdefault("history", [])
        if turn.user_message_id is not None:
            history.append(
                {"sessionUpdate": "user_message", "messageId": turn.user_message_id, "content": turn.prompt}
            )
        stop: str | None = None
        for line in turn.text.splitlines() or [""]:
            stripped = line.strip()
            if stripped.startswith("/"):
                stop = await self._command(turn, stripped)
                if stop is not None:
                    break
            elif stripped:
                await self._echo(turn, line)
        return stop or "end_turn"

    async def _echo(self, turn: Turn, line: str) -> None:
        words = line.split(" ")
        for i, word in enumerate(words):
            await turn.message(word + (" " if i < len(words) - 1 else "\n"))

    async def _command(self, turn: Turn, line: str) -> str | None:
        try:
            argv = split_command(line)
        except ValueError as exc:
            await turn.message(f"error: cannot parse command: {exc}\n")
            return None
        name, args = argv[0][1:], argv[1:]
        handler = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if handler is None:
            await turn.message(f"error: unknown command /{name}\n")
            return None
        try:
            result: str | None = await handler(turn, args)
            return result
        except (ValueError, IndexError) as exc:
            await turn.message(f"error: /{name}: {exc}\n")
        except CapabilityError as exc:
            await turn.message(f"error: /{name}: {exc.message}\n")
        except RpcError as exc:
            if exc.code == -32800 or isinstance(exc, TurnFailure):
                raise  # a cancelled request (the turn is being cancelled), or /fail
            await turn.message(f"error: /{name}: {exc.message} (code {exc.code})\n")
        return None

    # ------------------------------------------------------------------ commands

    async def cmd_stream(self, turn: Turn, args: list[str]) -> None:
        count = int(args[0]) if args else 10
        delay = int(args[1]) / 1000 if len(args) > 1 else 0.0
        for i in range(count):
            await turn.message(f"chunk {i + 1}/{count}\n")
            if delay:
                await asyncio.sleep(delay)

    async def cmd_sleep(self, turn: Turn, args: list[str]) -> None:
        await asyncio.sleep(int(args[0]) / 1000)

    async def cmd_think(self, turn: Turn, args: list[str]) -> None:
        await turn.thought(" ".join(args) or "thinking")

    async def cmd_plan(self, turn: Turn, args: list[str]) -> None:
        steps = ["Read the code", "Make the change", "Run the tests"]
        entries = [{"content": s, "priority": "medium", "status": "pending"} for s in steps]
        await turn.plan(entries)
        for entry in entries:
            entry["status"] = "completed"
            await turn.plan(entries)

    async def cmd_permission(self, turn: Turn, args: list[str]) -> None:
        call = await turn.tool_call("Edit a pretend file", kind="edit")
        if args:  # /permission MS: the agent gives up on the question after MS ($/cancel_request)
            try:
                outcome = await asyncio.wait_for(turn.request_permission(call), int(args[0]) / 1000)
            except TimeoutError:
                await call.fail("no answer in time")
                await turn.message("permission outcome: withdrawn by the agent\n")
                return
        else:
            outcome = await turn.request_permission(call)
        if outcome.get("outcome") == "selected" and str(outcome.get("optionId", "")).startswith("allow"):
            await call.complete("allowed")
        else:
            await call.fail("not allowed")
        await turn.message(f"permission outcome: {_describe(outcome)}\n")

    async def cmd_read(self, turn: Turn, args: list[str]) -> None:
        content = await turn.read_text_file(args[0])
        await turn.message(content if content.endswith("\n") else content + "\n")

    async def cmd_write(self, turn: Turn, args: list[str]) -> None:
        await turn.write_text_file(args[0], " ".join(args[1:]))
        await turn.message(f"wrote {args[0]}\n")

    async def cmd_terminal(self, turn: Turn, args: list[str]) -> None:
        if not args:
            raise ValueError("usage: /terminal CMD [ARGS...]")
        call = await turn.tool_call(" ".join(args), kind="execute", status="in_progress")
        terminal = await turn.create_terminal(args[0], args[1:], cwd=turn.session.cwd)
        try:
            await call.update(content=[{"type": "terminal", "terminalId": terminal.id}])
            status = await terminal.wait_for_exit()
            output = await terminal.output()
        finally:
            if not turn.ended:
                try:
                    await terminal.release()
                except (RpcError, asyncio.CancelledError):
                    pass
        text = output.get("output", "")
        await call.complete()
        await turn.message(text if text.endswith("\n") or not text else text + "\n")
        await turn.message(f"exit status: {_exit_status(status)}\n")

    async def cmd_tool(self, turn: Turn, args: list[str]) -> None:
        name = args[0] if args else "tool"
        steps = int(args[1]) if len(args) > 1 else 3
        call = await turn.tool_call(name, kind="other", cancellable=True)
        await call.update("in_progress")
        for step in range(1, steps + 1):
            stop = asyncio.ensure_future(call.cancel_requested.wait())
            try:
                await asyncio.wait({stop}, timeout=0.01)
            finally:
                stop.cancel()
            if call.cancel_requested.is_set():  # v2 tool_call/cancel: stop, confirm, go on
                await call.update("cancelled")
                await turn.message(f"{name} cancelled at step {step}\n")
                return
            await call.update(
                content=[{"type": "content", "content": {"type": "text", "text": f"step {step}/{steps}"}}]
            )
        await call.complete(f"{name} done")

    async def cmd_title(self, turn: Turn, args: list[str]) -> None:
        session = turn.session
        title = " ".join(args) or "untitled"

        def send_title() -> None:
            coro = session.update({"sessionUpdate": "session_info_update", "title": title})
            task = asyncio.get_running_loop().create_task(coro)
            _background.add(task)
            task.add_done_callback(_background.discard)

        turn.after_end(send_title)  # like real agents: a title right after the response

    async def cmd_fail(self, turn: Turn, args: list[str]) -> None:
        raise TurnFailure(-32603, " ".join(args) or "failed on request")

    async def cmd_stop(self, turn: Turn, args: list[str]) -> str:
        return args[0] if args else "end_turn"

    async def cmd_background(self, turn: Turn, args: list[str]) -> None:
        count = int(args[0]) if args else 3
        delay = int(args[1]) / 1000 if len(args) > 1 else 0.05
        call = await turn.tool_call("a background job", kind="other", status="in_progress")
        session = turn.session
        item = {"type": "tool_call", "toolCallId": call.id}
        session.background.append(item)

        async def run() -> None:
            try:
                for i in range(count):
                    await asyncio.sleep(delay)
                    await session.update(
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": call.id,
                            "content": [
                                {
                                    "type": "content",
                                    "content": {"type": "text", "text": f"step {i + 1}/{count}"},
                                }
                            ],
                        }
                    )
                await session.update(
                    {"sessionUpdate": "tool_call_update", "toolCallId": call.id, "status": "completed"}
                )
            finally:
                if item in session.background:
                    session.background.remove(item)

        turn.after_end(lambda: _keep(asyncio.get_running_loop().create_task(run())))
        await turn.message(f"started {call.id} in the background\n")


_background: set[asyncio.Task[None]] = set()


def _keep(task: asyncio.Task[None]) -> None:
    _background.add(task)
    task.add_done_callback(_background.discard)


def _echo(params: Any) -> Any:
    """``_acp_driver/echo``: returns its params (for benchmarks and tests; answered inline)."""
    return params


async def _sleep(params: Any) -> Any:
    """``_acp_driver/sleep`` ``{"ms": N}``: answers after N ms (cancellable with ``$/cancel_request``)."""
    ms: Any = (params or {}).get("ms", 0) if isinstance(params, dict | None) else None
    if type(ms) not in (int, float) or not 0 <= ms < 86_400_000:  # bool and NaN are not ms
        raise RpcError.invalid_params('"ms" must be a number of milliseconds (0 to one day)', {"ms": ms})
    await asyncio.sleep(ms / 1000)
    return {"slept": ms}


def _describe(outcome: dict[str, Any]) -> str:
    if outcome.get("outcome") == "selected":
        return f"selected {outcome.get('optionId')}"
    return str(outcome.get("outcome"))


def _exit_status(status: dict[str, Any]) -> str:
    if status.get("signal"):
        return f"signal {status['signal']}"
    return str(status.get("exitCode"))


def faults_for(behavior: str) -> tuple[Faults, bool]:
    """The runtime faults and whether ``$/cancel_request`` is honoured, for a behavior."""
    if behavior == "ignore-cancel":
        return Faults(ignore_session_cancel=True), False
    if behavior == "end-turn-on-cancel":
        return Faults(stop_reason_on_cancel="end_turn"), True
    if behavior == "error-on-cancel":
        return Faults(error_on_cancel=True), True
    if behavior == "no-answer-on-cancel-request":
        return Faults(), False
    if behavior == "hang":
        return Faults(ignore_session_cancel=True), False
    if behavior == "never-idle":
        return Faults(never_idle_on_cancel=True), True
    if behavior == "idle-without-reason":
        return Faults(idle_without_stop_reason=True), True
    return Faults(), True


def main(
    behavior: str = "polite",
    versions: tuple[int, ...] = (1, 2),
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> None:
    """Run the reference agent on stdio, speaking ``versions`` (on the loop ``loop_factory``
    makes, see ``run_agent``)."""
    agent = ReferenceAgent(behavior)
    agent.protocol_versions = versions
    if behavior == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    faults, honour = faults_for(behavior)
    run_agent(agent, faults=faults, honour_cancel_request=honour, loop_factory=loop_factory)


if __name__ == "__main__":
    main()
