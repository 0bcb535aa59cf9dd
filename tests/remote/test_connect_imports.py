"""The stdio path never imports the ``remote`` extra: ``import acp_driver.driver`` (and the CLI's
``run``) must not load websockets, httpx or hypercorn -- their import cost is paid by
``connect`` alone."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("websockets", "httpx", "hypercorn", "h2", "acp_driver.remote")


def test_the_stdio_path_does_not_import_the_remote_extra() -> None:
    code = "import acp_driver.driver, acp_driver.cli._run, acp_driver.cli._main; import sys; print(sorted(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(eval(out.stdout))
    assert not {m for m in loaded if m.split(".")[0] in HEAVY[:4] or m.startswith(HEAVY[4])}


def test_connect_imports_it_when_called() -> None:
    code = (
        "import asyncio, sys\n"
        "from acp_driver.driver import connect, AgentStartError\n"
        "async def main():\n"
        "    try:\n"
        "        await connect('ftp://127.0.0.1/acp')\n"
        "    except AgentStartError as exc:\n"
        "        print(exc)\n"
        "asyncio.run(main())\n"
        "print('websockets' in sys.modules, 'acp_driver.net._open' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines = out.stdout.splitlines()
    assert "not an ACP URL" in lines[0]
    assert lines[1] == "False True"  # the URL was refused before any transport was loaded
