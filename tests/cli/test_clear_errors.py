"""One clear line instead of a traceback: agent URLs no transport can use, the ``remote`` extra not
installed, a stdout that is full or closed, a current directory that was deleted, the reference
agent without stdin or stdout. Each case runs the CLI as a real process and checks that nothing
is left running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .clean import assert_clean, one_error_line
from .test_cli import CLI, group_gone, run

BAD_URLS = [
    ("ws://", "no host"),
    ("http://127.0.0.1:99999/acp", "Port out of range"),
    ("http://[::1/acp", "Invalid IPv6 URL"),
    ("wss://example.invalid:0/acp", "port 0"),
]


@pytest.mark.parametrize(("url", "reason"), BAD_URLS, ids=[u for u, _ in BAD_URLS])
@pytest.mark.parametrize("command", ["run", "chat", "check"])
def test_an_unusable_agent_url_is_a_usage_error(command: str, url: str, reason: str) -> None:
    args = {
        "run": ["run", "--agent", url, "hi"],
        "chat": ["chat", "--agent", url],
        "check": ["check", "--", url],
    }
    result = run(*args[command], timeout=60)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result.stderr)
    assert "not a usable agent URL" in line
    assert reason in line
    assert result.stdout == ""


HIDE_REMOTE = (
    "import sys\n"
    "for name in ('websockets', 'httpx', 'hypercorn'):\n"
    "    sys.modules[name] = None  # as if the remote extra were not installed\n"
    "from acp_driver.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--agent", "ws://127.0.0.1:9/acp", "hi"],
        ["chat", "--agent", "http://127.0.0.1:9/acp"],
        ["check", "--", "wss://127.0.0.1:9/acp"],
        ["serve", "--port", "0"],
    ],
    ids=["run", "chat", "check", "serve"],
)
def test_the_remote_extra_missing_says_how_to_install_it(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", HIDE_REMOTE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr
    line = one_error_line(result.stderr)
    assert "needs the remote extra" in line
    # This copy is an editable install of the checkout (the package is on no index): the hint
    # installs the extra from there, with this interpreter's pip.
    root = Path(__file__).resolve().parents[2]
    assert line.endswith(f"{sys.executable} -m pip install -e '{root}[remote]'"), line
    assert "pip install 'acp-driver[remote]'" not in line


def _fake_install(where: Path, direct_url: dict[str, Any] | None) -> Path:
    """A ``dist-info`` for acp-driver found before the real one, recording ``direct_url``."""
    info = where / "acp_driver-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acp-driver\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return where


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "file:///home/me/src/acp%20driver", "dir_info": {"editable": True}},
            "-e '/home/me/src/acp driver[remote]'",
        ),
        (
            {"url": "file:///tmp/acp_driver-0.1.0-py3-none-any.whl", "archive_info": {}},
            "'acp-driver[remote] @ file:///tmp/acp_driver-0.1.0-py3-none-any.whl'",
        ),
        (
            {"url": "https://example.org/acp-driver.git", "vcs_info": {"vcs": "git", "commit_id": "abc"}},
            "'acp-driver[remote] @ git+https://example.org/acp-driver.git'",
        ),
        (
            {"url": "file:///home/me/src/acp-driver", "dir_info": {}},
            "'acp-driver[remote] @ file:///home/me/src/acp-driver'",
        ),
        (None, "'acp-driver[remote]'"),
    ],
    ids=["editable", "wheel", "git", "directory", "index"],
)
def test_the_install_hint_follows_how_this_copy_was_installed(
    tmp_path: Path, direct_url: dict[str, Any] | None, expected: str
) -> None:
    site = _fake_install(tmp_path / "site", direct_url)
    code = f"import sys; sys.path.insert(0, {str(site)!r})\n" + HIDE_REMOTE
    result = subprocess.run(
        [sys.executable, "-c", code, "run", "--agent", "ws://127.0.0.1:9/acp", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr
    line = one_error_line(result.stderr)
    assert line.endswith(f"{sys.executable} -m pip install {expected}"), line


def agent_pid(stderr: str) -> int:
    found = re.search(r"\(pid (\d+)\)", stderr)
    assert found, stderr
    return int(found.group(1))


@pytest.mark.parametrize(
    "args",
    [["run", "hello"], ["run", "--json", "hello"], ["run", "/stream 200 20"], ["chat"]],
    ids=["run", "json", "streaming", "chat"],
)
def test_a_full_stdout_is_one_line_and_exit_1(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*CLI, *args],
            stdout=full,
            stderr=subprocess.PIPE,
            input="hello\n" if args == ["chat"] else None,
            stdin=None if args == ["chat"] else subprocess.DEVNULL,
            text=True,
            timeout=60,
            env={**os.environ, "NO_COLOR": "1"},
        )
    assert result.returncode == 1, result.stderr
    assert_clean(result.stderr)
    assert result.stderr.count("cannot write to stdout: No space left on device") == 1, result.stderr
    if "--json" not in args:
        assert group_gone(agent_pid(result.stderr))
    if args == ["run", "/stream 200 20"]:  # the turn had work left: it is cancelled, not run out
        assert "cancelling the turn (stdout failed)" in result.stderr
        assert "turn cancelled" in result.stderr


def test_check_with_a_full_stdout_is_one_line_and_exit_1() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*CLI, "check", "-q", "--timeout", "1.5"],  # -q: no progress lines on stderr
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1, result.stderr
    assert (
        one_error_line(result.stderr) == "acp-driver: error: cannot write to stdout: No space left on device"
    )


@pytest.mark.parametrize("command", [["run", "hello"], ["chat"], ["check"]], ids=["run", "chat", "check"])
def test_a_closed_stdout_is_refused_before_anything_starts(command: list[str]) -> None:
    result = subprocess.run(
        [*CLI, *command],
        stdout=None,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),  # ``>&-``
    )
    assert result.returncode == 1, result.stderr
    line = one_error_line(result.stderr)
    assert "stdout is closed" in line


def test_a_closed_stderr_does_not_stop_the_turn() -> None:
    result = subprocess.run(
        [*CLI, "run", "-vv", "hello"],  # logging too: to stderr, which is /dev/null now
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(2),  # ``2>&-``
    )
    assert result.returncode == 0
    assert result.stdout == "hello\n"


def test_a_deleted_current_directory_is_a_usage_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()

    def enter_then_delete() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    for args in (["run", "hello"], ["chat"], ["check", "--", "./my-agent"]):
        result = subprocess.run(
            [*CLI, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            preexec_fn=enter_then_delete,
        )
        assert result.returncode == 2, result.stderr
        assert "the current directory is not there any more" in one_error_line(result.stderr)
        gone.mkdir()
    # An absolute --cwd does not need it.
    result = subprocess.run(
        [*CLI, "run", "--cwd", str(tmp_path), "hello"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        preexec_fn=enter_then_delete,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello\n"


@pytest.mark.parametrize(("fd", "name"), [(0, "stdin"), (1, "stdout")])
def test_the_reference_agent_without_stdin_or_stdout_says_so(fd: int, name: str) -> None:
    result = subprocess.run(
        [*CLI, "agent"],
        stdin=subprocess.PIPE if fd != 0 else None,
        stdout=subprocess.PIPE if fd != 1 else None,
        stderr=subprocess.PIPE,
        timeout=60,
        preexec_fn=lambda: os.close(fd),
    )
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert one_error_line(err) == f"acp-driver agent: error: {name} is closed: an ACP agent " + (
        "reads its messages on stdin" if fd == 0 else "writes its messages on stdout"
    )


@pytest.mark.parametrize("agent", ["true", "false"])
def test_an_agent_that_exits_at_once_is_reported_with_its_status(agent: str) -> None:
    """Whichever the CLI notices first (the write that fails, the read that ends, the exit), the
    report names the exit status: every time, not half of the time."""
    status = "exit status 0" if agent == "true" else "exit status 1"
    for _ in range(8):
        result = run("run", "--agent", agent, "hi")
        assert result.returncode == 1, result.stderr
        line = one_error_line(result.stderr)
        assert (
            line
            == f"error: agent failed to start: agent {agent!r} failed to initialize: agent {status}; no stderr output"
        )
