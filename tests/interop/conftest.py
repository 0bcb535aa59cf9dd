"""Interop fixtures: the official ACP Python SDK (``agent-client-protocol``, import ``acp``) as a
peer in a subprocess, talking to our ``acp_driver.aio.Connection`` over real OS pipes; and the
official SDKs at pinned versions (Python 0.12.1 and 1.0.0rc3, TypeScript 2.4.0), installed by
the test setup into ``<repo>/.cache/interop/`` (fixture ``sdk``, see below); their ACP v2
(``acp.experimental.v2``, ``…/experimental/v2``) peer scripts (fixture ``v2_sdk``); and two real
agents installed the same way, codex-acp and claude-agent-acp.

Without the SDK (or with one older than ``SDK_MIN``) every test here is SKIPPED with the reason
in pytest's summary (``-ra``), and so is every test whose peer cannot be installed; set
``ACP_INTEROP_REQUIRED=1`` to make that a failure instead. ``ACP_INTEROP_TRACE=1`` (with ``-s``)
prints both sides' view of the wire after each test; ``ACP_INTEROP_CACHE`` moves the peer cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from packaging.version import InvalidVersion, Version

from acp_driver.aio import Connection

from .schema_check_v2 import SCHEMA_IN_PACKAGE, V2Schema
from .schema_check_v2 import load as load_v2_schema

SDK_DIST = "agent-client-protocol"
SDK_MIN = "1.0.0rc3"
PEER_SCRIPT = Path(__file__).with_name("sdk_peer.py")
PEER_EXIT_TIMEOUT = 10.0


@functools.cache
def sdk_problem() -> str | None:
    """Why the official SDK cannot be used here, or None when it can."""
    wanted = f"{SDK_DIST}>={SDK_MIN} (import name 'acp')"
    try:
        import acp.connection
        import acp.stdio  # noqa: F401
    except ImportError as exc:
        return f"the official ACP Python SDK is not importable: need {wanted}; {exc!r}"
    try:
        installed = importlib.metadata.version(SDK_DIST)
    except importlib.metadata.PackageNotFoundError:
        return f"'acp' imports but the distribution {SDK_DIST!r} is not installed: need {wanted}"
    try:
        too_old = Version(installed) < Version(SDK_MIN)
    except InvalidVersion:
        return f"{SDK_DIST} has an unparsable version {installed!r}: need {wanted}"
    if too_old:
        return f"{SDK_DIST} {installed} is installed, the interop tests need {wanted}"
    return None


def not_run(problem: str) -> NoReturn:
    """Skip the test loudly with ``problem`` -- or fail it when ``ACP_INTEROP_REQUIRED`` is set."""
    message = f"INTEROP TESTS NOT RUN: {problem}"
    if os.environ.get("ACP_INTEROP_REQUIRED"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _require_sdk() -> None:
    problem = sdk_problem()
    if problem is not None:
        not_run(problem)


@dataclass
class Trace:
    """Every raw line our connection received ("in") or queued for the wire ("out")."""

    lines: list[tuple[str, float, bytes]] = field(default_factory=list)

    def __call__(self, direction: str, data: bytes) -> None:
        self.lines.append((direction, time.monotonic(), bytes(data)))

    def messages(self, direction: str) -> list[dict[str, Any]]:
        return [json.loads(data) for d, _, data in self.lines if d == direction]

    def timed(self, direction: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, json.loads(data)) for d, t, data in self.lines if d == direction]

    def dump(self) -> str:
        return "\n".join(f"{d:>3} {data.decode(errors='replace').rstrip()}" for d, _, data in self.lines)


@dataclass
class Peer:
    conn: Connection
    trace: Trace
    process: asyncio.subprocess.Process
    stderr_path: Path
    transport: str

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def report(self) -> str:
        """Both sides' view, for assertion messages."""
        return (
            f"--- our trace ({self.transport}) ---\n{self.trace.dump()}\n"
            f"--- SDK peer stderr ---\n{self.stderr()}"
        )


