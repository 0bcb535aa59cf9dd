"""The benchmark harness's environment: the paths, the venvs of acp-driver and each Python SDK, the
TypeScript SDK's npm install and node, the chart's matplotlib, the command and argv of each
column's host and agent, and what the machine is (CPU, cores, load, interpreters)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .matrix import SDK_NEW, SDK_OLD, TS_SDK

HERE = Path(__file__).resolve().parent.parent  # benchmarks/
ROOT = HERE.parent
WORK = HERE / ".work"
RUNNERS = HERE / "runners"
SRC = ROOT / "src"  # the acp_driver tree that runs (--src to try another one)

TS_PACKAGE = "@agentclientprotocol/sdk"


def use_src(src: Path) -> None:
    """Run acp-driver from ``src`` (a tree holding the ``acp_driver`` package) instead of the repo's."""
    global SRC
    SRC = src


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run_quiet(cmd: list[str], timeout: float = 900, **kw: Any) -> subprocess.CompletedProcess[str]:
    log("$ " + shlex.join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise SystemExit(
            f"[bench] command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path, packages: list[str], check: str) -> Path:
    """A venv under .work with ``packages``; reused when ``check`` (python code) succeeds in it."""
    py = venv_python(venv)
    if (
        py.exists()
        and subprocess.run([str(py), "-c", check], capture_output=True, timeout=120).returncode == 0
    ):
        return py
    if venv.exists():
        shutil.rmtree(venv)
    run_quiet([sys.executable, "-m", "venv", str(venv)])
    run_quiet([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages])
    if subprocess.run([str(py), "-c", check], capture_output=True, timeout=120).returncode != 0:
        raise SystemExit(f"[bench] {venv} does not pass its check after install: {check}")
    return py


def acp_driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    return env


def acp_driver_python() -> Path:
    """The current interpreter if it imports this repo's acp_driver (and orjson); else a bench venv
    with ``pip install -e`` of the repo."""
    check = (
        "import sys, acp_driver, orjson, pathlib; "
        f"sys.exit(0 if pathlib.Path(acp_driver.__file__).resolve().is_relative_to({str(SRC.resolve())!r}) else 1)"
    )
    here = subprocess.run(
        [sys.executable, "-c", check], env=acp_driver_env(), capture_output=True, timeout=120
    )
    if here.returncode == 0:
        return Path(sys.executable)
    return ensure_venv(WORK / "venv-acp-driver", ["-e", str(ROOT)], check)


def sdk_python(version: str) -> Path:
    check = (
        "import importlib.metadata as m, sys, acp, orjson; "
        f"sys.exit(0 if m.version('agent-client-protocol') == {version!r} else 1)"
    )
    return ensure_venv(WORK / f"sdk-{version}", [f"agent-client-protocol=={version}", "orjson"], check)


def node_binary() -> str | None:
    return shutil.which("node")


def ts_sdk_dir() -> Path:
    """npm install of the TypeScript SDK under .work/ts (reused when the version matches)."""
    base = WORK / "ts"
    pkg = base / "node_modules" / "@agentclientprotocol" / "sdk"
    try:
        if json.loads((pkg / "package.json").read_text())["version"] == TS_SDK:
            return pkg
    except (OSError, ValueError, KeyError):
        pass
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("[bench] npm not found: cannot install the TypeScript SDK")
    base.mkdir(parents=True, exist_ok=True)
    (base / "package.json").write_text(
        json.dumps({"name": "acp-bench-ts", "private": True, "type": "module"})
    )
    run_quiet([npm, "install", "--no-audit", "--no-fund", f"{TS_PACKAGE}@{TS_SDK}"], cwd=base)
    return pkg


def chart_python() -> Path:
    check = "import matplotlib"
    if subprocess.run([sys.executable, "-c", check], capture_output=True, timeout=120).returncode == 0:
        return Path(sys.executable)
    return ensure_venv(WORK / "chart", ["matplotlib"], check)


def commands(impls: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The command and environment that runs each implementation's host runner."""
    out: dict[str, tuple[list[str], dict[str, str]]] = {}
    if "acp-driver" in impls or "ceiling" in impls:
        py = str(acp_driver_python())
        env = acp_driver_env()
        out["acp-driver"] = ([py, str(RUNNERS / "acp_driver_host.py")], env)
        out["ceiling"] = ([py, str(RUNNERS / "ceiling_host.py")], env)
    for version in (SDK_OLD, SDK_NEW):
        if f"sdk-{version}" in impls:
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            out[f"sdk-{version}"] = ([str(sdk_python(version)), str(RUNNERS / "sdk_host.py")], env)
    if f"ts-{TS_SDK}" in impls:
        node = node_binary()
        if node is None:
            raise SystemExit(
                "[bench] node not found: cannot run the TypeScript SDK (leave it out with --only)"
            )
        env = dict(os.environ, ACP_TS_SDK_DIR=str(ts_sdk_dir()))
        out[f"ts-{TS_SDK}"] = ([node, str(RUNNERS / "ts_host.mjs")], env)
    return {k: v for k, v in out.items() if k in impls}


def agent_argv(impl: str, host_cmds: dict[str, tuple[list[str], dict[str, str]]]) -> list[str]:
    """The argv of ``impl``'s own agent (what its host runner spawns), for the agent-only rows."""
    interpreter = host_cmds[impl][0][0]
    if impl == "acp-driver":
        return [interpreter, "-m", "acp_driver", "agent"]
    if impl in (f"sdk-{SDK_OLD}", f"sdk-{SDK_NEW}"):
        return [interpreter, str(HERE / "peers" / "sdk_agent.py")]
    if impl == f"ts-{TS_SDK}":
        return [interpreter, str(HERE / "peers" / "ts_agent.mjs")]
    return [interpreter, str(HERE / "peers" / "ceiling_agent.py")]


def machine_info(impl_cmds: dict[str, tuple[list[str], dict[str, str]]]) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "os": platform.platform(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    versions = {}
    for impl, (cmd, _env) in impl_cmds.items():
        if cmd[0].endswith("node"):
            versions[impl] = (
                "node " + subprocess.run([cmd[0], "--version"], capture_output=True, text=True).stdout.strip()
            )
        else:
            out = subprocess.run(
                [cmd[0], "-c", "import platform; print(platform.python_version())"],
                capture_output=True,
                text=True,
            )
            versions[impl] = "Python " + out.stdout.strip()
    info["interpreters"] = versions
    return info
