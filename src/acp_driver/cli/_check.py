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
- starting a fresh agent (``initialize``, ``authenticate``, its first ``session/new``) waits up to
  ``--start-timeout`` (default: 30 s, or ``--timeout`` if longer), not ``--timeout``: that one is
  how long a rule waits for the agent to react, and a slow start is not a slow reaction;
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
import sys
import tempfile
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..aio import exit_description
from ..core import RpcError
from ..trace import Bound, bind
from . import _codes as codes
from ._check_rules import (
    AFTER_RULE,
    CANCEL_REQUEST_RULE,
    CANCEL_RULE,
    CHECKS,
    FAIL,
    IDLE_RULE,
    MAY,
    MUST,
    NA,
    PASS,
    PERMISSION_RULE,
    SHOULD,
    SKIP,
    Check,
    CheckResult,
)
from ._check_v2 import BUSY_RULES_V2, CHECKS_V2
from ._check_v2_session import V2_PERMISSION_RULE
from ._probe import SPAWNED, START_TIMEOUT, AgentGone, Probe, SetupError, absolute_paths
from ._text import json_text, shown

T = TypeVar("T")

NOT_SET_UP = "not tested: could not set up a fresh agent"
"""The evidence of a rule whose fresh agent could not be started (after the first check)."""


class AuditAborted(Exception):
    """The agent could not be brought to a session at all: nothing was audited."""


def start_timeout(opts: argparse.Namespace) -> float:
    """``--start-timeout``; absent: ``START_TIMEOUT``, or ``--timeout`` if that is longer."""
    given: float | None = getattr(opts, "start_timeout", None)
    return given if given is not None else max(START_TIMEOUT, opts.timeout)


def _asked(opts: argparse.Namespace) -> str | int:
    """``--protocol``: ``"auto"``, 1 or 2 (absent: 1, as before versions were negotiated)."""
    wanted = str(getattr(opts, "protocol", "1"))
    return wanted if wanted == "auto" else int(wanted)


async def _audit(
    opts: argparse.Namespace, argv: list[str], cwd: str, session_cwd: str, trace: Any = None
) -> tuple[list[CheckResult], dict[str, Any], int]:
    """Every check of the version the agent speaks, each on a fresh probe. The first probe
    negotiates (``--protocol``); the later ones insist on the version it got, so that one audit
    judges one version. Returns the results, the agent's info and that version."""
    results: list[CheckResult] = []
    info: dict[str, Any] = {}
    protocol: str | int = _asked(opts)
    checks: list[Check] | None = None
    index = 0
    start = start_timeout(opts)
    while checks is None or index < len(checks):
        name = checks[index].run.__name__ if checks is not None else "negotiate"
        probe = Probe(
            argv,
            cwd,
            session_cwd,
            opts.timeout,
            start_timeout=start,
            auth=opts.auth,
            mode=opts.mode,
            terminal=bool(getattr(opts, "terminal", False)),
            url=getattr(opts, "agent_url", None),
            headers=getattr(opts, "headers", None) or {},
            ssl_context=getattr(opts, "ssl_context", None),
            trace=bind(trace, check=name) if trace is not None else None,
            protocol=protocol,
        )
        if checks is None:
            # The first probe: the version the agent answers decides which rules are audited.
            try:
                # Each step of the start has its own bound and pushes this one back by its time.
                async with asyncio.timeout(opts.timeout * 2 + 5) as probe.budget:
                    await probe.connect()
            except (SetupError, TimeoutError) as exc:
                await probe.close()
                raise AuditAborted(str(exc) or "initialize: no answer") from exc
            probe.budget = None
            protocol = probe.version
            if probe.negotiation_note is not None:  # judged by the rules of what it speaks
                print(f"check: {probe.negotiation_note}", file=sys.stderr, flush=True)
            checks = CHECKS_V2 if probe.version == 2 else CHECKS
            if isinstance(probe.trace, Bound):  # its wire so far belongs to its check
                probe.trace.fields["check"] = checks[0].run.__name__
        check = checks[index]
        if probe.trace is not None:
            probe.trace.event("check_start")
        started = time.monotonic()
        try:
            # The check's own bound: its agent's start (bounded by --start-timeout) is not counted.
            async with asyncio.timeout(opts.timeout * 8 + 5) as probe.budget:
                found = await check.run(opts, probe)
        except SetupError as exc:
            if index == 0:
                raise AuditAborted(str(exc)) from exc
            # The rule was not tested: the wire said nothing about it (a slow start on a busy
            # machine is not the rule's failure). A MUST skipped makes the audit inconclusive.
            found = [CheckResult(rule, level, SKIP, f"{NOT_SET_UP}: {exc}") for rule, level in check.rules]
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
        index += 1
    assert isinstance(protocol, int)
    return results, info, protocol


