"""Interop fixtures: the official ACP Python SDK (``agent-client-protocol``, import ``acp``) as a
peer in a subprocess, talking to our ``acp_driver.aio.Connection`` over real OS pipes; and the
official SDKs at pinned versions (Python 0.12.1 and 1.0.0rc3, TypeScript 2.4.0), installed by
the test setup into ``<repo>/.cache/interop/`` (fixture ``sdk``, see below); their ACP v2
(``acp.experimental.v2``, ``…/experimental/v2``) peer scripts (fixture ``v2_sdk``); and real
agents installed the same way: codex-acp and claude-agent-acp (npm), fast-agent and gptme (PyPI,
each in its own venv; ``test_echoing_agents.py``).

Without the SDK (or with one older than ``SDK_MIN``) every test here is SKIPPED with the reason
in pytest's summary (``-ra``), and so is every test whose peer cannot be installed; set
``ACP_INTEROP_REQUIRED=1`` to make that a failure instead. ``ACP_INTEROP_TRACE=1`` (with ``-s``)
prints both sides' view of the wire after each test; ``ACP_INTEROP_CACHE`` moves the peer cache.

The helpers live next to it, one concept each: ``installs.py`` (the pins, the cache, the lock,
``PeerInstaller``), ``sdk_peers.py`` (the skip-or-fail rule, ``SdkPeer``, ``V2Sdk``),
``pipe_peer.py`` (the SDK ``Connection`` peer over pipes), ``peer_scripts.py`` (running a peer
script); the schema checks are ``schema_check.py`` and ``schema_check_v2.py``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_driver.aio import Connection

from .installs import (
    CACHE_DIR,
    CLAUDE_AGENT_ACP_PACKAGE,
    CLAUDE_AGENT_ACP_VERSION,
    InstallError,
    NpmAgent,
    PeerInstaller,
)
from .pipe_peer import Peer, Trace, reap, spawn
from .schema_check_v2 import SCHEMA_IN_PACKAGE, V2Schema
from .schema_check_v2 import load as load_v2_schema
from .sdk_peers import (
    PEER_IDS,
    V2_KINDS,
    SdkPeer,
    V2Sdk,
    not_run,
    python_sdk_or_skip,
    sdk_problem,
    typescript_sdk_or_skip,
    v2_sdk_or_skip,
)


@pytest.fixture(autouse=True)
def _require_sdk() -> None:
    problem = sdk_problem()
    if problem is not None:
        not_run(problem)


@pytest.fixture(params=["pipes", "streams"])
async def sdk_peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    """Our ``Connection`` attached to a subprocess running the official SDK's ``Connection``."""
    transport: str = request.param
    stderr_path = tmp_path / "sdk_peer.stderr"
    trace = Trace()
    conn = Connection(name=f"ours-{transport}", tracer=trace)
    with stderr_path.open("wb") as stderr_file:
        proc, reader, writer = await spawn(transport, stderr_file)
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
            exited_cleanly = await reap(proc)
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


@pytest.fixture(scope="session")
def interop_peers() -> PeerInstaller:
    """The session's peer installer: ``.python_sdk(version)``, ``.typescript_sdk()``."""
    return PeerInstaller(CACHE_DIR)


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
