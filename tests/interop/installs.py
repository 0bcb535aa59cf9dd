"""Peers installed by the interop tests' setup: the official SDKs at pinned versions, and two real
agents, in a cache folder.

``<repo>/.cache/interop/`` (git-ignored; ``ACP_INTEROP_CACHE`` overrides it) holds one venv per
Python SDK version (``python -m venv`` + pip) and one npm folder for the TypeScript SDK and
``ws`` (run with the machine's ``node``), and one per real agent (an npm folder, or a venv for
one published on PyPI). Each is reused when the installed
version matches the pin, and installed at most once per test session (under a file lock, so
parallel sessions do not race). What cannot be installed raises ``InstallError``; the fixtures
(``conftest.py``, ``sdk_peers.py``) make that a SKIP with the reason -- or a FAIL with
``ACP_INTEROP_REQUIRED=1``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

SDK_DIST = "agent-client-protocol"
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("ACP_INTEROP_CACHE") or REPO_ROOT / ".cache" / "interop")
PY_SDK_VERSIONS = ("0.12.1", "1.0.0rc3")
"""``agent-client-protocol`` versions tested: the latest stable and the 1.0 pre-release."""
TS_SDK_PACKAGE = "@agentclientprotocol/sdk"
TS_SDK_VERSION = "2.4.0"
TS_WS_PACKAGE = "ws"
TS_WS_VERSION = "8.23.1"
"""Installed next to the SDK: Node 20 has no global ``WebSocket``, so the remote peers
(``ts_remote_client.mjs``, ``ts_remote_server.mjs``) hand the SDK ``ws``'s classes."""
CODEX_ACP_PACKAGE = "@zed-industries/codex-acp"
CODEX_ACP_VERSION = "0.16.0"
"""A real agent, not built on an SDK's runtime we test elsewhere: Zed's Codex adapter (Rust; the
npm package is a node launcher for the native binary of the platform's optional package)."""
CLAUDE_AGENT_ACP_PACKAGE = "@agentclientprotocol/claude-agent-acp"
CLAUDE_AGENT_ACP_VERSION = "0.101.0"
"""A real agent serving ACP v1 and v2 on one binary (``CLAUDE_AGENT_ACP_PROTOCOL=auto|v1|v2``):
the Claude Agent SDK behind the TypeScript SDK's v2 API; the Claude Code binary comes in the
platform's optional npm package. Its manifest asks for Node 22; it runs on Node 20.3+."""
FAST_AGENT_DIST = "fast-agent-acp"
FAST_AGENT_VERSION = "0.10.48"
"""A real agent on PyPI (``fast-agent-mcp``, the fast-agent framework, behind the official Python
SDK), started as ``fast-agent acp`` (this release's own ``fast-agent-acp`` launcher imports a
module the wheel does not ship). It answers ``initialize`` with the client's ``protocolVersion``
while speaking v1. Needs Python 3.12+."""
FAST_AGENT_PYTHON = ((3, 12), (3, 16))
"""The Python versions fast-agent-acp accepts: at least the first, below the second."""
GPTME_DIST = "gptme-acp"
GPTME_VERSION = "0.35.1"
"""A real agent on PyPI (gptme's ACP adapter, on the official Python SDK 0.12.1), started as
``gptme-acp``; it too echoes the client's ``protocolVersion`` while speaking v1."""
NODE_MIN = (20, 3)  # the TS peers use AbortSignal.any
INSTALL_TIMEOUT = 150.0


class InstallError(Exception):
    """A peer could not be installed; the message says what failed."""


@dataclass(frozen=True)
class PythonSdk:
    version: str
    python: Path

    @property
    def has_cancel_request(self) -> bool:
        """``$/cancel_request`` support arrived in the SDK's 1.0 line."""
        return Version(self.version).release >= (1,)


@dataclass(frozen=True)
class NpmAgent:
    version: str
    argv: tuple[str, ...]
    """How to start it: the machine's node and the package's launcher."""


@dataclass(frozen=True)
class PythonAgent:
    version: str
    bin: Path
    """The agent's venv's scripts folder: its entry points are there."""