async def _spawn(transport: str, stderr: Any) -> tuple[asyncio.subprocess.Process, Any, Any]:
    """Start the SDK peer; return it and the (reader, writer) our side uses."""
    cmd = (sys.executable, "-u", str(PEER_SCRIPT))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if transport == "streams":
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        return proc, proc.stdout, proc.stdin
    # "pipes": plain os.pipe() pairs, driven by our own pipe transports (open_pipes).
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=child_in, stdout=child_out, stderr=stderr, env=env
        )
    except BaseException:
        for fd in (child_in, to_child, from_child, child_out):
            os.close(fd)
        raise
    os.close(child_in)
    os.close(child_out)
    reader = os.fdopen(from_child, "rb", buffering=0)
    writer = os.fdopen(to_child, "wb", buffering=0)
    return proc, reader, writer


async def _reap(proc: asyncio.subprocess.Process) -> int | None:
    """Wait for the peer to exit on its own (it does at end of input); kill it otherwise."""
    try:
        async with asyncio.timeout(PEER_EXIT_TIMEOUT):
            return await proc.wait()
    except TimeoutError:
        pass
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    return None


@pytest.fixture(params=["pipes", "streams"])
async def sdk_peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    """Our ``Connection`` attached to a subprocess running the official SDK's ``Connection``."""
    transport: str = request.param
    stderr_path = tmp_path / "sdk_peer.stderr"
    trace = Trace()
    conn = Connection(name=f"ours-{transport}", tracer=trace)
    with stderr_path.open("wb") as stderr_file:
        proc, reader, writer = await _spawn(transport, stderr_file)
    peer = Peer(conn, trace, proc, stderr_path, transport)
    exited_cleanly: int | None = None
    try:
        if transport == "streams":
            await conn.open_streams(reader, writer)
        else:
            try:
                await conn.open_pipes(reader, writer)
            except BaseException:
                reader.close()
                writer.close()
                raise
        async with asyncio.timeout(30):  # the peer is up and answering before the test starts
            await conn.request("echo", {"warm_up": True})
        yield peer
    finally:
        try:
            async with asyncio.timeout(10):
                await conn.aclose("test over")
        finally:
            exited_cleanly = await _reap(proc)
            if os.environ.get("ACP_INTEROP_TRACE"):
                print(f"\n=== {request.node.name} ===\n{peer.report()}")
    # Closing our side ends the peer's stdin: the SDK's main_loop must return and the peer exit 0.
    assert exited_cleanly == 0, (
        f"SDK peer did not exit cleanly after we closed (exit status {proc.returncode}, "
        f"{'killed' if exited_cleanly is None else 'exited'})\n{peer.report()}"
    )
    assert conn.violations == 0, (
        f"our connection saw {conn.violations} protocol violation(s)\n{peer.report()}"
    )


# ---------------------------------------------------------------------------------------------
# Peers installed by the test setup: the official SDKs at pinned versions, in a cache folder.
#
# ``<repo>/.cache/interop/`` (git-ignored; ``ACP_INTEROP_CACHE`` overrides it) holds one venv per
# Python SDK version (``python -m venv`` + pip) and one npm folder for the TypeScript SDK and
# ``ws`` (run with the machine's ``node``). Each is reused when the installed version matches the pin, and
# installed at most once per test session (under a file lock, so parallel sessions do not race).
# Whatever cannot be installed (no network, no node...) makes the tests that need it SKIP with
# the reason -- or FAIL with ``ACP_INTEROP_REQUIRED=1``.

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("ACP_INTEROP_CACHE") or REPO_ROOT / ".cache" / "interop")
PEERS_DIR = Path(__file__).with_name("peers")
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
NODE_MIN = (20, 3)  # the TS peers use AbortSignal.any
INSTALL_TIMEOUT = 150.0
SCRIPT_TIMEOUT = 60.0


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
class TypeScriptSdk:
    version: str
    node: Path
    folder: Path
    """Where ``npm install`` ran (holds ``node_modules/``): the peers' ``ACP_TS_SDK_DIR``."""


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


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
            f"{what} failed (exit status {proc.returncode}):\n{_tail(proc.stderr or proc.stdout)}"
        )
    return proc.stdout


