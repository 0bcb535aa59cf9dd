"""What a new user reads first: the ``--help`` texts and the docs' claims about names and versions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
COMMANDS = ["", "run", "chat", "check", "agent", "serve", "trace"]


def help_text(command: str, columns: int = 100) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    argv = [sys.executable, "-m", "acp_driver", *([command] if command else []), "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_rest_markup_and_fits_the_terminal(command: str) -> None:
    text = help_text(command)
    assert "``" not in text
    too_long = [line for line in text.splitlines() if len(line) > 100]
    assert too_long == []


def test_check_help_wraps_its_description() -> None:
    text = help_text("check", columns=80)
    description = text.split("\n\n")[1]
    assert description.startswith("Audit an agent's cancellation")
    assert len(description.splitlines()) >= 4
    assert max(len(line) for line in description.splitlines()) <= 80


def test_agent_help_keeps_its_tables_and_loses_the_markup() -> None:
    text = help_text("agent")
    assert "    /stream N MS        N message chunks, MS milliseconds apart" in text
    assert "In v2 (--protocol 2, or a client asking for 2)" in text
    assert "--behavior NAME" in text  # not the choices' 130-character list


def test_trace_help_explains_the_file_without_pointing_at_the_source_tree() -> None:
    text = help_text("trace")
    assert "docs/" not in text
    assert 'a header (kind "trace"' in text
    for kind in ("wire", "cancel", "rung", "resolved", "exit"):
        assert kind in text


OLD_PACKAGE = "@zed-industries/claude-code-acp"


def test_the_claude_package_named_is_the_one_the_compatibility_table_tests() -> None:
    compat = (ROOT / "compat" / "agents.py").read_text()
    tested = re.findall(r'package="(@[^"]*claude[^"]*)"', compat)
    assert tested
    assert tested == ["@agentclientprotocol/claude-agent-acp"] * len(tested)
    for path in (ROOT / "README.md", ROOT / "docs" / "cli.md"):
        text = path.read_text()
        assert OLD_PACKAGE not in text, path.name
        assert f"npx {tested[0]}" in text, path.name
    for command in ("", "run", "serve"):
        text = help_text(command)
        assert OLD_PACKAGE not in text


def test_the_agent_guide_says_which_versions_the_runtime_speaks() -> None:
    from acp_driver.agent import Agent

    text = (ROOT / "docs" / "agents.md").read_text()
    assert "speak version 1)" not in text
    assert Agent.protocol_versions == (1, 2)
    assert "the runtime speaks versions 1 and 2" in text


def test_no_doc_tells_to_install_from_an_index() -> None:
    """The package is on no package index: ``pip install 'acp-driver[remote]'`` cannot work."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    # (The CLI's hint names the index form in its docstring, as what would fail.)
    hint = ROOT / "src" / "acp_driver" / "_install.py"
    texts += [p for p in sorted((ROOT / "src" / "acp_driver").rglob("*.py")) if p != hint]
    wrong = re.compile(r"pip install\s+'?acp-driver\[")
    found = [f"{p.relative_to(ROOT)}: {m.group()}" for p in texts for m in wrong.finditer(p.read_text())]
    assert found == []