@dataclass(frozen=True)
class TypeScriptSdk:
    version: str
    node: Path
    folder: Path
    """Where ``npm install`` ran (holds ``node_modules/``): the peers' ``ACP_TS_SDK_DIR``."""


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _python_in(lowest: tuple[int, int], above: tuple[int, int]) -> Path:
    """A Python interpreter of this machine whose version is at least ``lowest`` and below
    ``above``: this one, a ``python3.N`` on PATH, or one that pyenv installed."""
    candidates = [sys.executable]
    candidates += [
        on_path for n in range(above[1] - 1, lowest[1] - 1, -1) if (on_path := shutil.which(f"python3.{n}"))
    ]
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        with contextlib.suppress(InstallError):
            root = Path(_run_install([pyenv, "root"], "pyenv root").strip())
            candidates += [str(p) for p in sorted(root.glob("versions/*/bin/python3"), reverse=True)]
    tried: list[str] = []
    for candidate in candidates:
        with contextlib.suppress(InstallError, ValueError):
            said = _run_install([candidate, "-c", "import sys; print(*sys.version_info[:2])"], "probe")
            version = tuple(int(part) for part in said.split())
            if lowest <= version < above:
                return Path(candidate)
            tried.append(f"{candidate} ({'.'.join(map(str, version))})")
    want = f"Python >= {'.'.join(map(str, lowest))}, < {'.'.join(map(str, above))}"
    raise InstallError(f"no {want} found (tried: {', '.join(tried) or 'none that runs'})")


