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
  passed nor failed; so are the permission rules of an agent that never asks permission;
- checks run several at once, each on its own agent, and a finding of the first check (the agent
  never works, or its work outlives ``session/cancel``) decides the rules that depend on it at
  once (``_check_run``); progress goes to stderr, the verdict names the rules by id
  (``_check_report``); interrupted, the audit reports what it decided so far.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import tempfile
from collections.abc import Coroutine
from typing import Any, TypeVar

from . import _codes as codes
from ._check_report import Progress, fix_lines, json_results, judge, junit_document, render_table
from ._check_run import Audit, AuditAborted, run_audit
from ._probe import SPAWNED, absolute_paths
from ._text import json_text, shown

T = TypeVar("T")


def _render(audit: Audit, argv: list[str]) -> None:
    name = shown(audit.info.get("title") or audit.info.get("name") or argv[0])
    render_table(audit.results, name, audit.version)


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
    audit = Audit()
    audit.progress = progress = Progress(opts)
    try:
        with tempfile.TemporaryDirectory(prefix="acp-driver-check-") as scratch:
            # The agent process starts where its sessions are: some agents run their tools in
            # their own working directory, whatever the session's cwd says.
            workdir = cwd or scratch
            with _recorder(opts, argv) as trace:
                asyncio.run(_running(run_audit(opts, argv, workdir, workdir, audit, trace)))
    except (KeyboardInterrupt, asyncio.CancelledError):  # CancelledError: interrupt_audit()
        _kill_spawned()
        progress.finish()
        if audit.version is not None:
            _report(opts, argv, audit, interrupted=True)
        sys.stderr.write("acp-driver check: interrupted; every agent process it started was stopped\n")
        return codes.EXIT_INTERRUPTED
    except AuditAborted as exc:
        _kill_spawned()
        progress.finish()
        message = f"the agent could not start or initialize: {exc}"
        if opts.json:
            document: dict[str, Any] = {"agent": argv, "verdict": "error", "error": message}
            sys.stdout.write(json_text(document, indent=True) + "\n")
        sys.stderr.write(f"acp-driver check: {shown(message)}\n")
        return codes.EXIT_ERROR
    progress.finish()
    verdict = _report(opts, argv, audit)
    if verdict == "failed":
        return codes.EXIT_CHECK_FAILED
    if verdict == "inconclusive":
        return codes.EXIT_CHECK_INCONCLUSIVE
    return codes.EXIT_OK


def _report(opts: argparse.Namespace, argv: list[str], audit: Audit, interrupted: bool = False) -> str:
    """The table (or ``--json``) and ``--junit`` of what was decided; the verdict. Interrupted:
    the rules decided so far, and how many were not."""
    results = audit.results
    judged = judge(results, bool(opts.strict))
    left = audit.total - len(results)
    stopped = (
        f"interrupted: {len(results)} of {audit.total} rules decided, {left} not" if interrupted else None
    )
    if getattr(opts, "junit", None) is not None:
        _write_junit(opts.junit, junit_document(results, judged, " ".join(argv), audit.version, interrupted))
    if opts.json:
        document = {
            "agent": argv,
            "agentInfo": audit.info,
            "protocolVersion": audit.version,
            "results": json_results(results),
            "mustPassed": all(r.result != "fail" for r in results if r.level == "MUST"),
            "passed": judged.verdict == "passed" and not interrupted,
            "verdict": "interrupted" if interrupted else judged.verdict,
            "strict": bool(opts.strict),
            "summary": f"{stopped}; so far {judged.tally()}" if stopped else judged.last_line(),
        }
        if judged.hint is not None and not interrupted:
            document["hint"] = judged.hint
        sys.stdout.write(json_text(document, indent=True) + "\n")
    else:
        _render(audit, argv)
        for line in fix_lines(results):
            sys.stdout.write(line + "\n")
        if getattr(opts, "trace", None) is not None:
            sys.stdout.write(f"trace: {opts.trace} (draw it: acp-driver trace {opts.trace} --html OUT)\n")
        sys.stdout.write((f"{stopped}; so far {judged.tally()}" if stopped else judged.last_line()) + "\n")
    sys.stdout.flush()
    return judged.verdict


def _write_junit(path: str, document: bytes) -> None:
    try:
        with open(path, "wb") as out:
            out.write(document)
    except OSError as exc:
        sys.stderr.write(f"acp-driver check: cannot write --junit {shown(path)}: {exc.strerror or exc}\n")


def _recorder(opts: argparse.Namespace, argv: list[str]) -> Any:
    """``--trace FILE``: one recorder for the whole audit (each event names its check)."""
    if getattr(opts, "trace", None) is None:
        return contextlib.nullcontext()
    from ..trace import TraceRecorder

    return TraceRecorder(opts.trace, role="host", command="check", agent=list(argv))
