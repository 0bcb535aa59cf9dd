from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ._helpers import FakeSession, RecordingTerminals, live_members


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The session's root directory (resolved: tmp_path may sit behind a symlink)."""
    path = tmp_path / "root"
    path.mkdir()
    return Path(os.path.realpath(path))


@pytest.fixture
def session(root: Path) -> FakeSession:
    return FakeSession("sess_1", str(root))


@pytest.fixture
async def terminals() -> AsyncIterator[RecordingTerminals]:
    service = RecordingTerminals(kill_grace=0.5, exit_output_grace=0.3)
    try:
        yield service
    finally:
        await service.aclose()
        leaks = {pgid: live_members(pgid) for pgid in service.pgids}
        leaks = {pgid: members for pgid, members in leaks.items() if members}
        for pgid in leaks:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert leaks == {}, f"process groups left alive: {leaks}"
