"""The benchmark harness: ``benchmarks/run.py --quick`` for acp-driver and the ceiling, every row
printed, and the work counted by each runner equal across columns (issue 14, item 1).

No network: with ``--only acp-driver,ceiling`` the harness installs nothing (it runs both with this
interpreter and the repo's ``src``), and ``--no-chart --no-write`` leaves results.json and the docs
alone; ``--json`` puts the whole result document (work counts included) in a temporary file.
One harness run (module fixture, a few seconds) serves every test here.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
assert spec is not None
assert spec.loader is not None
harness = importlib.util.module_from_spec(spec)
sys.modules["bench_run"] = harness
spec.loader.exec_module(harness)

WORKLOAD_ROWS = [
    "1. sequential round trips",
    "concurrent requests",
    "4. session/update stream",
    "4v2. ACP v2 update stream: chunks until idle end_turn",
    "5. session/cancel → cancelled, p50",
    "5. session/cancel → cancelled, p99",
    "5v2. ACP v2 session/cancel → idle cancelled, p50",
    "5v2. ACP v2 session/cancel → idle cancelled, p99",
    "6. cold start",
    "6. cold start without the supervisor",
    "6. supervisor cost",
    "7. host RSS idle",
    "7. host RSS after the load",
    "7. agent RSS idle",
    "7. agent RSS after the load",
    "8. cancel storm",
    "8. cancel storm: ledger empty",
    "9. ignored cancel",
    "10. hung agent: cancel → SIGKILL → resolved",
    "H1. host only ↔ ceiling agent",
    "H8. host only ↔ ceiling agent: storm ledger empty",
    "H4v2. host only ↔ ceiling agent: ACP v2 update stream",
    "H5v2. host only ↔ ceiling agent: ACP v2 session/cancel → idle cancelled, p50",
    "A1. agent only ↔ ceiling host",
    "A8. agent only ↔ ceiling host: storm ledger empty",
    "A4v2. agent only ↔ ceiling host: ACP v2 update stream",
    "A5v2. agent only ↔ ceiling host: ACP v2 session/cancel → idle cancelled, p99",
    "C1. acp-driver run ↔ each agent: Ctrl-C → result line, p50",
    "C1. acp-driver run ↔ each agent: Ctrl-C → result line, p99",
]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict[str, Any]]:
    out_json = tmp_path_factory.mktemp("bench") / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            "acp-driver,ceiling",
            "--no-chart",
            "--no-write",
            "--json",
            str(out_json),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, proc.stderr, json.loads(out_json.read_text())


def test_quick_benchmark_runs_and_prints_every_workload(quick_run: tuple[str, str, dict[str, Any]]) -> None:
    out, err, _doc = quick_run
    header = out.splitlines()[0]
    for column in ("acp-driver", "ceiling", "PASS/FAIL"):
        assert column in header, out
    for row in WORKLOAD_ROWS:
        assert row in out, f"no {row!r} row in:\n{out}"
    assert out.count("concurrent requests") == 2, out
    table = out.split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:
        assert " error" not in line, f"a workload failed: {line}\n{err}"
    assert "targets:" in out
    assert "work: every column did the same work" in out, out


def test_every_column_does_the_same_work(quick_run: tuple[str, str, dict[str, Any]]) -> None:
    """Requests answered, updates received, ids answered: the same in every column of every row,
    and what the sizes ask for (so a column cannot skip work, nor all of them equally)."""
    _out, _err, doc = quick_run
    cfg = doc["sizes"]
    work = doc["work"]
    assert doc["work_equal"] is True
    assert doc["modes"] == ["pair", "host", "agent", "cli"]
    v2 = ["stream_v2", "cancel_v2"]  # benchmarks/v2.py: next to v1, in the same pairings
    split = [f"{p}{w}" for p in ("host:", "agent:") for w in [*harness.SPLIT_WORKLOADS, *v2]]
    pair = ["seq", "conc1k", "conc10k", "stream", "cancel", "storm", *v2]
    assert set(work["ceiling"]) == {*pair, "cli:ctrl_c"}
    assert set(work["acp-driver"]) == {*pair, "ignored", "hang", *split, "cli:ctrl_c"}
    for key, counts in work["acp-driver"].items():
        workload = key.split(":")[-1]
        unit, expected = harness.WORK_UNITS[workload]
        assert counts == [expected(cfg)], (key, unit, counts)
        # The ceiling's pair is the reference of the host-only and agent-only rows.
        reference = key if key.startswith("cli:") else workload
        if reference in work["ceiling"]:
            assert work["ceiling"][reference] == counts, (key, work["ceiling"][reference], counts)
    # The storm's self-check ran after every answer and held in every column of every pairing.
    results = doc["results"]
    for impl in ("acp-driver", "ceiling"):
        for prefix in ("", "host:", "agent:"):
            assert results[impl][f"{prefix}storm_ledger_empty"] is True, (impl, prefix)


def test_unequal_work_is_caught() -> None:
    """The harness's own check: one column short of answers in one run is reported."""
    cfg = dict(harness.SIZES["quick"], workloads=["seq", "stream"])
    full = {"seq": {"answered": cfg["seq"]}, "stream": {"updates": cfg["stream"]}}
    short = {"seq": {"answered": cfg["seq"]}, "stream": {"updates": cfg["stream"] - 1}}
    runs = {
        "ceiling": [{"mode": "pair", "work": full}],
        "acp-driver": [{"mode": "pair", "work": full}, {"mode": "host", "work": short}],
    }
    table, mismatches = harness.check_work(runs, cfg)
    assert table["acp-driver"]["host:stream"] == [cfg["stream"] - 1]
    assert mismatches == [
        f"acp-driver (host) stream: updates = {cfg['stream'] - 1}, every column must have {cfg['stream']}"
    ]
    runs["acp-driver"][1]["work"] = {"seq": full["seq"]}  # a count not reported is a mismatch too
    assert harness.check_work(runs, cfg)[1] == [
        f"acp-driver (host) stream: updates = None, every column must have {cfg['stream']}"
    ]


