"""``acp-driver check``: audit any agent's cancellation, one rule per check, with evidence.

The audit drives the agent at the wire level (not through the polite driver) so that it can
hold a permission request open, send a malformed line, or watch for replies to notifications.
Each check gets a fresh agent process; every process group is reaped, whatever the agent does
(Ctrl-C included). Verdicts are honest about what was tested:

- a cancel goes out only once the turn is busy: after its first *turn* activity (message or
  thought chunk, tool call, plan, usage), never on a session-level update such as
  ``available_commands_update``; ``--busy-after SEC`` cancels a silent agent after SEC;
- a check whose turn ended before the cancel could be sent is skipped; a skipped MUST rule makes
  the whole audit inconclusive (its own exit code), never green;
- an agent that cannot start or initialize is reported once, fast, not as failed rules;
- a remote agent (``check -- ws://host:port/acp``; ``--header`` for credentials) gets a fresh
  connection per check instead of a process; the rules about the agent's process (what it does
  at the end of its stdin) are reported ``n/a``, "not applicable over a network" -- neither
  passed nor failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import __version__
from .. import protocol as p
from ..aio import AgentProcess, Connection, ProcessGroup, StderrTail, current_request, exit_description
from ..core import ConnectionClosedError, ErrorCode, RequestCancelledError, RpcError
from ..trace import bind, follow_connection, wire_tracer
from . import _main as codes

PASS, FAIL, SKIP, NA = "pass", "fail", "skip", "n/a"
NOT_OVER_A_NETWORK = "not applicable over a network: the agent's process is the server's to run"
MUST, SHOULD, MAY, INFO = "MUST", "SHOULD", "MAY", "INFO"

TURN_ACTIVITY = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "usage_update"}
)
"""``session/update`` kinds that show a turn at work. Session-level updates (available
commands, mode, config options, session info) do not: agents send them before any model call."""

BUSY_HINT = "pass a --busy-prompt that keeps the agent busy longer"

RACE_BOUND = 1.0
"""A turn that stops this soon after a cancel, with no activity in between, may have been ending
anyway. A control turn (the same prompt, uncancelled) decides: if it ends as soon, the cancel was
a race (skipped); if it runs on, the stop was the agent's answer to the cancel (judged)."""

# Every agent process the audit started, so that an interrupted audit can still kill them all.
_SPAWNED: list[ProcessGroup] = []


class SetupError(Exception):
    """The agent could not be started or brought to a ready session."""


class AgentGone(Exception):
    """The agent's process exited (or closed its output) while the audit waited for it."""


@dataclass
class CheckResult:
    rule: str
    level: str
    result: str
    evidence: str
    elapsed: float = 0.0
    trace_event: int | None = None
    """With ``--trace``: the id of this verdict's event in the trace (its moments are linked there)."""


