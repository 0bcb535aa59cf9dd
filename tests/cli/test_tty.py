"""The CLI on a terminal: interactive permission questions, colour, and NO_COLOR (real pty)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "acp_driver"]


def run_on_pty(
    args: list[str], answers: dict[bytes, bytes], env: dict[str, str], timeout: float = 60
) -> tuple[int, bytes]:
    """Run the CLI with stdin/stdout/stderr on a pseudo-terminal; type ``answers[prompt]`` when
    ``prompt`` appears. Returns the exit code and everything the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*CLI, *args], stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    pending = dict(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                for prompt, answer in list(pending.items()):
                    if prompt in seen:
                        os.write(leader, answer)
                        del pending[prompt]
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return code, seen


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    env["COLUMNS"] = "100"
    return env


def test_permission_is_asked_interactively_on_a_tty() -> None:
    code, screen = run_on_pty(["run", "/permission"], {b"choose 1-2": b"1\n"}, base_env())
    assert code == 0, screen.decode(errors="replace")
    text = screen.decode(errors="replace")
    assert "The agent asks permission: Edit a pretend file" in text
    assert "1) Allow" in text
    assert "permission outcome: selected allow" in text


def test_rejecting_interactively() -> None:
    code, screen = run_on_pty(["run", "/permission"], {b"choose 1-2": b"2\n"}, base_env())
    assert code == 0
    assert "permission outcome: selected reject" in screen.decode(errors="replace")


def test_colour_on_a_tty_and_never_with_no_color() -> None:
    _code, coloured = run_on_pty(["run", "/tool grep"], {}, base_env())
    assert b"\x1b[" in coloured  # styled status lines on a terminal
    env = base_env()
    env["NO_COLOR"] = "1"
    _code, plain = run_on_pty(["run", "/tool grep"], {}, env)
    text = plain.decode(errors="replace")
    assert "grep" in text
    # No styling at all (no SGR: colour, bold, dim); cursor control of the spinner is allowed.
    assert re.search(r"\x1b\[[0-9;]*m", text) is None, repr(text)


def test_ctrl_c_closes_an_open_permission_question() -> None:
    """The question is on screen; Ctrl-C cancels the turn: the question closes by itself and
    the agent gets ``cancelled`` (no answer needed from the person)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "run", "/permission"], stdin=follower, stdout=follower, stderr=follower, env=base_env()
    )
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        interrupted = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                if not interrupted and b"choose 1-2" in seen:
                    proc.send_signal(signal.SIGINT)
                    interrupted = True
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = seen.decode(errors="replace")
    assert code == 130, text
    # This host cancelled the turn and answered the question cancelled: not the agent's withdrawal.
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "permission Edit a pretend file: cancelled (the turn was cancelled)" in plain
    assert "withdrawn" not in text
    assert "turn cancelled" in text
