"""What an agent sends is text: lone surrogates, rich markup and terminal control sequences in
its messages, thoughts, tool calls, plans, permission questions, names, errors and stderr are
shown as text -- never a crash, never markup, never a raw escape -- on every path (``run``,
``--json``, ``chat``, ``check``, a TTY). Real processes: the CLI and ``agents/stub.py`` writing
the raw JSON lines below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .clean import assert_clean
from .test_check import QUIRKY
from .test_cli import CLI, group_gone, json_lines, run
from .test_tty import base_env, run_on_pty

STUB = Path(__file__).parent / "agents" / "stub.py"

OSC_TITLE = "\x1b]0;pwned\x07"
"""Sets the terminal's title: must never reach a terminal as control."""
C1_CSI = "\u009b31m"
"""The 8-bit CSI (red): some terminals obey it."""


def update(body: dict[str, Any]) -> str:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "stub-session", "update": body},
    }
    return json.dumps(message)


SURROGATES = [
    # Lone surrogates are valid JSON escapes (JavaScript's JSON.stringify writes them).
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a\\ud800b\n"}}),
    update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t\\udfffu"}}),
    update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ti\\ud800tle", "status": "pending"}),
]

HOSTILE = [
    update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t2",
            "title": f"run {OSC_TITLE} x",
            "kind": "[/bold]\x1b[5m",
            "status": "[/red]\r",
        }
    ),
    update({"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": f"[bold]done{C1_CSI}"}),
    update(
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "[link=x]step[/link] \x1b[2J", "status": "pending"}],
        }
    ),
    update({"sessionUpdate": "session_info_update", "title": "[/]\x1b[31mred"}),
    update(
        {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "[/italic] \x1b]8;;x\x07"},
        }
    ),
    update(
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": f"say {OSC_TITLE}[/bold] :smile:\n"},
        }
    ),
]


def stub_with(tmp_path: Path, lines: list[str]) -> str:
    updates = tmp_path / "updates.jsonl"
    # json.dumps escaped the surrogates' backslashes once more: write the JSON text as the agent would.
    updates.write_text("\n".join(line.replace("\\\\u", "\\u") for line in lines) + "\n")
    return f"{sys.executable} {STUB} --updates {updates}"


def assert_no_raw_control(text: str) -> None:
    """Nothing the agent sent reaches the terminal as control (rich's own colours are CSI ``ESC [``
    with digits only, and never appear with NO_COLOR)."""
    assert "\x1b]" not in text
    assert "\x07" not in text
    assert "\u009b" not in text
    assert "\x1b[2J" not in text
    assert "\x1b[31m" not in text
    assert "\x1b[5m" not in text


def test_lone_surrogates_are_shown_replaced_and_kept_exact_in_json(tmp_path: Path) -> None:
    agent = stub_with(tmp_path, SURROGATES)
    console = run("run", "--agent", agent, "x")
    assert console.returncode == 0, console.stderr
    assert_clean(console.stderr)
    assert console.stdout == "a\ufffdb\n"
    assert "thinking: t\ufffdu" in console.stderr
    assert "ti\ufffdtle" in console.stderr
    as_json = run("run", "--json", "--agent", agent, "x")
    assert as_json.returncode == 0, as_json.stderr
    assert_clean(as_json.stderr)
    updates = [e["update"] for e in json_lines(as_json.stdout) if e["type"] == "update"]
    # The agent's text exactly as it sent it: JSON escapes read back as the same lone surrogates.
    assert updates[0]["content"]["text"] == "a\ud800b\n"
    assert updates[1]["content"]["text"] == "t\udfffu"
    assert updates[2]["title"] == "ti\ud800tle"
    assert json_lines(as_json.stdout)[-1]["resolution"] == "completed"


def test_markup_and_escapes_from_the_agent_are_shown_as_text(tmp_path: Path) -> None:
    agent = stub_with(tmp_path, HOSTILE)
    result = run("run", "--agent", agent, "x")
    assert result.returncode == 0, result.stderr
    assert_clean(result.stderr)
    assert_no_raw_control(result.stdout + result.stderr)
    assert "\x1b" not in result.stdout + result.stderr  # NO_COLOR, off a TTY: no escape at all
    assert (
        "run \u241b]0;pwned\u2407 x ([/bold]\u241b[5m, [/red]\u240d)" in result.stderr
    )  # ␛ ␇ ␍: visible, inert
    assert "run \u241b]0;pwned\u2407 x: [bold]done\ufffd31m" in result.stderr
    assert "[link=x]step[/link] \u241b[2J" in result.stderr
    assert "title: [/]\u241b[31mred" in result.stderr
    assert "thinking: [/italic] \u241b]8;;x\u2407" in result.stderr
    assert result.stdout == "say \u241b]0;pwned\u2407[/bold] :smile:\n"  # no markup, no emoji code


BIDI = [
    update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t3",
            "title": "rm notes\u202etxt.sh",
            "status": "pending",
        }
    ),
    update(
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "ok \u2067hidden\u2069 \u05e9\u05dc\u05d5\u05dd\u200f\n"},
        }
    ),
]