@dataclass
class Probe:
    """One agent process under audit."""

    argv: list[str]
    cwd: str
    """Where the agent process starts (the sessions' directory too)."""
    session_cwd: str
    """Every session's working directory (a throw-away directory unless ``--cwd``)."""
    timeout: float
    auth: str | None = None
    """``--auth``: the ``authenticate`` method id sent after ``initialize``."""
    mode: str | None = None
    url: str | None = None
    """A remote agent's URL (``argv`` is then ``[url]``): a connection per probe, no process here."""
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    """``--cacert``: trust for a ``wss://``/``https://`` agent."""
    transport: Any = None
    process: ProcessGroup | None = None
    child: AgentProcess | None = None
    conn: Connection | None = None
    stderr: StderrTail = field(default_factory=lambda: StderrTail("audit"))
    incoming: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    activity: asyncio.Event = field(default_factory=asyncio.Event)
    peer_gone: asyncio.Event = field(default_factory=asyncio.Event)
    permission_handler: Callable[[Any], Awaitable[Any]] | None = None
    session_id: str | None = None
    agent_info: dict[str, Any] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    trace: Any = None
    """With ``--trace``: this probe's ``TraceSink`` (bound to its check's name)."""

    async def start(self) -> None:
        conn = self.conn = Connection(
            name="audit", tracer=wire_tracer(self._trace, self.trace), close_timeout=0.3
        )
        if self.trace is not None:
            follow_connection(conn, self.trace, owned=False)
        conn.on_peer_gone = lambda how: self.peer_gone.set()
        conn.on_request(p.SESSION_REQUEST_PERMISSION, self._permission)
        if self.url is not None:
            from ..net import open_transport

            self.transport = await open_transport(
                self.url, conn, headers=self.headers, open_timeout=self.timeout, ssl_context=self.ssl_context
            )
            return
        self.child = await AgentProcess.spawn(
            self.argv, conn, cwd=self.cwd, stderr=self.stderr, trace=self.trace
        )
        self.process = self.child.process
        _SPAWNED.append(self.process)

    def _trace(self, direction: str, line: bytes) -> None:
        if direction != "in":
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if isinstance(message, dict):
            self.incoming.append((time.monotonic(), message))
            if _update_kind(message) in TURN_ACTIVITY:
                self.activity.set()

    async def _permission(self, params: Any) -> Any:
        if self.permission_handler is not None:
            return await self.permission_handler(params)
        return {"outcome": {"outcome": "cancelled"}}

    def gone_reason(self) -> str:
        if self.transport is not None:
            return f"the connection to {self.url} ended: {self.transport.end_reason or 'closed'}"
        status = "running"
        if self.process is not None and self.process.returncode is not None:
            status = exit_description(self.process.returncode)
        return f"the agent closed its output ({status}; {self.stderr.describe(3)})"

    async def gone_reason_after_exit(self) -> str:
        """``gone_reason`` once the process had a moment to exit (its output closes first)."""
        if self.process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await self.process.wait()
        return self.gone_reason()

    async def until_gone(self, awaitable: Awaitable[Any]) -> Any:
        """Await ``awaitable``, or raise ``AgentGone`` as soon as the agent's process is gone."""
        work = asyncio.ensure_future(awaitable)
        gone = asyncio.ensure_future(self.peer_gone.wait())
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        if not work.done() or work.cancelled():
            raise AgentGone(await self.gone_reason_after_exit())
        if isinstance(work.exception(), ConnectionClosedError) and self.peer_gone.is_set():
            # The agent went away before the request could even be written: say how it went.
            raise AgentGone(await self.gone_reason_after_exit()) from work.exception()
        return work.result()

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        assert self.conn is not None
        limit = self.timeout if timeout is None else timeout
        return await self.until_gone(self.conn.request(method, params, timeout=limit))

    async def _step(self, what: str, method: str, params: Any) -> Any:
        try:
            return await self.request(method, params)
        except (RpcError, TimeoutError, AgentGone) as exc:
            raise SetupError(f"{what}: {exc or type(exc).__name__}") from exc

    async def ready(self) -> str:
        """Start the agent, initialize, authenticate (``--auth``), open a session, set its mode."""
        try:
            await self.start()
        except (OSError, TimeoutError) as exc:
            if self.url is not None:
                raise SetupError(f"cannot connect to {self.url}: {exc}") from exc
            raise SetupError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from exc
        result = await self._step(
            "initialize",
            p.INITIALIZE,
            {
                "protocolVersion": p.PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
                "clientInfo": {"name": "acp-driver-check", "version": __version__},
            },
        )
        if isinstance(result, dict) and isinstance(result.get("agentInfo"), dict):
            self.agent_info = result["agentInfo"]
        if self.auth is not None:
            await self._step(f"authenticate {self.auth!r}", p.AUTHENTICATE, {"methodId": self.auth})
        result = await self._step("session/new", p.SESSION_NEW, {"cwd": self.session_cwd, "mcpServers": []})
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise SetupError(f"session/new: invalid response {_short(result)}")
        self.session_id = sid
        if self.mode is not None:
            await self._step(
                f"session/set_mode {self.mode!r}", p.SESSION_SET_MODE, {"sessionId": sid, "modeId": self.mode}
            )
        return sid

    def notify(self, method: str, params: Any) -> None:
        assert self.conn is not None
        self.conn.notify_nowait(method, params)

    def updates_after(self, since: float, session_id: str) -> list[dict[str, Any]]:
        """Turn-scoped session/update messages of ``session_id`` received after ``since``."""
        late = []
        for at, message in self.incoming:
            if at <= since or message.get("method") != p.SESSION_UPDATE:
                continue
            params = message.get("params")
            if not isinstance(params, dict) or params.get("sessionId") != session_id:
                continue
            if _update_kind(message) not in p.SESSION_WIDE_UPDATES:
                late.append(message)
        return late

    def first_activity(self, after: float) -> tuple[float, str] | None:
        """When the first turn activity after ``after`` arrived, and its kind."""
        for at, message in self.incoming:
            kind = _update_kind(message)
            if at > after and kind in TURN_ACTIVITY:
                return at, str(kind)
        return None

    def replies_since(self, since: float, expected: set[Any]) -> list[dict[str, Any]]:
        """Response-shaped messages (with or without an id) after ``since``, but for ``expected`` ids."""
        return [
            message
            for at, message in self.incoming
            if at > since
            and "method" not in message
            and ("result" in message or "error" in message or "id" in message)
            and not ("id" in message and message["id"] in expected)
        ]

    async def close(self) -> str:
        """Reap the agent's whole group; returns how it ended."""
        conn = self.conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await conn.aclose("audit done")
        for task in self.tasks:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self.transport is not None:
            with contextlib.suppress(Exception):
                await self.transport.aclose(0.5)
            return "connection closed"
        if self.child is None:
            return "not started"
        code = await self.child.reap(term_timeout=0.5)
        self.child.close_stderr()
        return exit_description(code)


