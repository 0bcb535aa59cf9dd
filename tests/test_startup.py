"""What a process imports at start-up: each layer only what it uses.

An agent (``acp-driver agent``, or any ``run_agent``) does not load the host's process
supervision nor the host's turn machine, and the reference agent started without options builds
no argument parser (argparse and, through its help formatter, shutil and the compression
modules). The packages export their names lazily (``acp_driver._lazy``); these tests check that
every exported name still resolves to its definition.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import acp_driver
import acp_driver.aio
import acp_driver.core
import acp_driver.trace

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
HOST_ONLY = (
    "acp_driver.trace",
    "acp_driver.aio._process",
    "acp_driver.aio._agent_process",
    "acp_driver.core._host_turn",
    "acp_driver.core._connection_end",
    "acp_driver.core._ladder",
    "acp_driver.aio._ladder_runner",
    "acp_driver.driver",
    "argparse",
    "shutil",
)


def test_the_host_only_modules_exist() -> None:
    """A renamed module would make the check below pass without checking anything."""
    import importlib.util

    assert [name for name in HOST_ONLY if importlib.util.find_spec(name) is None] == []


def test_the_reference_agent_loads_nothing_of_the_host_before_answering_initialize() -> None:
    # The agent prints the modules it has loaded once it answered (its stdin then ends).
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(sys.modules), file=sys.stderr))\n"
        "from acp_driver.cli import main\n"
        "raise SystemExit(main(['agent']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=INIT, capture_output=True, timeout=120, check=True
    )
    assert b'"result"' in done.stdout
    loaded = set(eval(done.stderr.decode().strip().splitlines()[-1]))
    assert "acp_driver.agent._runtime" in loaded  # the probe saw the agent
    assert sorted(loaded & set(HOST_ONLY)) == []


@pytest.mark.parametrize(
    "package", [acp_driver, acp_driver.aio, acp_driver.core, acp_driver.trace], ids=lambda m: m.__name__
)
def test_every_lazily_exported_name_resolves_to_its_definition(package: ModuleType) -> None:
    names = package.__all__
    assert names == sorted(names)
    assert dir(package) == names
    for name in names:
        if name == "__version__":
            continue
        value = getattr(package, name)
        home = importlib.import_module(getattr(value, "__module__", None) or package.__name__)
        assert getattr(home, name, value) is value, name
    with pytest.raises(AttributeError, match="no_such_name"):
        package.no_such_name  # noqa: B018
