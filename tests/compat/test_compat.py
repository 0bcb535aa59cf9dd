"""Opt-in (``ACP_COMPAT=1``): the compatibility run against real agents installed from npm.

Installs the pinned agents into the compat cache (``$ACP_COMPAT_CACHE`` or ``compat/.cache``),
audits each against the stand-in model server, and writes the report to a temporary file (the
committed docs/compatibility.md is regenerated with ``python3 compat/run.py``).
``ACP_COMPAT_ONLY=gptme,fast-agent`` audits only those agents (``run.py --only``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_driver.core import ECHO_NOTE

ROOT = Path(__file__).resolve().parent.parent.parent

ECHOERS = ("fast-agent", "gptme")
"""The pinned agents that answer ``initialize`` with the client's own ``protocolVersion``."""

pytestmark = pytest.mark.skipif(os.environ.get("ACP_COMPAT") != "1", reason="opt-in: set ACP_COMPAT=1")


@pytest.mark.timeout(3600)
def test_every_agent_is_audited_with_its_turns_busy_and_permission_asked(tmp_path: Path) -> None:
    cache = Path(os.environ.get("ACP_COMPAT_CACHE", ROOT / "compat" / ".cache"))
    out = tmp_path / "compatibility.md"
    only = os.environ.get("ACP_COMPAT_ONLY")
    result = subprocess.run(
        [sys.executable, str(ROOT / "compat" / "run.py"), "--cache", str(cache), "--out", str(out)]
        + (["--only", only] if only else []),
        capture_output=True,
        text=True,
        timeout=3500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((cache / "results.json").read_text())
    doc = out.read_text()
    if only:
        assert set(report["documents"]) == set(only.split(",")), report["documents"].keys()
    for name, document in report["documents"].items():
        assert document["verdict"] in ("passed", "failed", "inconclusive"), (name, document)
        by_rule = {r["rule"]: r for r in document["results"]}
        # The stand-in kept each busy turn going: the cancel rule was tested, not skipped.
        cancel = by_rule["session/cancel answered stopReason cancelled"]
        assert cancel["result"] != "skip", (name, cancel)
        # The permission rule is skipped exactly when the agent does not ask (seen outside the audit).
        permission = by_rule["cancel while a permission request is pending ends the prompt cancelled"]
        assert (permission["result"] == "skip") is (not document["tools"]["asked"]), (name, document["tools"])
        assert f"{name} {report['versions'][name]}" in doc
        # What --protocol auto (the default) settles: an agent echoing protocolVersion 2 in v1's
        # shape is spoken to in v1, with the note (fast-agent and gptme do), so the v1 rules audited
        # here are the ones it is judged by.
        negotiation = document["negotiation"]
        assert negotiation.get("spoken") in (1, 2), (name, negotiation)
        echoed = negotiation["answered"] == 2 and negotiation["spoken"] == 1
        assert negotiation["note"] == (ECHO_NOTE if echoed else None), (name, negotiation)
        if name in ECHOERS:
            assert echoed, (name, negotiation)
