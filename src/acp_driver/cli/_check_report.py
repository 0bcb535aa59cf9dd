"""What ``acp-driver check`` tells: progress while it works (stderr), then the verdict.

- **Progress** on stderr: a line when a check starts (what it does, and how long it may wait)
  and one per rule as it is decided; on a terminal, one status line redrawn in place instead.
- **The verdict**: which rules count (MUST; every level with ``--strict``; n/a never), the last
  line naming the counts and the rules' ids ("2 MUST failed: cancel-stop-reason,
  held-prompt-withdrawn; 1 skipped: permission-cancel"), and before it one line per failure
  saying what to change in the agent.
- **Machine-readable**: ``--json`` (each result with its stable ``id``) and ``--junit FILE``
  (JUnit XML: one test case per rule, so that CI shows each rule as a test).

Everything an agent said (evidence quotes it) is data: shown by the text rule on a terminal,
escaped by XML in ``--junit`` (characters XML cannot hold are replaced).
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, TextIO

from ._check_catalog import fix_of, rule_id
from ._check_rules import FAIL, MAY, MUST, NA, PASS, SHOULD, SKIP, CheckResult
from ._check_run import NOT_SET_UP, Audit
from ._text import shown

CLEAR_LINE = "\r\x1b[K"


class Progress:
    """Progress on stderr (``--quiet``: none). On a terminal one status line, redrawn in place;
    otherwise a line per check started and one per rule decided."""

    def __init__(self, opts: argparse.Namespace, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = not getattr(opts, "quiet", False)
        self.tty = self.enabled and _isatty(self.stream)
        self.timeout = opts.timeout
        self.running: dict[int, str] = {}
        self.drawn = False

    def started(self, audit: Audit, index: int) -> None:
        if not self.enabled:
            return
        title = audit.checks[index].title or audit.checks[index].run.__name__
        self.running[index] = title
        if self.tty:
            self._draw(audit)
        else:
            self._line(
                f"check {index + 1}/{len(audit.checks)}: {title}\u2026 (waiting up to {self.timeout:g} s)"
            )

    def decided(self, audit: Audit, index: int, found: list[CheckResult]) -> None:
        if not self.enabled:
            return
        self.running.pop(index, None)
        if self.tty:
            self._draw(audit)
            return
        done = len(audit.results) - len(found)
        for n, result in enumerate(found, done + 1):
            self._line(
                f"rule {n}/{audit.total}: {rule_id(result.rule)} {result.result.upper()} ({result.level})"
            )

    def finish(self) -> None:
        """Clear the status line (a terminal's), before the table or the verdict is written."""
        if self.tty and self.drawn:
            self.stream.write(CLEAR_LINE)
            self.stream.flush()
            self.drawn = False

    def _draw(self, audit: Audit) -> None:
        decided = len(audit.results)
        doing = ", ".join(self.running.values())
        now = f"; {doing}\u2026 (waiting up to {self.timeout:g} s)" if doing else ""
        line = f"check: {decided}/{audit.total} rules decided{now}"
        width = _width(self.stream)
        if len(line) > width - 1:
            line = line[: max(width - 2, 10)] + "\u2026"
        self.stream.write(CLEAR_LINE + line)
        self.stream.flush()
        self.drawn = True

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _width(stream: TextIO) -> int:
    """The terminal's width: ``$COLUMNS``, else the terminal's own, else 80."""
    import os

    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns if columns > 0 else 80


@dataclass
class Verdict:
    """The audit's verdict over the rules that count."""

    verdict: str
    """``passed``, ``failed`` or ``inconclusive``."""
    levels: tuple[str, ...]
    failed: list[CheckResult]
    skipped: list[CheckResult]
    not_applicable: list[CheckResult]
    passed: list[CheckResult]
    hint: str | None

    @property
    def levels_text(self) -> str:
        return "MUST, SHOULD and MAY" if len(self.levels) > 1 else "MUST"

    def last_line(self) -> str:
        """Counts and rule ids: "2 MUST failed: a, b; 1 skipped: c"."""
        levels = "MUST/SHOULD/MAY" if len(self.levels) > 1 else "MUST"
        skipped = f"{len(self.skipped)} skipped: {_ids(self.skipped)}" if self.skipped else ""
        na = (
            f"{len(self.not_applicable)} not applicable: {_ids(self.not_applicable)}"
            if self.not_applicable
            else ""
        )
        if self.verdict == "failed":
            return "; ".join(
                x for x in (f"{len(self.failed)} {levels} failed: {_ids(self.failed)}", skipped, na) if x
            )
        if self.verdict == "inconclusive":
            head = f"inconclusive: {len(self.skipped)} {self.levels_text} rule(s) skipped, nothing failed ({_ids(self.skipped)})"
            return "; ".join(x for x in (head, na, self.hint or "") if x)
        tail = f" ({len(self.passed)} passed; {na})" if na else f" ({len(self.passed)} passed)"
        return f"every {self.levels_text} rule passed{tail}"

    def tally(self) -> str:
        """The counts so far, claiming no verdict (an interrupted audit)."""
        levels = "MUST/SHOULD/MAY" if len(self.levels) > 1 else "MUST"
        failed = f"{len(self.failed)} {levels} failed" + (f": {_ids(self.failed)}" if self.failed else "")
        return f"{failed}; {len(self.skipped)} skipped; {len(self.passed)} passed"


def _ids(results: list[CheckResult]) -> str:
    return ", ".join(dict.fromkeys(rule_id(r.rule) for r in results))


def judge(results: list[CheckResult], strict: bool) -> Verdict:
    """The verdict: failed if a rule that counts failed; inconclusive if none failed but one was
    skipped (untested); passed otherwise. A rule not applicable to the agent never counts."""
    levels = (MUST, SHOULD, MAY) if strict else (MUST,)
    counted = [r for r in results if r.level in levels]
    failed = [r for r in counted if r.result == FAIL]
    skipped = [r for r in counted if r.result == SKIP]
    verdict = "failed" if failed else "inconclusive" if skipped else "passed"
    return Verdict(
        verdict,
        levels,
        failed,
        skipped,
        [r for r in counted if r.result == NA],
        [r for r in counted if r.result == PASS],
        hint(skipped) if verdict == "inconclusive" else None,
    )


BUSY_WORDS = ("--busy-prompt", "--busy-after")


def hint(skipped: list[CheckResult]) -> str:
    """What to pass so that the skipped rules get tested: read off each skip's own reason (a busy
    rule that passed never asks for a longer --busy-prompt)."""
    wants = []
    if any(r.evidence.startswith(NOT_SET_UP) for r in skipped):
        wants.append("a longer --start-timeout (a fresh agent did not start or initialize in time)")
    reasons = [r.evidence for r in skipped if not r.evidence.startswith(NOT_SET_UP)]
    if any(any(word in e for word in BUSY_WORDS) for e in reasons):
        wants.append(
            "a --busy-prompt that keeps the agent busy longer (or --busy-after SEC for a silent agent)"
        )
    if any("--permission-prompt" in e or "permission request" in e for e in reasons):
        wants.append(
            "a --permission-prompt that makes it ask permission (or a --mode that asks, or --terminal)"
        )
    if any("--quick-prompt" in e for e in reasons):
        wants.append("a --quick-prompt the agent answers within --timeout")
    return "pass " + " and ".join(wants) if wants else "see the evidence of the skipped rules"


def fix_lines(results: list[CheckResult]) -> list[str]:
    """One line per failed rule (any level): what to change in the agent."""
    lines = []
    for rule in dict.fromkeys(r.rule for r in results if r.result == FAIL):
        level = next(r.level for r in results if r.rule == rule)
        lines.append(f"fix {rule_id(rule)} ({level}): {fix_of(rule)}")
    return lines


def json_results(results: list[CheckResult]) -> list[dict[str, Any]]:
    return [
        {
            "id": rule_id(r.rule),
            "rule": r.rule,
            "level": r.level,
            "result": r.result,
            "evidence": r.evidence,
            "elapsedMs": round(r.elapsed * 1000, 1),
            **({"fix": fix_of(r.rule)} if r.result == FAIL else {}),
            **({"traceEvent": r.trace_event} if r.trace_event is not None else {}),
        }
        for r in results
    ]


_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value: object) -> str:
    """Text XML 1.0 can hold: every other character (controls, lone surrogates) becomes U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(value))


def junit_document(
    results: list[CheckResult], verdict: Verdict, agent: str, version: int | None, interrupted: bool = False
) -> bytes:
    """JUnit XML: a ``testsuites`` with one ``testsuite`` (the audit) and one ``testcase`` per rule
    (``classname`` the level, ``name`` the id): a failure that counts is a ``failure``, one that
    does not (a SHOULD without ``--strict``) passes with its evidence in ``system-out``; a skipped
    or not applicable rule is ``skipped``."""
    suite_name = f"acp-driver check v{version}" if version is not None else "acp-driver check"
    failures = [r for r in results if r.result == FAIL and r.level in verdict.levels]
    skipped = [r for r in results if r.result in (SKIP, NA)]
    total = sum(r.elapsed for r in results)
    suites = ET.Element(
        "testsuites",
        name="acp-driver check",
        tests=str(len(results)),
        failures=str(len(failures)),
        errors="0",
        skipped=str(len(skipped)),
        time=f"{total:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=suite_name,
        tests=str(len(results)),
        failures=str(len(failures)),
        errors="0",
        skipped=str(len(skipped)),
        time=f"{total:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("agent", agent),
        ("protocolVersion", "" if version is None else str(version)),
        ("verdict", "interrupted" if interrupted else verdict.verdict),
    ):
        ET.SubElement(properties, "property", name=name, value=_xml_text(value))
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"acp-driver check.{r.level}",
            name=rule_id(r.rule),
            time=f"{r.elapsed:.3f}",
        )
        evidence = _xml_text(r.evidence)
        if r.result == FAIL and r.level in verdict.levels:
            failure = ET.SubElement(case, "failure", message=_xml_text(r.rule), type=r.level)
            failure.text = f"{evidence}\nfix: {fix_of(r.rule)}"
        elif r.result == SKIP:
            ET.SubElement(case, "skipped", message=evidence)
        elif r.result == NA:
            ET.SubElement(case, "skipped", message=f"not applicable: {evidence}")
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"{r.result.upper()} ({r.level}): {_xml_text(r.rule)}: {evidence}"
    ET.indent(suites)
    body: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body + b"\n"


def render_table(
    results: list[CheckResult], name: str, version: int | None, stream: TextIO | None = None
) -> None:
    """The rules as a table: id, level, result, evidence (the agent's words as text, never markup)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False, file=stream)
    rules = f"ACP v{version} rules" if version is not None else "rules"
    table = Table(title=Text(f"cancellation audit of {name} ({rules})"), show_lines=False)
    for column in ("rule", "level", "result", "evidence"):
        table.add_column(column, overflow="fold")
    colours = {PASS: "green", FAIL: "red", SKIP: "yellow", NA: "dim"}
    for r in results:
        seen = "" if r.trace_event is None else f" [trace #{r.trace_event}]"
        evidence = Text(shown(r.evidence) + seen)
        label = Text(f"{rule_id(r.rule)}\n", style="bold")
        label.append(r.rule)
        table.add_row(label, Text(r.level), Text(r.result.upper(), colours[r.result]), evidence)
    console.print(table)
