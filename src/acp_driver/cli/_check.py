"""``acp-driver check``: audit any agent's cancellation, one rule per check, with evidence.

The audit drives the agent at the wire level (not through the polite driver) so that it can
hold a permission request open, send a malformed line, or watch for replies to notifications.
Each check that needs isolation gets a fresh agent process; every process group is reaped,
whatever the agent does. Races are reported honestly: when a turn ends before the cancel could
be sent, the check is skipped with that reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import __version__
from .. import protocol as p
from ..aio import Connection, current_request
from ..aio._process import ProcessGroup, StderrTail, drain_pipe, exit_description
from ..aio._transports import open_pipes
from ..core import ErrorCode, ProtocolViolation, RequestCancelledError, RpcError, Violation
from . import _main as codes

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class CheckResult:
    rule: str
    level: str
    result: str
    evidence: str
    elapsed: float = 0.0


@dataclass
class Probe:
    """One agent process under audit."""

    argv: list[str]
    cwd: str
    timeout: float
    process: ProcessGroup | None = None
    conn: Connection | None = None
    stderr: StderrTail = field(default_factory=lambda: StderrTail("audit"))
    incoming: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    violations: list[ProtocolViolation] = field(default_factory=list)
    peer_gone: asyncio.Event = field(default_factory=asyncio.Event)
    permission_handler: Callable[[Any], Awaitable[Any]] | None = None
    session_id: str | None = None
    agent_info: dict[str, Any] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    auth: str | None = None
    """``--auth``: the ``authenticate`` method id sent after ``initialize``."""

    async def start(self) -> None:
        self.process = ProcessGroup.spawn(self.argv, cwd=self.cwd)
        conn = self.conn = Connection(name="audit", tracer=self._trace, close_timeout=0.3)
        conn.on_violation = self.violations.append
        conn.on_peer_gone = lambda how: self.peer_gone.set()
        conn.on_request(p.SESSION_REQUEST_PERMISSION, self._permission)
        popen = self.process.popen
        assert popen.stdin is not None
        assert popen.stdout is not None
        assert popen.stderr is not None
        await open_pipes(conn, popen.stdout, popen.stdin)
        self._stderr_transport = await drain_pipe(popen.stderr, self.stderr.feed, lambda: None)

    def _trace(self, direction: str, line: bytes) -> None:
        if direction != "in":
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if isinstance(message, dict):
            self.incoming.append((time.monotonic(), message))

    async def _permission(self, params: Any) -> Any:
        if self.permission_handler is not None:
            return await self.permission_handler(params)
        return {"outcome": {"outcome": "cancelled"}}

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        assert self.conn is not None
        return await self.conn.request(method, params, timeout=self.timeout if timeout is None else timeout)

    async def initialize(self) -> None:
        result = await self.request(
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

    async def new_session(self) -> str:
        result = await self.request(p.SESSION_NEW, {"cwd": self.cwd, "mcpServers": []})
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise RpcError(ErrorCode.INVALID_REQUEST, f"invalid session/new response {result!r}")
        self.session_id = sid
        return sid

    async def ready(self) -> str:
        await self.start()
        await self.initialize()
        if self.auth is not None:
            await self.request(p.AUTHENTICATE, {"methodId": self.auth})
        return await self.new_session()

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
            update = params.get("update")
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            if kind not in p.SESSION_WIDE_UPDATES:
                late.append(message)
        return late

    def first_update_at(self, after: float) -> float | None:
        for at, message in self.incoming:
            if at > after and message.get("method") == p.SESSION_UPDATE:
                return at
        return None

    async def close(self) -> str:
        """Reap the agent's whole group; returns how it ended."""
        conn = self.conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                await conn.aclose("audit done")
        for task in self.tasks:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self.process is None:
            return "not started"
        code = await self.process.reap(term_timeout=0.5)
        transport = getattr(self, "_stderr_transport", None)
        if transport is not None:
            transport.close()
        return exit_description(code)


async def _start_prompt(probe: Probe, text: str) -> tuple[asyncio.Task[Any], list[Any], float]:
    ids: list[Any] = []
    assert probe.conn is not None
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