def _update_kind(message: dict[str, Any]) -> Any:
    if message.get("method") != p.SESSION_UPDATE:
        return None
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return update.get("sessionUpdate") if isinstance(update, dict) else None


async def _start_prompt(probe: Probe, text: str) -> tuple[asyncio.Task[Any], list[Any], float]:
    ids: list[Any] = []
    assert probe.conn is not None
    probe.activity.clear()
    started = time.monotonic()
    task = asyncio.get_running_loop().create_task(
        probe.conn.request(
            p.SESSION_PROMPT,
            {"sessionId": probe.session_id, "prompt": [{"type": "text", "text": text}]},
            on_sent=ids.append,
        )
    )
    probe.tasks.append(task)
    await asyncio.sleep(0)
    return task, ids, started


@dataclass
class Busy:
    """When the cancel went out, relative to the turn."""

    sent: float
    started: float
    first: tuple[float, str] | None
    reason: str

    def describe(self) -> str:
        into = _ms(self.sent - self.started)
        if self.first is not None:
            at, kind = self.first
            return (
                f"cancel sent {_ms(self.sent - at)} after the first turn activity ({kind}, "
                f"{_ms(at - self.started)} into the turn)"
            )
        if self.reason == "busy-after":
            return f"cancel sent {into} into the turn (--busy-after), before any turn activity"
        return (
            f"cancel sent {into} into the turn with no turn activity yet (a silent agent: see --busy-after)"
        )