class PeerInstaller:
    """Installs (or reuses) each pinned peer once per session; remembers failures too."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self._done: dict[str, PythonSdk | TypeScriptSdk | NpmAgent | InstallError] = {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.cache.mkdir(parents=True, exist_ok=True)
        with (self.cache / ".install.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _once(self, key: str, install: Callable[[], PythonSdk | TypeScriptSdk | NpmAgent]) -> Any:
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
        python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        probe = [str(python), "-c", f"import importlib.metadata as m; print(m.version({SDK_DIST!r}))"]
        if python.exists():
            with contextlib.suppress(InstallError):
                if _run_install(probe, "probe").strip() == version:
                    return PythonSdk(version, python)
            shutil.rmtree(venv)
        requirement = f"{SDK_DIST}=={version}"
        _run_install([sys.executable, "-m", "venv", str(venv)], f"python -m venv {venv}")
        _run_install(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-q",
                requirement,
            ],
            f"pip install {requirement}",
        )
        installed = _run_install(probe, f"checking {requirement}").strip()
        if installed != version:
            raise InstallError(f"pip installed {SDK_DIST} {installed}, not {version}")
        return PythonSdk(version, python)

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


@pytest.fixture(scope="session")
def interop_peers() -> PeerInstaller:
    """The session's peer installer: ``.python_sdk(version)``, ``.typescript_sdk()``."""
    return PeerInstaller(CACHE_DIR)


def python_sdk_or_skip(installer: PeerInstaller, version: str) -> PythonSdk:
    try:
        return installer.python_sdk(version)
    except InstallError as exc:
        problem = f"cannot install the Python SDK peer {SDK_DIST}=={version} into {installer.cache}: {exc}"
    not_run(problem)


def typescript_sdk_or_skip(installer: PeerInstaller) -> TypeScriptSdk:
    try:
        return installer.typescript_sdk()
    except InstallError as exc:
        problem = f"cannot install the TypeScript SDK peer {TS_SDK_PACKAGE}@{TS_SDK_VERSION}: {exc}"
    not_run(problem)


PEER_IDS = (*(f"python-sdk-{v}" for v in PY_SDK_VERSIONS), f"typescript-sdk-{TS_SDK_VERSION}")


@dataclass(frozen=True)
class SdkPeer:
    """One official SDK, ready to run a peer script written with it."""

    id: str
    kind: str
    """``python`` or ``typescript``."""
    version: str
    interpreter: Path
    env: dict[str, str]
    """What the peer scripts need in their environment (``ACP_TS_SDK_DIR``)."""
    has_cancel_request: bool
    """The SDK implements ``$/cancel_request`` (both directions)."""

    def script(self, role: str) -> list[str]:
        """argv running this SDK's ``agent`` or ``client`` peer script."""
        name = {"python": f"sdk_{role}.py", "typescript": f"ts_{role}.mjs"}[self.kind]
        return [str(self.interpreter), str(PEERS_DIR / name)]


@pytest.fixture(params=PEER_IDS)
def sdk(request: pytest.FixtureRequest, interop_peers: PeerInstaller) -> SdkPeer:
    """Each official SDK in turn (Python 0.12.1, Python 1.0.0rc3, TypeScript), installed."""
    peer_id: str = request.param
    if peer_id.startswith("python-sdk-"):
        version = peer_id.removeprefix("python-sdk-")
        py = python_sdk_or_skip(interop_peers, version)
        return SdkPeer(peer_id, "python", version, py.python, {}, py.has_cancel_request)
    ts = typescript_sdk_or_skip(interop_peers)
    return SdkPeer(peer_id, "typescript", ts.version, ts.node, {"ACP_TS_SDK_DIR": str(ts.folder)}, True)


