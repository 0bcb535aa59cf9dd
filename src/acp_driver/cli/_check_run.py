"""How ``acp-driver check`` runs its checks: each on a fresh agent, several at once, and none
that a finding already decided.

- **The first check negotiates.** Its probe asks ``--protocol``; the version the agent answers
  picks the checks (v1 or v2), and every later probe insists on that version, so one audit judges
  one version.
- **Checks run at once, bounded.** Each check has its own agent process (or connection), so
  they do not share a wire: up to ``--jobs`` (default ``JOBS``) run at the same time. Results
  are reported in the checks' order, whatever order they end in.
- **A finding decides the rules that depend on it.** The first check (``session/cancel``
  mid-turn) can prove that the agent never ends work: ``WEDGED`` (no turn activity and no end,
  even after the cancel) or ``UNCANCELLABLE`` (the work did not end after the cancel). A check
  marked ``unless`` that finding waits for the first check (a ``WEDGED`` dependent only until
  the first turn activity shows that the agent works), then is skipped at once, its evidence
  naming the rule it depends on: nothing is gained by waiting ``--timeout`` again and again for
  an agent that was shown not to answer.
- **What was decided is kept as it is decided** (``Audit.slots``), so that an interrupted audit
  can still report it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ..aio import exit_description
from ..core import RpcError
from ..trace import Bound, bind
from ._check_catalog import AUDITS, rule_id
from ._check_rules import FAIL, SKIP, UNCANCELLABLE, WEDGED, Check, CheckResult
from ._probe import START_TIMEOUT, AgentGone, Probe, SetupError

JOBS = 4
"""How many checks run at once by default (``--jobs``), each on its own agent."""

NOT_SET_UP = "not tested: could not set up a fresh agent"
"""The evidence of a rule whose fresh agent could not be started (after the first check)."""

PROVED = {
    WEDGED: "the agent never works on a prompt: no turn activity and no answer within --timeout, "
    "nor within --timeout after session/cancel",
    UNCANCELLABLE: "the agent's work does not end after session/cancel (nothing ended it within --timeout)",
}


class AuditAborted(Exception):
    """The agent could not be brought to a session at all: nothing was audited."""


@dataclass
class Audit:
    """One audit's state, as it goes: what is known is kept here as soon as it is known."""

    checks: list[Check] = field(default_factory=list)
    slots: list[list[CheckResult] | None] = field(default_factory=list)
    """Each check's results once decided (None: not yet), in the checks' order."""
    info: dict[str, Any] = field(default_factory=dict)
    version: int | None = None
    progress: Any = None
    """The ``Progress`` the audit reports to (None: silent)."""

    @property
    def results(self) -> list[CheckResult]:
        """Every result decided so far, in the checks' order."""
        return [r for slot in self.slots if slot is not None for r in slot]

    @property
    def total(self) -> int:
        return sum(len(check.rules) for check in self.checks)

    def decide(self, index: int, found: list[CheckResult]) -> None:
        self.slots[index] = found
        if self.progress is not None:
            self.progress.decided(self, index, found)


def start_timeout(opts: argparse.Namespace) -> float:
    """``--start-timeout``; absent: ``START_TIMEOUT``, or ``--timeout`` if that is longer."""
    given: float | None = getattr(opts, "start_timeout", None)
    return given if given is not None else max(START_TIMEOUT, opts.timeout)


def _asked(opts: argparse.Namespace) -> str | int:
    """``--protocol``: ``"auto"``, 1 or 2 (absent: 1, as before versions were negotiated)."""
    wanted = str(getattr(opts, "protocol", "1"))
    return wanted if wanted == "auto" else int(wanted)


def _probe(
    opts: argparse.Namespace,
    argv: list[str],
    cwd: str,
    session_cwd: str,
    trace: Any,
    name: str,
    protocol: str | int,
) -> Probe:
    return Probe(
        argv,
        cwd,
        session_cwd,
        opts.timeout,
        start_timeout=start_timeout(opts),
        auth=opts.auth,
        mode=opts.mode,
        terminal=bool(getattr(opts, "terminal", False)),
        url=getattr(opts, "agent_url", None),
        headers=getattr(opts, "headers", None) or {},
        ssl_context=getattr(opts, "ssl_context", None),
        trace=bind(trace, check=name) if trace is not None else None,
        protocol=protocol,
    )


