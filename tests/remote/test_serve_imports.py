"""The server costs nothing to whoever does not serve: the stdio path never imports it, and
importing ``acp_driver.remote`` (or the server's names) loads no network library until a
server starts."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("hypercorn", "websockets", "httpx", "h2", "h11", "wsproto")


def _modules_after(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return modules


def test_the_cli_for_other_commands_loads_nothing_of_the_server() -> None:
    code = (
        "import sys\nfrom acp_driver.cli._main import build_parser\n"
        "build_parser().parse_args(['run', 'hello'])\nimport acp_driver.cli"
    )
    modules = _modules_after(code)
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
    assert [m for m in modules if m.startswith(("acp_driver.remote", "acp_driver.cli._serve"))] == []


def test_the_server_api_loads_no_network_library_until_a_server_starts() -> None:
    code = "from acp_driver.remote import RemoteServer, ServerSettings, serve_agent, serve_command"
    modules = _modules_after(code)
    assert "acp_driver.remote._server" in modules
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []


def test_the_public_names_are_what_all_says() -> None:
    import acp_driver.remote as remote

    for name in remote.__all__:
        assert getattr(remote, name) is not None, name