def test_bidi_overrides_from_the_agent_never_reorder_the_terminal(tmp_path: Path) -> None:
    """An override (U+202E) in a tool's title would show ``rm notes\u202etxt.sh`` as another
    command on a terminal that applies it: explicit embeddings, overrides and isolates are shown
    as U+FFFD; the marks right-to-left text uses (RLM) stay; ``--json`` keeps the data exact."""
    agent = stub_with(tmp_path, BIDI)
    result = run("run", "--agent", agent, "x")
    assert result.returncode == 0, result.stderr
    assert_clean(result.stderr)
    shown_text = result.stdout + result.stderr
    assert not any(ch in shown_text for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert "rm notes\ufffdtxt.sh" in result.stderr
    assert result.stdout == "ok \ufffdhidden\ufffd \u05e9\u05dc\u05d5\u05dd\u200f\n"
    as_json = run("run", "--json", "--agent", agent, "x")
    updates = [e["update"] for e in json_lines(as_json.stdout) if e["type"] == "update"]
    assert updates[0]["title"] == "rm notes\u202etxt.sh"


def test_json_output_keeps_the_agents_text_exact_and_inert(tmp_path: Path) -> None:
    agent = stub_with(tmp_path, HOSTILE)
    result = subprocess.run(
        [*CLI, "run", "--json", "--agent", agent, "x"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    raw = result.stdout.decode("utf-8")
    assert "\u009b" not in raw  # the 8-bit CSI is written as its JSON escape
    assert "\x1b" not in raw
    assert "\x07" not in raw
    updates = [e["update"] for e in json_lines(raw) if e["type"] == "update"]
    assert updates[1]["status"] == f"[bold]done{C1_CSI}"  # the data itself is exact
    assert updates[0]["title"] == f"run {OSC_TITLE} x"


def test_escapes_never_reach_a_terminal(tmp_path: Path) -> None:
    """On a real terminal, with colours on: the agent's escapes are shown, never obeyed."""
    agent = stub_with(tmp_path, HOSTILE)
    code, seen = run_on_pty(["run", "--agent", agent, "x"], {}, base_env())
    text = seen.decode("utf-8", "replace")
    assert code == 0, text
    assert "\x1b[" in text  # colours are on: the assertions below are not vacuous
    assert_no_raw_control(text)
    assert "\u241b]0;pwned\u2407" in text


def test_chat_shows_agent_text_as_text(tmp_path: Path) -> None:
    agent = stub_with(tmp_path, [*SURROGATES, *HOSTILE])
    result = subprocess.run(
        [*CLI, "chat", "--agent", agent],
        input="first\nsecond\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert_clean(result.stderr)
    assert_no_raw_control(result.stdout + result.stderr)
    assert result.stderr.count("turn completed") == 2
    assert result.stdout.count("a\ufffdb\n") == 2


def test_a_permission_question_shows_the_agents_title_as_text(tmp_path: Path) -> None:
    tool_call = tmp_path / "tool.json"
    tool_call.write_text(
        json.dumps({"toolCallId": "p1", "title": f"rm {OSC_TITLE}[/bold]", "kind": "[/red]"})
    )
    agent = f"{sys.executable} {STUB} --permission-from {tool_call}"
    code, seen = run_on_pty(["run", "--agent", agent, "x"], {b"choose 1-2": b"2\r"}, base_env())
    text = seen.decode("utf-8", "replace")
    assert code == 0, text
    assert "The agent asks permission: rm \u241b]0;pwned\u2407[/bold]" in text
    assert_no_raw_control(text)
    assert "Traceback" not in text


def test_an_agents_stderr_and_exit_are_reported_as_text() -> None:
    # The agent dies at once, leaving an escape sequence and markup on its stderr.
    agent = "sh -c 'printf \"\\033]0;pwned\\007 [/bold] boom\\n\" >&2; exit 3'"
    for args in (["run", "--agent", agent, "x"], ["run", "-vv", "--agent", agent, "x"]):
        result = run(*args)
        assert result.returncode == 1, result.stderr
        assert_clean(result.stderr)
        assert_no_raw_control(result.stderr)
        assert "\u241b]0;pwned\u2407 [/bold] boom" in result.stderr


def test_check_shows_agent_text_as_text() -> None:
    """The audit's table and JSON quote the agent (its name, its replies): as text."""
    agent = [*QUIRKY, "--name", f"[/bold]{OSC_TITLE}evil", "--stream", "5", "0"]
    table = run("check", "--timeout", "1.5", "--", *agent, timeout=120)
    assert table.returncode in (0, 6), table.stdout + table.stderr
    assert_clean(table.stderr)
    assert_no_raw_control(table.stdout + table.stderr)
    assert "cancellation audit of [/bold]\u241b]0;pwned\u2407evil" in table.stdout
    as_json = run("check", "--json", "--timeout", "1.5", "--", *agent, timeout=120)
    assert json.loads(as_json.stdout)["agentInfo"]["name"] == f"[/bold]{OSC_TITLE}evil"


def test_every_agent_is_reaped_after_odd_text(tmp_path: Path) -> None:
    agent = stub_with(tmp_path, [*SURROGATES, *HOSTILE])
    result = run("run", "--json", "--agent", agent, "x")
    pid = next(e["pid"] for e in json_lines(result.stdout) if e["type"] == "agent")
    assert group_gone(pid)
