"""One place per protocol difference: the code outside the profile (``core/_profile.py``), the
lifecycles (``core/_lifecycle.py``, the agent runtime's ``agent/_spans.py``) and negotiation
(``core/_negotiation.py``) does not ask "is this v2?". It asks the profile a named fact
(``holds_prompts``, ``modes_are_options``, how a turn's end reads: ``ending``...) or the
lifecycle.

This test counts what still reads as a branch on the version; each one left is listed with
why, and a new one fails until it is moved into the profile or a lifecycle (or added here with
its reason)."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "acp_driver"

HOMES = {"core/_profile.py", "core/_lifecycle.py", "core/_negotiation.py", "agent/_spans.py"}
"""Where version differences live."""

BRANCH = re.compile(
    r"version\s*[!=]=\s*[12]\b"  # version == 2, protocol_version != 1
    r"|TurnEnd\.(?:IDLE_STATE|PROMPT_ANSWER)"  # the profile's turn_end as a version flag
    r"|spans is (?:not )?None"  # v2's span tracker present or not
    r"|\bis V[12]\b"  # profile is V1
    r"|\bv2 = "  # v2 = <a version test>
)

ALLOWED: dict[str, int] = {
    # speaks_v1 is idempotent: an agent already spoken to in v1 has nothing to switch.
    "driver/_agent.py": 1,
}
"""File -> how many branches it may keep, and why (above)."""


def test_version_branches_live_in_the_profile_and_the_lifecycles() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in HOMES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if BRANCH.search(code):
                found.setdefault(rel, []).append(f"{rel}:{number}: {line.strip()}")
    extra = [hit for rel, hits in found.items() for hit in (hits if len(hits) > ALLOWED.get(rel, 0) else [])]
    assert not extra, "version branches outside the profile and the lifecycles:\n" + "\n".join(extra)
    assert sum(len(h) for h in found.values()) <= 5, "at most a handful, each with its reason above"
