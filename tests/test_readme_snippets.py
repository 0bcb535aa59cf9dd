"""The README's Python snippets (and the host guide's first one) run as written after the
README's set-up commands: with the project's venv python (``.venv/bin/python snippet.py``), the
venv not activated (its ``bin/`` is not on PATH), from a directory of the user's."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acp_driver.driver import launch

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", path.read_text(), re.S)


def the_block(path: Path, marker: str) -> str:
    found = [block for block in python_blocks(path) if marker in block]
    assert len(found) == 1, f"{path.name}: one python block with {marker!r}"
    return found[0]


def not_activated() -> dict[str, str]:
    """The environment of a shell where the venv was created, never activated."""
    venv_bin = str(Path(sys.executable).parent)
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(path or ["/usr/bin", "/bin"])
    return env


def run_snippet(source: str, where: Path) -> subprocess.CompletedProcess[str]:
    script = where / "snippet.py"
    script.write_text(source + "\n")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=where,
        env=not_activated(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_python_block_of_the_readme_is_one_of_these() -> None:
    """A new snippet gets a test here too."""
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) == 2
    assert any("launch(" in b for b in blocks)
    assert any("run_agent(" in b for b in blocks)


def test_drive_an_agent_runs_as_written(tmp_path: Path) -> None:
    result = run_snippet(the_block(ROOT / "README.md", "launch("), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
    assert "chunk 3/3" in result.stdout
    assert result.stdout.rstrip().endswith("end_turn completed")


def test_the_host_guides_first_example_runs_as_written(tmp_path: Path) -> None:
    result = run_snippet(
        the_block(ROOT / "docs" / "hosts.md", "agent_argv = reference_agent_argv()"), tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "resolved_by='session_cancel'" in result.stdout
    assert "stop_reason='cancelled'" in result.stdout


def test_write_an_agent_serves_a_host(tmp_path: Path) -> None:
    """The README's agent, started the way a host starts an agent, echoes the prompt's words."""
    script = tmp_path / "echo_agent.py"
    script.write_text(the_block(ROOT / "README.md", "run_agent(") + "\n")

    async def drive() -> tuple[str, str | None]:
        async with asyncio.timeout(60):
            async with await launch([sys.executable, str(script)], env=not_activated()) as agent:
                session = await agent.new_session(tmp_path)
                turn = session.prompt("cancellation always lands")
                texts = [u.text async for u in turn if u.kind == "agent_message_chunk"]  # type: ignore[attr-defined]
                return "".join(texts), (await turn).stop_reason

    text, stop_reason = asyncio.run(drive())
    assert text == "cancellation always lands "
    assert stop_reason == "end_turn"


def test_the_former_snippet_fails_with_a_reason_that_names_path(tmp_path: Path) -> None:
    """What the README used to say (``launch(["acp-driver", "agent"])``) without the venv
    activated: the error says the command is not on PATH."""
    if shutil.which("acp-driver", path=not_activated()["PATH"]):
        pytest.skip("an acp-driver is installed outside the venv")
    source = the_block(ROOT / "README.md", "launch(").replace(
        "reference_agent_argv()", '["acp-driver", "agent"]'
    )
    result = run_snippet(source, tmp_path)
    assert result.returncode != 0
    assert "AgentStartError: cannot start agent 'acp-driver': no 'acp-driver' on PATH" in result.stderr