async def _wait_busy(
    opts: argparse.Namespace, probe: Probe, task: asyncio.Task[Any], started: float
) -> Busy | str:
    """Wait until the turn is busy: its first turn activity, or ``--busy-after``, or ``--timeout``.

    Returns when to cancel, or (a string) why the turn ended first.
    """
    bound = opts.timeout if opts.busy_after is None else min(opts.busy_after, opts.timeout)
    remaining = started + bound - time.monotonic()
    busy = asyncio.ensure_future(probe.activity.wait())
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        await asyncio.wait({busy, gone, task}, timeout=max(remaining, 0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        busy.cancel()
        gone.cancel()
    if task.done():
        kind, value = await _outcome(probe, task, 0)
        return f"the turn ended ({_describe(kind, value)}) {_ms(time.monotonic() - started)} after the prompt, before the cancel could be sent; {BUSY_HINT}"
    if probe.peer_gone.is_set():
        raise AgentGone(await probe.gone_reason_after_exit())
    first = probe.first_activity(started)
    reason = "activity" if first is not None else ("busy-after" if opts.busy_after is not None else "bound")
    return Busy(time.monotonic(), started, first, reason)


async def _outcome(probe: Probe, task: asyncio.Task[Any], timeout: float) -> tuple[str, Any]:
    """("result", value) / ("error", RpcError) / ("timeout", None) / ("gone", reason)."""
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        if not task.done():
            await asyncio.wait({task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not task.done():
        if probe.peer_gone.is_set():
            # The answer may still be in the pipe: give the reader a moment to deliver it.
            await asyncio.wait({task}, timeout=0.2)
            if not task.done():
                return "gone", await probe.gone_reason_after_exit()
        else:
            return "timeout", None
    exc = task.exception()
    if exc is None:
        return "result", task.result()
    if isinstance(exc, RpcError):
        return "error", exc
    return "error", RpcError(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


def _describe(kind: str, value: Any) -> str:
    if kind == "result":
        stop = value.get("stopReason") if isinstance(value, dict) else None
        return f"stopReason {stop!r}"
    if kind == "error":
        assert isinstance(value, RpcError)
        return f"error {value.code} {value.message!r}"
    if kind == "gone":
        return str(value)
    return "no answer"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# ---------------------------------------------------------------------- checks

CANCEL_RULE = "session/cancel answered stopReason cancelled"
AFTER_RULE = "no turn update after the prompt response"
CANCEL_REQUEST_RULE = "$/cancel_request ends the in-flight prompt promptly"
NOTIFICATION_RULE = "no reply to any notification"
IDLE_RULE = "cancel on an idle session does not poison the next turn"
PERMISSION_RULE = "cancel while a permission request is pending ends the prompt cancelled"
WITHDRAW_RULE = "agent withdraws its pending permission request on cancel ($/cancel_request)"
MALFORMED_RULE = "a malformed line does not kill the agent"
EOF_RULE = "exits after stdin EOF"


async def check_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """session/cancel mid-turn -> stopReason cancelled; then no update of the turn after the response."""
    sid = await probe.ready()
    task, _ids, started = await _start_prompt(probe, opts.busy_prompt)
    busy = await _wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(CANCEL_RULE, MUST, SKIP, busy), CheckResult(AFTER_RULE, MUST, SKIP, busy)]
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    when = busy.describe()
    kind, value = await _outcome(probe, task, opts.timeout)
    answered = time.monotonic()
    elapsed = answered - busy.sent
    if kind in ("timeout", "gone"):
        what = f"no answer within {opts.timeout:g} s" if kind == "timeout" else str(value)
        return [
            CheckResult(CANCEL_RULE, MUST, FAIL, f"{what} ({when})", elapsed),
            CheckResult(AFTER_RULE, MUST, SKIP, "the prompt was never answered"),
        ]
    if kind == "error":
        assert isinstance(value, RpcError)
        evidence = f"answered a JSON-RPC error {value.code} {value.message!r} instead of stopReason cancelled"
        first = CheckResult(CANCEL_RULE, MUST, FAIL, f"{evidence}, {_ms(elapsed)} later ({when})", elapsed)
    else:
        stop = value.get("stopReason") if isinstance(value, dict) else None
        verdict = PASS if stop == "cancelled" else FAIL
        evidence = f"answered stopReason {stop!r} {_ms(elapsed)} after session/cancel ({when})"
        first = CheckResult(CANCEL_RULE, MUST, verdict, evidence, elapsed)
    await asyncio.sleep(min(1.0, opts.timeout))  # watch for stragglers
    late = probe.updates_after(answered, sid)
    if late:
        kinds = sorted({str(_update_kind(m)) for m in late})
        second = CheckResult(
            AFTER_RULE, MUST, FAIL, f"{len(late)} update(s) after the response: {', '.join(kinds)}"
        )
    else:
        second = CheckResult(AFTER_RULE, MUST, PASS, "none in the second after the response")
    if first.result == FAIL and kind == "result" and _maybe_race(probe, busy, elapsed):
        # A natural stop right after the cancel: the agent's doing, or a turn that was ending anyway?
        natural = await _natural_length(opts, probe, sid, answered - started + RACE_BOUND)
        if natural is not None:
            evidence = (
                f"the turn ended by itself (stopReason {stop!r}) {_ms(elapsed)} after session/cancel, and "
                f"an uncancelled turn ends in {_ms(natural)}: a race, not a verdict; {BUSY_HINT}"
            )
            first = CheckResult(CANCEL_RULE, MUST, SKIP, evidence, elapsed)
        else:
            first.evidence += f"; an uncancelled turn runs on longer ({_ms(answered - started + RACE_BOUND)})"
    return [first, second]


def _maybe_race(probe: Probe, busy: Busy, elapsed: float) -> bool:
    """The turn stopped soon after the cancel with no activity in between: it may have been ending."""
    return elapsed < RACE_BOUND and probe.first_activity(busy.sent) is None


async def _natural_length(opts: argparse.Namespace, probe: Probe, sid: str, limit: float) -> float | None:
    """A control turn: the busy prompt again, uncancelled. Its length if it ends within ``limit``;
    None if it runs on (then it is cancelled, and not judged)."""
    task, _ids, started = await _start_prompt(probe, opts.busy_prompt)
    kind, _value = await _outcome(probe, task, min(limit, opts.timeout))
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        await _outcome(probe, task, min(opts.timeout, 2.0))
        return None
    return time.monotonic() - started


async def check_cancel_request(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """$/cancel_request for the busy session/prompt must end it promptly: -32800 or stopReason cancelled."""
    sid = await probe.ready()
    task, ids, started = await _start_prompt(probe, opts.busy_prompt)
    busy = await _wait_busy(opts, probe, task, started)
    if isinstance(busy, str):
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, SKIP, busy)]
    assert probe.conn is not None
    assert ids, "on_sent runs when the request is queued"
    probe.conn.cancel_request(ids[0])
    kind, value = await _outcome(probe, task, opts.timeout)
    elapsed = time.monotonic() - busy.sent
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})  # the turn runs on: end it
    replies = [m for m in probe.replies_since(busy.sent, {ids[0]}) if "id" not in m or m["id"] is None]
    aside = f"; it answered the notification with {_short(replies[0])}" if replies else ""
    when = busy.describe()
    if kind == "timeout":
        evidence = f"ignored: no answer within {opts.timeout:g} s, the turn runs on ({when}){aside}"
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    if kind == "gone":
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, f"{value} ({when})", elapsed)]
    if kind == "error":
        assert isinstance(value, RpcError)
        if isinstance(value, RequestCancelledError):
            evidence = f"answered -32800 {_ms(elapsed)} after $/cancel_request ({when})"
            return [CheckResult(CANCEL_REQUEST_RULE, MAY, PASS, evidence, elapsed)]
        evidence = (
            f"answered error {value.code} {value.message!r} (expected -32800 or stopReason cancelled){aside}"
        )
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    stop = value.get("stopReason") if isinstance(value, dict) else None
    if stop == "cancelled":
        evidence = f"answered stopReason 'cancelled' {_ms(elapsed)} after $/cancel_request ({when})"
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, PASS, evidence, elapsed)]
    if _maybe_race(probe, busy, elapsed):
        turn = time.monotonic() - started
        natural = await _natural_length(opts, probe, sid, turn + RACE_BOUND)
        if natural is not None:
            evidence = (
                f"the turn ended by itself (stopReason {stop!r}) {_ms(elapsed)} after $/cancel_request, "
                f"and an uncancelled turn ends in {_ms(natural)}: a race, not a verdict; {BUSY_HINT}"
            )
            return [CheckResult(CANCEL_REQUEST_RULE, MAY, SKIP, evidence, elapsed)]
        evidence = (
            f"answered stopReason {stop!r} {_ms(elapsed)} after $/cancel_request, though an uncancelled "
            f"turn runs on longer ({_ms(turn + RACE_BOUND)}); expected -32800 or stopReason 'cancelled'"
        )
        return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]
    evidence = (
        f"ignored: the turn ran on to its natural end (stopReason {stop!r} {_ms(elapsed)} "
        f"after $/cancel_request; {when}){aside}"
    )
    return [CheckResult(CANCEL_REQUEST_RULE, MAY, FAIL, evidence, elapsed)]


