"""Connections over regular files: the reader thread and blocking writes."""

from __future__ import annotations

import asyncio
import gc
import threading
import types
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_driver.aio import Connection, _ndjson

GENEROUS = 60.0


async def test_the_reader_thread_keeps_its_file_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller drops its file object before the thread first reads (as open_stdio did, and a
    # loaded machine does): the thread must still read every line, then see end of input.
    started = threading.Event()
    release = threading.Event()

    class LateThread(threading.Thread):
        def run(self) -> None:
            started.set()
            release.wait(GENEROUS)
            super().run()

    monkeypatch.setattr(_ndjson, "threading", types.SimpleNamespace(Thread=LateThread))
    inbox = tmp_path / "in.jsonl"
    inbox.write_bytes(
        b"".join(
            orjson.dumps({"jsonrpc": "2.0", "method": "note", "params": {"n": i}}) + b"\n" for i in range(3)
        )
    )
    seen: list[Any] = []
    conn = Connection(name="file")
    conn.on_notification("note", seen.append)
    reader = inbox.open("rb", buffering=0)
    with (tmp_path / "out.jsonl").open("wb", buffering=0) as writer:
        await _ndjson.open_pipes(conn, reader, writer)
        assert started.wait(GENEROUS)
        del reader
        gc.collect()
        release.set()
        await asyncio.wait_for(conn.wait_closed(), GENEROUS)  # end of input closes it
    assert seen == [{"n": 0}, {"n": 1}, {"n": 2}]