@dataclass
class ScriptRun:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str

    def report(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit status {self.returncode}\n--- stderr ---\n{_tail(self.stderr, 60)}"

    def json(self) -> dict[str, Any]:
        """The one JSON object the peer script printed last on stdout."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            pytest.fail(f"the peer script printed nothing on stdout\n{self.report()}", pytrace=False)
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except ValueError:
            pytest.fail(
                f"the peer script's last line is not JSON: {lines[-1]!r}\n{self.report()}", pytrace=False
            )
        return result


async def run_script(
    argv: list[str],
    env: dict[str, str],
    timeout: float = SCRIPT_TIMEOUT,
    cwd: Path | None = None,
    drop: tuple[str, ...] = (),
) -> ScriptRun:
    """Run a peer script in its own process group; kill the whole group if it outlives ``timeout``.
    Its environment is ours (less the variables whose names start with one of ``drop``) plus ``env``."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(drop)} if drop else dict(os.environ)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**inherited, **env},
        cwd=cwd,
        start_new_session=True,
        limit=64 * 1024 * 1024,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = await proc.communicate()
        run = ScriptRun(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        pytest.fail(f"peer script still running after {timeout}s (killed)\n{run.report()}", pytrace=False)
    finally:
        # The script's own children (the agent it spawned) must not outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return ScriptRun(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def read_agent_trace(path: Path) -> list[tuple[str, str]]:
    """The (direction, raw line) pairs ``peers/traced_agent.py`` wrote, in wire order."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(e["d"], e["line"]) for e in entries]


# ---------------------------------------------------------------------------------------------
# ACP v2: the official SDKs' v2 peer scripts (peers/sdk_v2_*.py on the pinned Python SDK's
# venv, peers/ts_v2_*.mjs on the TypeScript SDK's folder), and claude-agent-acp.

V2_PY_SDK_VERSION = "1.0.0rc3"
"""The Python SDK release whose ``acp.experimental.v2`` the v2 peers use."""
V2_KINDS = ("python", "typescript")


@dataclass(frozen=True)
class V2Sdk:
    """One official SDK's ACP v2 peer scripts, ready to run."""

    kind: str
    """``python`` or ``typescript``."""
    version: str
    interpreter: Path
    env: dict[str, str]

    def script(self, role: str) -> list[str]:
        """argv running this SDK's v2 ``agent`` or ``client`` peer script."""
        name = {"python": f"sdk_v2_{role}.py", "typescript": f"ts_v2_{role}.mjs"}[self.kind]
        return [str(self.interpreter), str(PEERS_DIR / name)]


def v2_sdk_or_skip(installer: PeerInstaller, kind: str) -> V2Sdk:
    if kind == "python":
        py = python_sdk_or_skip(installer, V2_PY_SDK_VERSION)
        return V2Sdk("python", py.version, py.python, {})
    ts = typescript_sdk_or_skip(installer)
    return V2Sdk("typescript", ts.version, ts.node, {"ACP_TS_SDK_DIR": str(ts.folder)})


@pytest.fixture(params=V2_KINDS)
def v2_client(request: pytest.FixtureRequest, interop_peers: PeerInstaller) -> V2Sdk:
    """Each official SDK's v2 client script in turn."""
    return v2_sdk_or_skip(interop_peers, request.param)


@pytest.fixture(params=V2_KINDS)
def v2_agent(request: pytest.FixtureRequest, interop_peers: PeerInstaller) -> V2Sdk:
    """Each official SDK's v2 agent script in turn."""
    return v2_sdk_or_skip(interop_peers, request.param)


@pytest.fixture
def claude_agent(interop_peers: PeerInstaller) -> NpmAgent:
    """claude-agent-acp, installed (or the test is not run)."""
    try:
        return interop_peers.claude_agent_acp()
    except InstallError as exc:
        not_run(f"cannot install {CLAUDE_AGENT_ACP_PACKAGE}@{CLAUDE_AGENT_ACP_VERSION}: {exc}")


@pytest.fixture
def v2_sdk_python(interop_peers: PeerInstaller) -> V2Sdk:
    return v2_sdk_or_skip(interop_peers, "python")


@pytest.fixture
def v2_sdk_typescript(interop_peers: PeerInstaller) -> V2Sdk:
    return v2_sdk_or_skip(interop_peers, "typescript")


@pytest.fixture
def v2_schema(interop_peers: PeerInstaller) -> V2Schema:
    """The newest v2 schema: ``schema/v2/schema.json`` of the installed TypeScript SDK."""
    ts = typescript_sdk_or_skip(interop_peers)
    return load_v2_schema(ts.folder / SCHEMA_IN_PACKAGE)