def _run_install(argv: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise InstallError(f"{what}: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"{what}: timed out after {INSTALL_TIMEOUT:.0f}s") from exc
    if proc.returncode != 0:
        raise InstallError(
            f"{what} failed (exit status {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}"
        )
    return proc.stdout


def _install_in_venv(base: Path, venv: Path, dist: str, version: str) -> Path:
    """``dist==version`` alone in the venv ``venv`` made with the interpreter ``base`` (kept when
    it already holds that version); returns the venv's python."""
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    probe = [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"]
    if python.exists():
        with contextlib.suppress(InstallError):
            if _run_install(probe, "probe").strip() == version:
                return python
        shutil.rmtree(venv)
    requirement = f"{dist}=={version}"
    _run_install([str(base), "-m", "venv", str(venv)], f"{base} -m venv {venv}")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"]
    _run_install([*pip, requirement], f"pip install {requirement}")
    installed = _run_install(probe, f"checking {requirement}").strip()
    if installed != version:
        raise InstallError(f"pip installed {dist} {installed}, not {version}")
    return python


class PeerInstaller:
    """Installs (or reuses) each pinned peer once per session; remembers failures too."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self._done: dict[str, PythonSdk | TypeScriptSdk | NpmAgent | PythonAgent | InstallError] = {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.cache.mkdir(parents=True, exist_ok=True)
        with (self.cache / ".install.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _once(
        self, key: str, install: Callable[[], PythonSdk | TypeScriptSdk | NpmAgent | PythonAgent]
    ) -> Any:
        if key not in self._done:
            try:
                with self._locked():
                    self._done[key] = install()
            except InstallError as exc:
                self._done[key] = exc
            except OSError as exc:
                self._done[key] = InstallError(f"{type(exc).__name__}: {exc}")
        found = self._done[key]
        if isinstance(found, InstallError):
            raise found
        return found

    def python_sdk(self, version: str) -> PythonSdk:
        """A venv with ``agent-client-protocol==version``."""
        return self._once(f"py-{version}", lambda: self._install_python_sdk(version))  # type: ignore[no-any-return]

    def typescript_sdk(self) -> TypeScriptSdk:
        """A folder with ``@agentclientprotocol/sdk@TS_SDK_VERSION`` and the machine's node."""
        return self._once("ts", self._install_typescript_sdk)  # type: ignore[no-any-return]

    def codex_acp(self) -> NpmAgent:
        """``@zed-industries/codex-acp@CODEX_ACP_VERSION`` in its own npm folder."""
        return self._once(  # type: ignore[no-any-return]
            "codex-acp",
            lambda: self._install_npm_agent(
                CODEX_ACP_PACKAGE, CODEX_ACP_VERSION, "codex-acp", Path("bin", "codex-acp.js")
            ),
        )

    def claude_agent_acp(self) -> NpmAgent:
        """``@agentclientprotocol/claude-agent-acp@CLAUDE_AGENT_ACP_VERSION`` in its own npm folder."""
        return self._once(  # type: ignore[no-any-return]
            "claude-agent-acp",
            lambda: self._install_npm_agent(
                CLAUDE_AGENT_ACP_PACKAGE,
                CLAUDE_AGENT_ACP_VERSION,
                "claude-agent-acp",
                Path("dist", "index.js"),
            ),
        )

    def fast_agent(self) -> PythonAgent:
        """``fast-agent-acp==FAST_AGENT_VERSION`` in its own venv, on a Python it accepts."""
        return self._once(  # type: ignore[no-any-return]
            "fast-agent",
            lambda: self._install_python_agent(
                FAST_AGENT_DIST, FAST_AGENT_VERSION, "fast-agent", _python_in(*FAST_AGENT_PYTHON)
            ),
        )

    def gptme(self) -> PythonAgent:
        """``gptme-acp==GPTME_VERSION`` in its own venv."""
        return self._once(  # type: ignore[no-any-return]
            "gptme",
            lambda: self._install_python_agent(GPTME_DIST, GPTME_VERSION, "gptme", Path(sys.executable)),
        )

    def _install_python_agent(self, dist: str, version: str, folder_name: str, base: Path) -> PythonAgent:
        """An agent published on PyPI, installed alone in the venv ``<cache>/<folder_name>-<version>/``
        made with the interpreter ``base``."""
        venv = self.cache / f"{folder_name}-{version}"
        _install_in_venv(base, venv, dist, version)
        return PythonAgent(version, venv / ("Scripts" if os.name == "nt" else "bin"))

    def _install_npm_agent(self, name: str, version: str, folder_name: str, launcher_path: Path) -> NpmAgent:
        """An agent published on npm, installed alone in ``<cache>/<folder_name>-<version>/``;
        started as the machine's node running ``launcher_path`` (inside the package)."""
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            raise InstallError(f"no `node` and `npm` on PATH ({name}'s launcher runs on Node.js)")
        folder = self.cache / f"{folder_name}-{version}"
        package = folder / "node_modules" / Path(*name.split("/"))
        launcher = package / launcher_path

        def installed() -> str | None:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                return str(json.loads((package / "package.json").read_text())["version"])
            return None

        if installed() != version:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            (folder / "package.json").write_text(
                json.dumps({"name": "acp-driver-real-agents", "private": True}) + "\n"
            )
            spec = f"{name}@{version}"
            _run_install(
                [npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", spec],
                f"npm install {spec} (in {folder})",
                cwd=folder,
            )
            if installed() != version:
                raise InstallError(f"npm install {spec} left no {name} {version} in {folder}")
        if not launcher.exists():
            raise InstallError(f"{launcher} is missing")
        return NpmAgent(version, (node, str(launcher)))

    def _install_python_sdk(self, version: str) -> PythonSdk:
        venv = self.cache / f"python-sdk-{version}"
        return PythonSdk(version, _install_in_venv(Path(sys.executable), venv, SDK_DIST, version))

    def _install_typescript_sdk(self) -> TypeScriptSdk:
        node = shutil.which("node")
        if node is None:
            raise InstallError("no `node` on PATH (the TypeScript SDK peers run on Node.js)")
        raw = _run_install([node, "--version"], "node --version").strip()
        try:
            found = tuple(int(part) for part in raw.lstrip("v").split(".")[:2])
        except ValueError as exc:
            raise InstallError(f"cannot parse `node --version` output {raw!r}") from exc
        if found < NODE_MIN:
            need = ".".join(map(str, NODE_MIN))
            raise InstallError(f"node {raw} is too old: the TypeScript peers need Node.js {need}+")
        folder = self.cache / f"typescript-sdk-{TS_SDK_VERSION}"
        pins = {TS_SDK_PACKAGE: TS_SDK_VERSION, TS_WS_PACKAGE: TS_WS_VERSION}

        def installed(package: str) -> str | None:
            manifest = folder / "node_modules" / Path(*package.split("/")) / "package.json"
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                return str(json.loads(manifest.read_text())["version"])
            return None

        if all(installed(package) == version for package, version in pins.items()):
            return TypeScriptSdk(TS_SDK_VERSION, Path(node), folder)
        npm = shutil.which("npm")
        if npm is None:
            raise InstallError("no `npm` on PATH to install the TypeScript SDK")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "package.json").write_text(
            json.dumps({"name": "acp-driver-interop-peers", "private": True, "type": "module"}) + "\n"
        )
        specs = [f"{package}@{version}" for package, version in pins.items()]
        _run_install(
            [npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", *specs],
            f"npm install {' '.join(specs)} (in {folder})",
            cwd=folder,
        )
        for package, version in pins.items():
            have = installed(package)
            if have is None:
                raise InstallError(f"npm install {' '.join(specs)} left no readable {package} in {folder}")
            if have != version:
                raise InstallError(f"npm installed {package} {have}, not {version}")
        return TypeScriptSdk(TS_SDK_VERSION, Path(node), folder)