async def check_notifications(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """No message in reaction to a notification: with an id, with id null, or with no id at all."""
    await probe.ready()
    assert probe.conn is not None
    sent = [
        (p.SESSION_CANCEL, {"sessionId": "no-such-session"}),
        ("_acp_driver/audit_unknown", {"x": 1}),
        (p.CANCEL_REQUEST, {"requestId": 987654321}),
        ("$/audit_unknown", {}),
        (p.SESSION_UPDATE, {"sessionId": "x", "update": {}}),
    ]
    since = time.monotonic()
    for method, params in sent:
        probe.notify(method, params)
    barrier: list[Any] = []
    with contextlib.suppress(RpcError, TimeoutError):
        # Everything before the barrier was read once it is answered (even with an error).
        await probe.until_gone(
            probe.conn.request("_acp_driver/audit_barrier", {}, timeout=opts.timeout, on_sent=barrier.append)
        )
    await asyncio.sleep(0.3)  # replies handled out of order still arrive
    replies = probe.replies_since(since, set(barrier))
    if replies:
        idless = sum(1 for m in replies if "id" not in m)
        how = f" ({idless} without an id)" if idless else ""
        evidence = (
            f"{len(replies)} reply(ies) to {len(sent)} notifications{how}, e.g. {_short(replies[0], 120)}"
        )
        return [CheckResult(NOTIFICATION_RULE, MUST, FAIL, evidence)]
    evidence = f"{len(sent)} notifications (known, unknown, $/...) drew no reply"
    return [CheckResult(NOTIFICATION_RULE, MUST, PASS, evidence)]


async def check_idle_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    sid = await probe.ready()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await asyncio.sleep(0.1)
    task, _ids, _started = await _start_prompt(probe, opts.quick_prompt)
    kind, value = await _outcome(probe, task, opts.timeout)
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return [CheckResult(IDLE_RULE, MUST, FAIL, f"the next turn got no answer within {opts.timeout:g} s")]
    if kind == "gone":
        return [CheckResult(IDLE_RULE, MUST, FAIL, f"during the next turn: {value}")]
    if kind == "error":
        assert isinstance(value, RpcError)
        return [CheckResult(IDLE_RULE, MUST, FAIL, f"the next turn failed: {value.code} {value.message!r}")]
    stop = value.get("stopReason") if isinstance(value, dict) else None
    if stop == "cancelled":
        return [
            CheckResult(IDLE_RULE, MUST, FAIL, "the next turn ended cancelled: the idle cancel poisoned it")
        ]
    return [CheckResult(IDLE_RULE, MUST, PASS, f"the next turn ended normally ({stop})")]


async def check_permission(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """Cancel while a permission request is pending: the prompt must end cancelled (MUST), and
    the agent may withdraw its request with $/cancel_request (INFO)."""
    arrived = asyncio.Event()
    withdrawn = asyncio.Event()
    release = asyncio.Event()

    async def hold(params: Any) -> Any:
        ctx = current_request()
        arrived.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            if ctx is not None and ctx.cancel_requested:
                withdrawn.set()
            raise
        return {"outcome": {"outcome": "cancelled"}}

    probe.permission_handler = hold
    sid = await probe.ready()
    task, _ids, _started = await _start_prompt(probe, opts.permission_prompt)
    asked = asyncio.ensure_future(arrived.wait())
    gone = asyncio.ensure_future(probe.peer_gone.wait())
    try:
        await asyncio.wait({asked, task, gone}, timeout=opts.timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        asked.cancel()
        gone.cancel()
    if not arrived.is_set():
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        if task.done():
            kind, value = await _outcome(probe, task, 0)
            why = f"the turn ended ({_describe(kind, value)}) without asking permission"
        elif probe.peer_gone.is_set():
            why = await probe.gone_reason_after_exit()
        else:
            why = f"no permission request within {opts.timeout:g} s"
        why += " (pass a --permission-prompt that makes it ask, or a --mode that asks)"
        return [CheckResult(PERMISSION_RULE, MUST, SKIP, why), CheckResult(WITHDRAW_RULE, INFO, SKIP, why)]
    sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(min(opts.timeout, 3.0)):
            await withdrawn.wait()
    release.set()  # the client answers "cancelled" if it is still pending (spec: MUST)
    if withdrawn.is_set():
        second = CheckResult(
            WITHDRAW_RULE,
            INFO,
            PASS,
            f"$/cancel_request for it {_ms(time.monotonic() - sent)} after the cancel",
        )
    else:
        second = CheckResult(WITHDRAW_RULE, INFO, FAIL, "not withdrawn; the client answered it cancelled")
    how = "withdrawn by the agent" if withdrawn.is_set() else "answered cancelled by the audit"
    kind, value = await _outcome(probe, task, opts.timeout)
    elapsed = time.monotonic() - sent
    if kind == "result" and isinstance(value, dict) and value.get("stopReason") == "cancelled":
        evidence = f"stopReason 'cancelled' {_ms(elapsed)} after session/cancel (permission {how})"
        first = CheckResult(PERMISSION_RULE, MUST, PASS, evidence, elapsed)
    else:
        what = (
            f"no answer within {opts.timeout:g} s"
            if kind == "timeout"
            else f"answered {_describe(kind, value)}"
        )
        evidence = (
            f"{what} {_ms(elapsed)} after session/cancel (permission {how}); expected stopReason 'cancelled'"
        )
        first = CheckResult(PERMISSION_RULE, MUST, FAIL, evidence, elapsed)
    return [first, second]


async def check_malformed(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    await probe.ready()
    assert probe.conn is not None
    since = time.monotonic()
    probe.conn.send_raw(b"this is not json")
    try:
        await probe.request(p.SESSION_NEW, {"cwd": probe.session_cwd, "mcpServers": []})
    except (RpcError, TimeoutError, AgentGone) as exc:
        if probe.process is None:  # a remote agent
            return [CheckResult(MALFORMED_RULE, SHOULD, FAIL, f"after the malformed message: {exc}")]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await probe.process.wait()
        status = exit_description(probe.process.returncode)
        return [CheckResult(MALFORMED_RULE, SHOULD, FAIL, f"after the malformed line: {exc} ({status})")]
    parse_errors = [
        m
        for m in probe.replies_since(since, set())
        if m.get("id") is None and isinstance(m.get("error"), dict) and m["error"].get("code") == -32700
    ]
    if parse_errors:
        shape = "with id null" if "id" in parse_errors[0] else "without an id"
        evidence = f"answered -32700 ({shape}) and kept working"
    else:
        evidence = "kept working (no parse-error reply)"
    return [CheckResult(MALFORMED_RULE, SHOULD, PASS, evidence)]


async def check_eof(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    if probe.url is not None:
        return [CheckResult(EOF_RULE, SHOULD, NA, NOT_OVER_A_NETWORK)]
    await probe.ready()
    assert probe.process is not None
    assert probe.conn is not None
    sent = time.monotonic()
    probe.conn.close_write()
    try:
        async with asyncio.timeout(opts.timeout):
            code = await probe.process.wait()
    except TimeoutError:
        probe.process.kill()
        evidence = f"still running {opts.timeout:g} s after stdin closed; the audit killed its process group"
        return [CheckResult(EOF_RULE, SHOULD, FAIL, evidence)]
    return [
        CheckResult(
            EOF_RULE, SHOULD, PASS, f"{exit_description(code)} {_ms(time.monotonic() - sent)} after EOF"
        )
    ]


@dataclass(frozen=True)
class Check:
    run: Callable[[argparse.Namespace, Probe], Awaitable[list[CheckResult]]]
    rules: tuple[tuple[str, str], ...]
    """(rule, level) of every result ``run`` returns: for a check that could not run."""


CHECKS: list[Check] = [
    Check(check_cancel, ((CANCEL_RULE, MUST), (AFTER_RULE, MUST))),
    Check(check_cancel_request, ((CANCEL_REQUEST_RULE, MAY),)),
    Check(check_notifications, ((NOTIFICATION_RULE, MUST),)),
    Check(check_idle_cancel, ((IDLE_RULE, MUST),)),
    Check(check_permission, ((PERMISSION_RULE, MUST), (WITHDRAW_RULE, INFO))),
    Check(check_malformed, ((MALFORMED_RULE, SHOULD),)),
    Check(check_eof, ((EOF_RULE, SHOULD),)),
]


def _short(value: Any, limit: int = 60) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AuditAborted(Exception):
    """The agent could not be brought to a session at all: nothing was audited."""


async def _audit(
    opts: argparse.Namespace, argv: list[str], cwd: str, session_cwd: str, trace: Any = None
) -> tuple[list[CheckResult], dict[str, Any]]:
    results: list[CheckResult] = []
    info: dict[str, Any] = {}
    for index, check in enumerate(CHECKS):
        probe = Probe(
            argv,
            cwd,
            session_cwd,
            opts.timeout,
            auth=opts.auth,
            mode=opts.mode,
            url=getattr(opts, "agent_url", None),
            headers=getattr(opts, "headers", None) or {},
            ssl_context=getattr(opts, "ssl_context", None),
            trace=bind(trace, check=check.run.__name__) if trace is not None else None,
        )
        if probe.trace is not None:
            probe.trace.event("check_start")
        started = time.monotonic()
        try:
            async with asyncio.timeout(opts.timeout * 8 + 5):
                found = await check.run(opts, probe)
        except SetupError as exc:
            if index == 0:
                raise AuditAborted(str(exc)) from exc
            found = [
                CheckResult(rule, level, FAIL, f"could not set up a fresh agent: {exc}")
                for rule, level in check.rules
            ]
        except (RpcError, OSError, TimeoutError, AgentGone) as exc:
            detail = str(exc) or type(exc).__name__
            if probe.process is not None and probe.process.returncode is not None:
                detail += f" ({exit_description(probe.process.returncode)}; {probe.stderr.describe(3)})"
            found = [
                CheckResult(rule, level, FAIL, f"the check broke off: {detail}")
                for rule, level in check.rules
            ]
        finally:
            info = info or probe.agent_info
            await probe.close()
        for result in found:
            if not result.elapsed:
                result.elapsed = time.monotonic() - started
            if probe.trace is not None:
                result.trace_event = probe.trace.event(
                    "verdict", **{k: getattr(result, k) for k in ("rule", "level", "result", "evidence")}
                )
        results.extend(found)
    return results, info


def _render(results: list[CheckResult], argv: list[str], info: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    name = info.get("title") or info.get("name") or argv[0]
    table = Table(title=f"cancellation audit of {name}", show_lines=False)
    for column in ("rule", "level", "result", "evidence"):
        table.add_column(column, overflow="fold")
    colours = {PASS: "green", FAIL: "red", SKIP: "yellow", NA: "dim"}
    for r in results:
        seen = "" if r.trace_event is None else f" [trace #{r.trace_event}]"
        table.add_row(
            r.rule, r.level, f"[{colours[r.result]}]{r.result.upper()}[/]", escape(r.evidence + seen)
        )
    console.print(table)


def _kill_spawned() -> None:
    """Last resort after an interrupt: SIGKILL every group the audit started and wait for it."""
    for group in _SPAWNED:
        group.kill()
        with contextlib.suppress(Exception):
            group.popen.wait(timeout=5)
    _SPAWNED.clear()


def _absolute_paths(argv: list[str]) -> list[str]:
    """The agent's command line with relative paths made absolute: a relative program path
    (``./my-agent``), and any argument naming an existing file or directory from here
    (``python my_agent.py``). Options and other words are left as they are."""
    out = []
    for i, arg in enumerate(argv):
        relative = arg and not os.path.isabs(arg) and not arg.startswith("-")
        if relative and ((i == 0 and os.sep in arg) or (i > 0 and os.path.exists(arg))):
            arg = os.path.abspath(arg)
        out.append(arg)
    return out


def check_command(opts: argparse.Namespace, argv: list[str], cwd: str | None) -> int:
    """Run the audit; ``cwd`` is ``--cwd`` (None: a throw-away directory for the sessions)."""
    if not opts.verbose:
        # The audit provokes peer violations on purpose; they are reported in the table.
        logging.getLogger("acp_driver.connection").setLevel(logging.ERROR)
        logging.getLogger("acp_driver.process").setLevel(logging.ERROR)
        logging.getLogger("acp_driver.remote").setLevel(logging.ERROR)
    if getattr(opts, "agent_url", None) is None:
        argv = _absolute_paths(argv)  # the agent starts in another directory
    try:
        with tempfile.TemporaryDirectory(prefix="acp-driver-check-") as scratch:
            # The agent process starts where its sessions are: some agents run their tools in
            # their own working directory, whatever the session's cwd says.
            workdir = cwd or scratch
            with _recorder(opts, argv) as trace:
                results, info = asyncio.run(_audit(opts, argv, workdir, workdir, trace))
    except KeyboardInterrupt:
        _kill_spawned()
        sys.stderr.write("acp-driver check: interrupted; every agent process it started was stopped\n")
        return codes.EXIT_INTERRUPTED
    except AuditAborted as exc:
        _kill_spawned()
        message = f"the agent could not start or initialize: {exc}"
        if opts.json:
            document: dict[str, Any] = {"agent": argv, "verdict": "error", "error": message}
            sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
        sys.stderr.write(f"acp-driver check: {message}\n")
        return codes.EXIT_ERROR
    counted = (MUST, SHOULD, MAY) if opts.strict else (MUST,)
    must_ok = all(r.result != FAIL for r in results if r.level == MUST)
    failed = any(r.result == FAIL for r in results if r.level in counted)
    skipped = [r for r in results if r.level in counted and r.result == SKIP]
    verdict = "failed" if failed else "inconclusive" if skipped else "passed"
    hint = _hint(skipped) if verdict == "inconclusive" else None
    if opts.json:
        document = {
            "agent": argv,
            "agentInfo": info,
            "results": [
                {
                    "rule": r.rule,
                    "level": r.level,
                    "result": r.result,
                    "evidence": r.evidence,
                    "elapsedMs": round(r.elapsed * 1000, 1),
                    **({"traceEvent": r.trace_event} if r.trace_event is not None else {}),
                }
                for r in results
            ],
            "mustPassed": must_ok,
            "passed": verdict == "passed",
            "verdict": verdict,
            "strict": bool(opts.strict),
        }
        if hint is not None:
            document["hint"] = hint
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _render(results, argv, info)
        levels = "MUST, SHOULD and MAY" if opts.strict else "MUST"
        if verdict == "failed":
            line = "a MUST, SHOULD or MAY rule failed" if opts.strict else "a MUST rule failed"
        elif verdict == "inconclusive":
            line = f"inconclusive: {len(skipped)} {levels} rule(s) skipped, nothing failed; {hint}"
        else:
            line = f"every {levels} rule passed"
        sys.stdout.write(line + "\n")
        if getattr(opts, "trace", None) is not None:
            sys.stdout.write(f"trace: {opts.trace} (draw it: acp-driver trace {opts.trace} --html OUT)\n")
    if verdict == "failed":
        return codes.EXIT_CHECK_FAILED
    if verdict == "inconclusive":
        return codes.EXIT_CHECK_INCONCLUSIVE
    return codes.EXIT_OK


def _recorder(opts: argparse.Namespace, argv: list[str]) -> Any:
    """``--trace FILE``: one recorder for the whole audit (each event names its check)."""
    if getattr(opts, "trace", None) is None:
        return contextlib.nullcontext()
    from ..trace import TraceRecorder

    return TraceRecorder(opts.trace, role="host", command="check", agent=list(argv))


def _hint(skipped: list[CheckResult]) -> str:
    wants = []
    if any(r.rule in (CANCEL_RULE, AFTER_RULE, CANCEL_REQUEST_RULE) for r in skipped):
        wants.append(
            "a --busy-prompt that keeps the agent busy longer (or --busy-after SEC for a silent agent)"
        )
    if any(r.rule == PERMISSION_RULE for r in skipped):
        wants.append("a --permission-prompt that makes it ask permission (or a --mode that asks)")
    return "pass " + " and ".join(wants) if wants else "see the evidence of the skipped rules"