def run_v2_runner(impl: str, agent: list[str], workloads: list[str], tmp_path: Path) -> dict[str, Any]:
    """One v2 runner process (acp-driver's or the ceiling's v2 host) driving ``agent``."""
    cmd, env = harness.commands([impl])[impl]
    runner = harness.bench_v2.jobs([impl], ["pair"], {impl: (cmd, env)}, (cmd, env))[0][2]
    cfg = dict(harness.SIZES["quick"], cancel=3, stream=20, workloads=workloads, agent=agent)
    proc = subprocess.run(
        [*runner, "--config", json.dumps(cfg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("impl", ["acp-driver", "ceiling"])
def test_a_v2_cancel_counts_only_when_the_idle_says_cancelled(impl: str, tmp_path: Path) -> None:
    """The v2 cancel row's self-check: an agent that stops on the cancel but idles ``end_turn``
    (the reference agent's ``end-turn-on-cancel``) confirmed no cancel, and the harness says so."""
    agent = [
        sys.executable,
        "-m",
        "acp_driver",
        "agent",
        "--protocol",
        "2",
        "--behavior",
        "end-turn-on-cancel",
    ]
    result = run_v2_runner(impl, agent, ["cancel_v2"], tmp_path)
    assert result["work"] == {"cancel_v2": {"cancelled": 0}}, result
    cfg = dict(harness.SIZES["quick"], cancel=3, workloads=["cancel_v2"])
    run = dict(result, mode="pair", protocol=2)
    assert harness.check_work({impl: [run]}, cfg)[1] == [
        f"{impl} (pair) cancel_v2: cancelled = 0, every column must have 3"
    ]


@pytest.mark.parametrize("impl", ["acp-driver", "ceiling"])
def test_a_v2_stream_must_end_in_an_idle_end_turn(impl: str, tmp_path: Path) -> None:
    """The v2 stream row's self-check: a turn whose idle reports no stop reason is an error of the
    row, not a number."""
    agent = [
        sys.executable,
        "-m",
        "acp_driver",
        "agent",
        "--protocol",
        "2",
        "--behavior",
        "idle-without-reason",
    ]
    result = run_v2_runner(impl, agent, ["stream_v2"], tmp_path)
    assert "stream_v2" in result["errors"], result
    assert "stream_v2_ups" not in result["results"], result


def test_v2_rows_sit_next_to_their_v1_rows() -> None:
    metrics = [row[0] for row in harness.rows(harness.SIZES["quick"])]
    for p in ("", "host:", "agent:"):
        assert metrics[metrics.index(f"{p}stream_ups") + 1] == f"{p}stream_v2_ups"
        i = metrics.index(f"{p}cancel_p99_ms")
        assert metrics[i + 1 : i + 3] == [f"{p}cancel_v2_p50_ms", f"{p}cancel_v2_p99_ms"]