async def _wait_busy(probe: Probe, task: asyncio.Task[Any], started: float) -> None:
    """Give the turn a moment to get going: until its first update, or 0.5 s."""
    deadline = started + 0.5
    while time.monotonic() < deadline and not task.done():
        if probe.first_update_at(started) is not None:
            await asyncio.sleep(0.05)
            return
        await asyncio.sleep(0.01)


async def _outcome(task: asyncio.Task[Any], timeout: float) -> tuple[str, Any]:
    """("result", value) / ("error", RpcError) / ("timeout", None)."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        return "timeout", None
    exc = task.exception()
    if exc is None:
        return "result", task.result()
    if isinstance(exc, RpcError):
        return "error", exc
    return "error", RpcError(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# ---------------------------------------------------------------------- checks


async def check_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    """session/cancel mid-turn -> stopReason cancelled; then no update of the turn after the response."""
    rule, after_rule = (
        "session/cancel answered stopReason cancelled",
        "no turn update after the prompt response",
    )
    sid = await probe.ready()
    task, _ids, started = await _start_prompt(probe, opts.busy_prompt)
    await _wait_busy(probe, task, started)
    if task.done():
        reason = "the turn ended before the cancel could be sent (use a longer --busy-prompt)"
        return [CheckResult(rule, "MUST", SKIP, reason), CheckResult(after_rule, "MUST", SKIP, reason)]
    sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    kind, value = await _outcome(task, opts.timeout)
    answered = time.monotonic()
    if kind == "timeout":
        return [
            CheckResult(
                rule, "MUST", FAIL, f"no answer to session/prompt within {opts.timeout:g} s of session/cancel"
            ),
            CheckResult(after_rule, "MUST", SKIP, "the prompt was never answered"),
        ]
    if kind == "error":
        assert isinstance(value, RpcError)
        first = CheckResult(
            rule,
            "MUST",
            FAIL,
            f"answered a JSON-RPC error {value.code} {value.message!r} instead of stopReason cancelled",
            answered - sent,
        )
    else:
        stop = value.get("stopReason") if isinstance(value, dict) else None
        if stop == "cancelled":
            first = CheckResult(
                rule, "MUST", PASS, f"stopReason cancelled {_ms(answered - sent)} after the cancel"
            )
        else:
            first = CheckResult(
                rule,
                "MUST",
                FAIL,
                f"answered stopReason {stop!r} {_ms(answered - sent)} after session/cancel",
            )
        first.elapsed = answered - sent
    await asyncio.sleep(min(1.0, opts.timeout))  # watch for stragglers
    late = probe.updates_after(answered, sid)
    if late:
        kinds = sorted({str(m["params"]["update"].get("sessionUpdate")) for m in late})
        second = CheckResult(
            after_rule, "MUST", FAIL, f"{len(late)} update(s) after the response: {', '.join(kinds)}"
        )
    else:
        second = CheckResult(after_rule, "MUST", PASS, "none in the second after the response")
    return [first, second]


async def check_cancel_request(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "$/cancel_request for an in-flight request answered"
    sid = await probe.ready()
    task, ids, started = await _start_prompt(probe, opts.busy_prompt)
    await _wait_busy(probe, task, started)
    if task.done() or not ids:
        return [CheckResult(rule, "MAY", SKIP, "the turn ended before $/cancel_request could be sent")]
    assert probe.conn is not None
    sent = time.monotonic()
    probe.conn.cancel_request(ids[0])
    kind, value = await _outcome(task, opts.timeout)
    elapsed = time.monotonic() - sent
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})  # clean up either way
    if kind == "timeout":
        evidence = f"no answer within {opts.timeout:g} s (support is optional; the request hangs on)"
        return [CheckResult(rule, "MAY", FAIL, evidence)]
    if kind == "error":
        assert isinstance(value, RpcError)
        if isinstance(value, RequestCancelledError):
            return [CheckResult(rule, "MAY", PASS, f"answered -32800 after {_ms(elapsed)}", elapsed)]
        return [
            CheckResult(rule, "MAY", FAIL, f"answered error {value.code} {value.message!r} (expected -32800)")
        ]
    return [
        CheckResult(
            rule, "MAY", PASS, f"answered with a result after {_ms(elapsed)}: {_short(value)}", elapsed
        )
    ]


async def check_notifications(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "no reply to any notification"
    await probe.ready()
    sent = [
        (p.SESSION_CANCEL, {"sessionId": "no-such-session"}),
        ("_acp_driver/audit_unknown", {"x": 1}),
        (p.CANCEL_REQUEST, {"requestId": 987654321}),
        ("$/audit_unknown", {}),
        (p.SESSION_UPDATE, {"sessionId": "x", "update": {}}),
    ]
    for method, params in sent:
        probe.notify(method, params)
    with contextlib.suppress(RpcError, TimeoutError):
        await probe.request("_acp_driver/audit_barrier", {})  # everything before it was read
    await asyncio.sleep(0.2)
    bad = [
        v
        for v in probe.violations
        if v.kind in (Violation.NULL_ID_ERROR, Violation.UNKNOWN_RESPONSE_ID, Violation.DUPLICATE_RESPONSE)
    ]
    if bad:
        return [
            CheckResult(rule, "MUST", FAIL, f"{len(bad)} reply(ies) to notifications, e.g. {bad[0].detail}")
        ]
    return [
        CheckResult(rule, "MUST", PASS, f"{len(sent)} notifications (known, unknown, $/...) drew no reply")
    ]


async def check_idle_cancel(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "cancel on an idle session does not poison the next turn"
    sid = await probe.ready()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    await asyncio.sleep(0.1)
    task, _ids, _started = await _start_prompt(probe, opts.quick_prompt)
    kind, value = await _outcome(task, opts.timeout)
    if kind == "timeout":
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return [CheckResult(rule, "MUST", FAIL, f"the next turn got no answer within {opts.timeout:g} s")]
    if kind == "error":
        assert isinstance(value, RpcError)
        return [CheckResult(rule, "MUST", FAIL, f"the next turn failed: {value.code} {value.message!r}")]
    stop = value.get("stopReason") if isinstance(value, dict) else None
    if stop == "cancelled":
        return [CheckResult(rule, "MUST", FAIL, "the next turn ended cancelled: the idle cancel poisoned it")]
    return [CheckResult(rule, "MUST", PASS, f"the next turn ended normally ({stop})")]


async def check_permission_cascade(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "agent withdraws its pending permission request on cancel ($/cancel_request)"
    arrived = asyncio.Event()
    withdrawn = asyncio.Event()
    release = asyncio.Event()
    asked: list[Any] = []

    async def hold(params: Any) -> Any:
        ctx = current_request()
        asked.append(ctx.id if ctx else None)
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
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(opts.timeout):
            await asyncio.wait(
                {asyncio.ensure_future(arrived.wait()), task}, return_when=asyncio.FIRST_COMPLETED
            )
    if not arrived.is_set():
        probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
        return [CheckResult(rule, "INFO", SKIP, "no permission request arrived (try --permission-prompt)")]
    sent = time.monotonic()
    probe.notify(p.SESSION_CANCEL, {"sessionId": sid})
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(min(opts.timeout, 3.0)):
            await withdrawn.wait()
    release.set()  # answer "cancelled" if it is still pending
    if withdrawn.is_set():
        return [
            CheckResult(
                rule, "INFO", PASS, f"$/cancel_request for it {_ms(time.monotonic() - sent)} after the cancel"
            )
        ]
    return [CheckResult(rule, "INFO", FAIL, "not withdrawn; the client had to answer it cancelled")]


async def check_malformed(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "a malformed line does not kill the agent"
    await probe.ready()
    assert probe.conn is not None
    probe.conn.send_raw(b"this is not json\n")
    try:
        await probe.request(p.SESSION_NEW, {"cwd": probe.cwd, "mcpServers": []})
    except (RpcError, TimeoutError) as exc:
        assert probe.process is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await probe.process.wait()
        status = exit_description(probe.process.returncode)
        return [CheckResult(rule, "SHOULD", FAIL, f"after the malformed line: {exc} ({status})")]
    replied = any(v.kind is Violation.NULL_ID_ERROR and "-32700" in v.detail for v in probe.violations)
    evidence = "answered -32700 and kept working" if replied else "kept working (no parse-error reply)"
    return [CheckResult(rule, "SHOULD", PASS, evidence)]


async def check_eof(opts: argparse.Namespace, probe: Probe) -> list[CheckResult]:
    rule = "exits after stdin EOF"
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
        return [
            CheckResult(
                rule,
                "SHOULD",
                FAIL,
                f"still running {opts.timeout:g} s after stdin closed; the audit killed its process group",
            )
        ]
    return [
        CheckResult(
            rule, "SHOULD", PASS, f"{exit_description(code)} {_ms(time.monotonic() - sent)} after EOF"
        )
    ]


CHECKS: list[Callable[[argparse.Namespace, Probe], Awaitable[list[CheckResult]]]] = [
    check_cancel,
    check_cancel_request,
    check_notifications,
    check_idle_cancel,
    check_permission_cascade,
    check_malformed,
    check_eof,
]


def _short(value: Any, limit: int = 60) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _audit(
    opts: argparse.Namespace, argv: list[str], cwd: str
) -> tuple[list[CheckResult], dict[str, Any]]:
    results: list[CheckResult] = []
    info: dict[str, Any] = {}
    for check in CHECKS:
        probe = Probe(argv, cwd, opts.timeout, auth=opts.auth)
        started = time.monotonic()
        try:
            async with asyncio.timeout(opts.timeout * 4 + 5):
                found = await check(opts, probe)
        except (RpcError, OSError, TimeoutError) as exc:
            name = check.__name__.removeprefix("check_")
            detail = str(exc) or type(exc).__name__
            if probe.process is not None and probe.process.returncode is not None:
                detail += f" ({exit_description(probe.process.returncode)}; {probe.stderr.describe(3)})"
            found = [CheckResult(f"{name}: could not run", "MUST", FAIL, detail)]
        finally:
            info = info or probe.agent_info
            await probe.close()
        for result in found:
            if not result.elapsed:
                result.elapsed = time.monotonic() - started
        results.extend(found)
    return results, info


def _render(results: list[CheckResult], argv: list[str], info: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    name = info.get("title") or info.get("name") or argv[0]
    table = Table(title=f"cancellation audit of {name}", show_lines=False)
    for column in ("rule", "level", "result", "evidence"):
        table.add_column(column, overflow="fold")
    colours = {PASS: "green", FAIL: "red", SKIP: "yellow"}
    for r in results:
        table.add_row(r.rule, r.level, f"[{colours[r.result]}]{r.result.upper()}[/]", r.evidence)
    console.print(table)


def check_command(opts: argparse.Namespace, argv: list[str], cwd: str) -> int:
    if not opts.verbose:
        # The audit provokes peer violations on purpose; they are reported in the table.
        logging.getLogger("acp_driver.connection").setLevel(logging.ERROR)
        logging.getLogger("acp_driver.process").setLevel(logging.ERROR)
    results, info = asyncio.run(_audit(opts, argv, cwd))
    must_ok = all(r.result != FAIL for r in results if r.level == "MUST")
    counted = ("MUST", "SHOULD", "MAY") if opts.strict else ("MUST",)
    ok = all(r.result != FAIL for r in results if r.level in counted)
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
                }
                for r in results
            ],
            "mustPassed": must_ok,
            "passed": ok,
            "strict": bool(opts.strict),
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _render(results, argv, info)
        if opts.strict:
            verdict = "every MUST, SHOULD and MAY rule passed" if ok else "a MUST, SHOULD or MAY rule failed"
        else:
            verdict = "every MUST rule passed" if ok else "a MUST rule failed"
        sys.stdout.write(verdict + "\n")
    return codes.EXIT_OK if ok else codes.EXIT_CHECK_FAILED
