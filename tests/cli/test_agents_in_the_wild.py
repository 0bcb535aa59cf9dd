"""What real agents need from the CLI: authentication (codex-acp answers ``session/new`` with
-32000 until ``authenticate``) and terminals sent as a whole shell line (Claude Code's adapters).
Real processes: the CLI and ``agents/stub.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "acp_driver"]
STUB = Path(__file__).parent / "agents" / "stub.py"


def stub(*options: str) -> str:
    return " ".join([sys.executable, str(STUB), *options])


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_auth_required_names_the_methods_and_the_flag() -> None:
    result = run("run", "--agent", stub("--auth", "secret-login"), "hi")
    assert result.returncode == 1
    assert "Authentication required" in result.stderr
    assert "the agent requires authentication: pass --auth METHOD_ID" in result.stderr
    assert "secret-login (Secret login)" in result.stderr
    assert "terminal-login (Log in from a terminal) — a terminal login" in result.stderr
    assert "stub-key (Use STUB_KEY) — set STUB_KEY in the environment" in result.stderr


def test_an_env_var_method_names_the_variable_when_it_is_unset() -> None:
    """codex-acp's ``codex-api-key`` answers a bare "Internal error" when CODEX_API_KEY is unset."""
    agent = stub("--auth", "secret-login")
    env = {k: v for k, v in os.environ.items() if k != "STUB_KEY"}
    unset = subprocess.run(
        [*CLI, "run", "--auth", "stub-key", "--agent", agent, "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert unset.returncode == 1
    assert "authenticate with 'stub-key' failed: Internal error" in unset.stderr
    assert "STUB_KEY not set: this method reads it from the environment" in unset.stderr
    env["STUB_KEY"] = "anything"
    given = subprocess.run(
        [*CLI, "run", "--auth", "stub-key", "--agent", agent, "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert given.returncode == 0, given.stderr
    assert given.stdout == "hi\n"


def test_auth_flag_authenticates_before_the_session() -> None:
    result = run("run", "--json", "--auth", "secret-login", "--agent", stub("--auth", "secret-login"), "hi")
    assert result.returncode == 0, result.stderr
    found = events(result.stdout)
    agent = next(e for e in found if e["type"] == "agent")
    assert [m["id"] for m in agent["authMethods"]] == ["secret-login", "terminal-login", "stub-key"]
    assert {"type": "note", "message": "authenticated with secret-login"} in found
    texts = [e["update"]["content"]["text"] for e in found if e["type"] == "update"]
    assert texts == ["hi\n"]
    assert found[-1]["resolution"] == "completed"


def test_auth_with_a_method_the_agent_does_not_offer() -> None:
    result = run("run", "--auth", "nope", "--agent", stub("--auth", "secret-login"), "hi")
    assert result.returncode == 1
    assert "--auth nope: the agent does not offer this method" in result.stderr
    assert "secret-login (Secret login)" in result.stderr


def test_a_terminal_method_is_never_sent_to_authenticate() -> None:
    """Spec: the client MUST NOT send ``authenticate`` for a ``terminal`` method."""
    result = run("run", "--auth", "terminal-login", "--agent", stub("--auth", "secret-login"), "hi")
    assert result.returncode == 1
    assert "--auth terminal-login is a terminal login" in result.stderr
    assert "--login" in result.stderr


def test_chat_and_check_take_auth() -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    chat = subprocess.run(
        [*CLI, "chat", "--auth", "secret-login", "--agent", stub("--auth", "secret-login")],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout == "hello\n"
    check = run(
        "check",
        "--json",
        "--timeout",
        "1.5",
        "--auth",
        "secret-login",
        "--",
        *stub("--auth", "secret-login").split(),
    )
    doc = json.loads(check.stdout)
    assert doc["agentInfo"]["name"] == "stub"
    assert not [r for r in doc["results"] if "Authentication required" in r["evidence"]], doc


def test_a_shell_line_without_args_runs_in_a_terminal() -> None:
    """Claude Code's adapters send ``terminal/create {"command": "<bash line>"}``, no ``args``."""
    result = run("run", "--agent", stub("--terminal", "'echo from the shell | tr a-z A-Z; exit 3'"), "x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "terminal started\nFROM THE SHELL\n"
