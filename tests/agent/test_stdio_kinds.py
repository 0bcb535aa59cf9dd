"""An agent's stdin and stdout need not be pipes: files and ``/dev/null`` work too.

epoll refuses regular files and devices such as ``/dev/null``, and asyncio's pipe transports
accept the latter anyway (the failure lands in a callback): an agent started with
``< /dev/null`` used to wait forever for input that had already ended.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REFERENCE = [sys.executable, "-m", "acp_driver", "agent"]
GENEROUS = 60  # seconds; the agent needs well under one


def test_an_agent_whose_stdin_is_dev_null_sees_end_of_input_and_exits() -> None:
    done = subprocess.run(
        REFERENCE,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=GENEROUS,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()


def test_an_agent_reads_requests_from_a_file_and_writes_answers_to_a_file(tmp_path: Path) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    inbox = tmp_path / "in.jsonl"
    inbox.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in requests))
    outbox = tmp_path / "out.jsonl"
    with inbox.open("rb") as stdin, outbox.open("wb") as stdout:
        done = subprocess.run(
            REFERENCE, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=GENEROUS, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    answers = [orjson.loads(line) for line in outbox.read_bytes().splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert answers[0]["result"]["protocolVersion"] == 1
    assert answers[1]["result"]["sessionId"]