def _render(results: list[CheckResult], argv: list[str], info: dict[str, Any], version: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    name = shown(info.get("title") or info.get("name") or argv[0])
    table = Table(title=Text(f"cancellation audit of {name} (ACP v{version} rules)"), show_lines=False)
    for column in ("rule", "level", "result", "evidence"):
        table.add_column(column, overflow="fold")
    colours = {PASS: "green", FAIL: "red", SKIP: "yellow", NA: "dim"}
    for r in results:
        seen = "" if r.trace_event is None else f" [trace #{r.trace_event}]"
        # Text, not markup: evidence quotes the agent.
        evidence = Text(shown(r.evidence) + seen)
        table.add_row(Text(r.rule), Text(r.level), Text(r.result.upper(), colours[r.result]), evidence)
    console.print(table)


class _Running:
    """The audit's task while ``asyncio.run`` runs it, whether a signal cancelled it, and whether
    the audit is over (every agent reaped)."""

    task: asyncio.Task[Any] | None = None
    interrupted = False
    over = False


async def _running(audit: Coroutine[Any, Any, T]) -> T:
    _Running.task = asyncio.current_task()
    try:
        return await audit
    finally:
        _Running.task = None
        _Running.over = True


def interrupt_audit() -> None:
    """What Ctrl-C, SIGTERM and SIGHUP do to ``check`` (the handler ``asyncio.run`` would install
    for SIGINT, but ours for all three, so that none is ever left at Python's
    ``KeyboardInterrupt`` handler, which Python replaces by the default action while it exits).
    The first signal cancels the audit, whose ``finally`` reaps its agents; a later one raises
    ``KeyboardInterrupt`` (raised inside the running loop at once, it could stop one of the
    loop's tasks half-way and leave the others waiting for it), as does one before the audit
    starts. Once the audit is over a signal changes nothing: its exit code is given."""
    if _Running.over:
        return
    task = _Running.task
    if task is None or task.done() or _Running.interrupted:
        raise KeyboardInterrupt
    _Running.interrupted = True
    task.cancel()
    task.get_loop().call_soon_threadsafe(lambda: None)  # wake up a select() with a long timeout


def audit_over() -> None:
    """The audit ended (or never ran): later signals change nothing."""
    _Running.over = True


def _kill_spawned() -> None:
    """Last resort after an interrupt: SIGKILL every group the audit started and wait for it."""
    for group in SPAWNED:
        group.kill()
        with contextlib.suppress(Exception):
            group.popen.wait(timeout=5)
    SPAWNED.clear()


def check_command(opts: argparse.Namespace, argv: list[str], cwd: str | None) -> int:
    """Run the audit; ``cwd`` is ``--cwd`` (None: a throw-away directory for the sessions)."""
    _Running.interrupted = _Running.over = False
    if not opts.verbose:
        # The audit provokes peer violations on purpose; they are reported in the table.
        logging.getLogger("acp_driver.connection").setLevel(logging.ERROR)
        logging.getLogger("acp_driver.process").setLevel(logging.ERROR)
        logging.getLogger("acp_driver.remote").setLevel(logging.ERROR)
    if getattr(opts, "agent_url", None) is None:
        argv = absolute_paths(argv)  # the agent starts in another directory
    try:
        with tempfile.TemporaryDirectory(prefix="acp-driver-check-") as scratch:
            # The agent process starts where its sessions are: some agents run their tools in
            # their own working directory, whatever the session's cwd says.
            workdir = cwd or scratch
            with _recorder(opts, argv) as trace:
                results, info, version = asyncio.run(_running(_audit(opts, argv, workdir, workdir, trace)))
    except (KeyboardInterrupt, asyncio.CancelledError):  # CancelledError: interrupt_audit()
        _kill_spawned()
        sys.stderr.write("acp-driver check: interrupted; every agent process it started was stopped\n")
        return codes.EXIT_INTERRUPTED
    except AuditAborted as exc:
        _kill_spawned()
        message = f"the agent could not start or initialize: {exc}"
        if opts.json:
            document: dict[str, Any] = {"agent": argv, "verdict": "error", "error": message}
            sys.stdout.write(json_text(document, indent=True) + "\n")
        sys.stderr.write(f"acp-driver check: {shown(message)}\n")
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
            "protocolVersion": version,
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
        sys.stdout.write(json_text(document, indent=True) + "\n")
    else:
        _render(results, argv, info, version)
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
    if any(r.evidence.startswith(NOT_SET_UP) for r in skipped):
        wants.append("a longer --start-timeout (a fresh agent did not start or initialize in time)")
        skipped = [r for r in skipped if not r.evidence.startswith(NOT_SET_UP)]
    if any(r.rule in (CANCEL_RULE, AFTER_RULE, CANCEL_REQUEST_RULE, *BUSY_RULES_V2) for r in skipped):
        wants.append(
            "a --busy-prompt that keeps the agent busy longer (or --busy-after SEC for a silent agent)"
        )
    if any(r.rule in (PERMISSION_RULE, V2_PERMISSION_RULE) for r in skipped):
        wants.append(
            "a --permission-prompt that makes it ask permission (or a --mode that asks, or --terminal)"
        )
    if any(r.rule == IDLE_RULE for r in skipped):
        wants.append("a --quick-prompt the agent answers within --timeout")
    return "pass " + " and ".join(wants) if wants else "see the evidence of the skipped rules"
