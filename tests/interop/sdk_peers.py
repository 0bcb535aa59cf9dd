"""The official SDKs as the tests use them: whether the ``acp`` SDK of the test environment can be
used at all, the skip-or-fail rule (``not_run``), each installed SDK as a peer (``SdkPeer``) and
its ACP v2 peer scripts (``V2Sdk``); what cannot be installed is not run, with the reason."""

from __future__ import annotations

import functools
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from packaging.version import InvalidVersion, Version

from .installs import (
    PY_SDK_VERSIONS,
    SDK_DIST,
    TS_SDK_PACKAGE,
    TS_SDK_VERSION,
    InstallError,
    PeerInstaller,
    PythonSdk,
    TypeScriptSdk,
)

SDK_MIN = "1.0.0rc3"
PEERS_DIR = Path(__file__).with_name("peers")


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