class _Findings:
    """What the first check proved, for the checks that depend on it."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.proof: CheckResult | None = None
        self.works: asyncio.Event | None = None
        """The first check's probe's turn activity: set once the agent showed it works."""

    def settle(self, found: list[CheckResult]) -> None:
        self.proof = next((r for r in found if r.proves is not None), None)
        self.done.set()

    async def decides(self, unless: str) -> CheckResult | None:
        """Wait until it is known whether ``unless`` holds: the result that proved it, or None."""
        waits = {asyncio.ensure_future(self.done.wait())}
        if unless == WEDGED and self.works is not None:
            waits.add(asyncio.ensure_future(self.works.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        if not self.done.is_set() or self.proof is None:
            return None  # the agent works (or nothing was proved)
        if unless == UNCANCELLABLE or self.proof.proves == WEDGED:
            return self.proof
        return None


def _skipped(check: Check, proof: CheckResult) -> list[CheckResult]:
    assert proof.proves is not None
    why = f"decided at once: depends on {rule_id(proof.rule)}, which showed that {PROVED[proof.proves]}"
    return [CheckResult(rule, level, SKIP, why) for rule, level in check.rules]


async def run_audit(
    opts: argparse.Namespace, argv: list[str], cwd: str, session_cwd: str, audit: Audit, trace: Any = None
) -> None:
    """Every check of the version the agent speaks, each on a fresh probe, up to ``--jobs`` at
    once; the results land in ``audit`` as they are decided."""
    first = _probe(opts, argv, cwd, session_cwd, trace, "negotiate", _asked(opts))
    try:
        # Each step of the start has its own bound and pushes this one back by its time.
        async with asyncio.timeout(opts.timeout * 2 + 5) as first.budget:
            await first.connect()
    except (SetupError, TimeoutError) as exc:
        await first.close()
        raise AuditAborted(str(exc) or "initialize: no answer") from exc
    first.budget = None
    audit.version = first.version
    if first.negotiation_note is not None:  # judged by the rules of what it speaks
        print(f"check: {first.negotiation_note}", file=sys.stderr, flush=True)
    audit.checks = AUDITS[first.version]
    audit.slots = [None] * len(audit.checks)
    audit.info = first.agent_info
    if isinstance(first.trace, Bound):  # its wire so far belongs to its check
        first.trace.fields["check"] = audit.checks[0].run.__name__
    findings = _Findings()
    findings.works = first.activity
    slots = asyncio.Semaphore(max(1, int(getattr(opts, "jobs", None) or JOBS)))

    async def run(index: int, check: Check) -> None:
        if check.unless is not None:
            proof = await findings.decides(check.unless)
            if proof is not None:
                audit.decide(index, _skipped(check, proof))
                return
        async with slots:
            probe = (
                first
                if index == 0
                else _probe(opts, argv, cwd, session_cwd, trace, check.run.__name__, audit.version or 1)
            )
            found = await _run_check(opts, audit, index, check, probe)
        if index == 0:
            findings.settle(found)
        audit.decide(index, found)

    try:
        async with asyncio.TaskGroup() as group:
            for index, check in enumerate(audit.checks):
                group.create_task(run(index, check))
    except BaseExceptionGroup as failed:
        aborted = [e for e in failed.exceptions if isinstance(e, AuditAborted)]
        if aborted:
            raise aborted[0] from None
        raise


async def _run_check(
    opts: argparse.Namespace, audit: Audit, index: int, check: Check, probe: Probe
) -> list[CheckResult]:
    """One check on its probe (reaped whatever happens); its results, each with its time."""
    if audit.progress is not None:
        audit.progress.started(audit, index)
    if probe.trace is not None:
        probe.trace.event("check_start")
    started = time.monotonic()
    found: list[CheckResult]
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
            CheckResult(rule, level, FAIL, f"the check broke off: {detail}") for rule, level in check.rules
        ]
    finally:
        audit.info = audit.info or probe.agent_info
        await probe.close()
    for result in found:
        if not result.elapsed:
            result.elapsed = time.monotonic() - started
        if probe.trace is not None:
            result.trace_event = probe.trace.event(
                "verdict", **{k: getattr(result, k) for k in ("rule", "level", "result", "evidence")}
            )
    return found
