"""The ACP v2 rows of the benchmark harness (``run.py``): workloads, runners, rows, the v2 ÷ v1
comparison and the v2 results section (docs/benchmarks.md, "ACP v2").

Two workloads, each next to its v1 row and run with the same sizes:

- ``stream_v2`` (row 4v2): one v2 turn ``/stream N 0``: updates/s of its ``agent_message_chunk``
  updates, counted where the host application sees them, from sending the prompt to the turn's
  idle ``state_update`` (which must say ``end_turn``). In v2 the prompt's answer comes at
  insertion, so the idle is what ends the turn.
- ``cancel_v2`` (row 5v2): a busy v2 turn (``/stream 1 0`` + ``/sleep 60000``: inserted -- its
  answer ``{messageId}`` arrived -- and its first chunk seen), then ``session/cancel``: the time
  until the idle ``state_update``, p50/p99 over N cancels. It counts only when the idle says
  ``stopReason: "cancelled"``.

Each v2 run is a runner process of its own (one connection speaks one version): the v2 runners
and peers are ``runners/*_v2.*`` and ``peers/*_v2.*``, in the same pairings as v1 (pair, host:
every v2 host drives the ceiling's v2 agent, agent: the ceiling's v2 host drives every v2 agent).
The SDK 0.12.1 has no v2: its v2 rows are n/a.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RUNNERS = HERE / "runners"
PEERS = HERE / "peers"

WORKLOADS = ["stream_v2", "cancel_v2"]
WORK_UNITS: dict[str, tuple[str, Any]] = {
    "stream_v2": ("updates", lambda c: c["stream"]),
    "cancel_v2": ("cancelled", lambda c: c["cancel"]),
}
# The v1 row each v2 row sits next to (metric without the pairing prefix).
NEXT_TO = {
    "stream_ups": "stream_v2_ups",
    "cancel_p50_ms": "cancel_v2_p50_ms",
    "cancel_p99_ms": "cancel_v2_p99_ms",
}
CHART_LABELS = {
    "stream_v2_ups": "v2 update stream\nupdates/s",
    "cancel_v2_p50_ms": "v2 cancel → idle\np50",
    "cancel_v2_p99_ms": "v2 cancel → idle\np99",
}
BEGIN = "<!-- BEGIN GENERATED V2 RESULTS (benchmarks/run.py --write-v2) -->"
END = "<!-- END GENERATED V2 RESULTS -->"
NO_V2 = "sdk-0.12.1"

Job = tuple[str, str, list[str], dict[str, str], dict[str, Any]]


def is_v2(workload: str) -> bool:
    return workload in WORKLOADS


def _runner(impl: str) -> str:
    if impl == "acp-driver":
        return str(RUNNERS / "acp_driver_host_v2.py")
    if impl == "ceiling":
        return str(RUNNERS / "ceiling_host_v2.py")
    if impl.startswith("ts-"):
        return str(RUNNERS / "ts_host_v2.mjs")
    return str(RUNNERS / "sdk_host_v2.py")


def agent_argv(impl: str, interpreter: str) -> list[str]:
    """The argv of ``impl``'s own v2 agent (what its v2 host runner spawns)."""
    if impl == "acp-driver":
        return [interpreter, "-m", "acp_driver", "agent", "--protocol", "2"]
    if impl == "ceiling":
        return [interpreter, str(PEERS / "ceiling_agent_v2.py")]
    if impl.startswith("ts-"):
        return [interpreter, str(PEERS / "ts_agent_v2.mjs")]
    return [interpreter, str(PEERS / "sdk_agent_v2.py")]


def jobs(
    impls: list[str],
    modes: list[str],
    host_cmds: dict[str, tuple[list[str], dict[str, str]]],
    ceiling: tuple[list[str], dict[str, str]],
) -> list[Job]:
    """The v2 runner processes of one round, in the v1 rows' pairings. A column without v2 gets a
    job with no command: its rows say n/a, and why."""
    ceiling_cmd, ceiling_env = ceiling
    ceiling_py = ceiling_cmd[0]
    out: list[Job] = []
    for impl in impls:
        if impl == NO_V2:
            na = {w: f"SDK {NO_V2.removeprefix('sdk-')} has no ACP v2" for w in WORKLOADS}
            out += [
                (impl, m, [], {}, {"protocol": 2, "na": na}) for m in ("pair", "host", "agent") if m in modes
            ]
            continue
        cmd, env = host_cmds[impl]
        v2_cmd = [cmd[0], _runner(impl)]
        if impl == "ceiling":
            if "pair" in modes or (len(impls) > 1 and ("host" in modes or "agent" in modes)):
                out.append((impl, "pair", v2_cmd, env, {"protocol": 2}))
            continue
        if "pair" in modes:
            out.append((impl, "pair", v2_cmd, env, {"protocol": 2}))
        if "host" in modes:
            out.append(
                (impl, "host", v2_cmd, env, {"protocol": 2, "agent": agent_argv("ceiling", ceiling_py)})
            )
        if "agent" in modes:
            agent_env = {**ceiling_env, **{k: v for k, v in env.items() if k.startswith("ACP_")}}
            if impl.startswith("sdk-"):
                agent_env.pop("PYTHONPATH", None)
            extra = {"protocol": 2, "agent": agent_argv(impl, cmd[0])}
            out.append((impl, "agent", [ceiling_py, _runner("ceiling")], agent_env, extra))
    return out


def rows(cfg: dict[str, Any]) -> dict[str, list[tuple[str, str, str, bool]]]:
    """The v2 rows, keyed by the (prefixed) v1 metric they follow."""
    out: dict[str, list[tuple[str, str, str, bool]]] = {}
    for p, tag, who in (
        ("", "", ""),
        ("host:", "H", "host only ↔ ceiling agent: "),
        ("agent:", "A", "agent only ↔ ceiling host: "),
    ):
        stream = f" (n={cfg['stream']})" if not p else ""
        cancel = f" (n={cfg['cancel']})" if not p else ""
        out[f"{p}stream_ups"] = [
            (
                f"{p}stream_v2_ups",
                f"{p}stream_v2",
                f"{tag}4v2. {who}ACP v2 update stream: chunks until idle end_turn, updates/s{stream}",
                True,
            )
        ]
        out[f"{p}cancel_p99_ms"] = [
            (
                f"{p}cancel_v2_p50_ms",
                f"{p}cancel_v2",
                f"{tag}5v2. {who}ACP v2 session/cancel → idle cancelled, p50 ms{cancel}",
                False,
            ),
            (
                f"{p}cancel_v2_p99_ms",
                f"{p}cancel_v2",
                f"{tag}5v2. {who}ACP v2 session/cancel → idle cancelled, p99 ms",
                False,
            ),
        ]
    return out


def with_rows(
    base: list[tuple[str, str, str, bool]], cfg: dict[str, Any]
) -> list[tuple[str, str, str, bool]]:
    """``base`` (the v1 rows) with each v2 row right after the v1 row it compares with."""
    extra = rows(cfg)
    out: list[tuple[str, str, str, bool]] = []
    for row in base:
        out.append(row)
        out += extra.get(row[0], [])
    return out


def comparison(impls: list[str], results: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """v2 ÷ v1 per column and row of the same run (↑ stream: > 1 is v2 faster; ↓ cancel: < 1 is
    v2 faster)."""
    header = ["row (v2 ÷ v1, same run)", *impls]
    table = []
    for p, tag in (("", ""), ("host:", "H"), ("agent:", "A")):
        for v1, v2 in NEXT_TO.items():
            label = {
                "stream_ups": "4. update stream ↑",
                "cancel_p50_ms": "5. cancel p50 ↓",
                "cancel_p99_ms": "5. cancel p99 ↓",
            }[v1]
            line = [f"{tag}{label}"]
            for impl in impls:
                a, b = results.get(impl, {}).get(f"{p}{v1}"), results.get(impl, {}).get(f"{p}{v2}")
                ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and x for x in (a, b))
                line.append(f"{b / a:.2f}x" if ok else "—")  # type: ignore[operator]
            table.append(line)
    return header, table


def write(results_path: Path, doc_path: Path, doc: dict[str, Any], markdown: str) -> None:
    """The v2 comparison, as the harness ran it: results.json's ``"v2"`` key (the rest of the file,
    a full run's, left as it is) and the generated block of the doc's "ACP v2" section."""
    whole = json.loads(results_path.read_text()) if results_path.exists() else {}
    whole["v2"] = doc
    results_path.write_text(json.dumps(whole, indent=2) + "\n")
    text = doc_path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"[bench] {doc_path} has no {BEGIN} ... {END} block for the v2 results")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    doc_path.write_text(f"{head}{BEGIN}\n{markdown.strip()}\n{END}{tail}")


def markdown(
    command: str,
    info: dict[str, Any],
    doc: dict[str, Any],
    header: list[str],
    table: list[list[str]],
    na_notes: list[str],
    all_rows: list[tuple[str, str, str, bool]],
    render: Any,
) -> str:
    """The generated part of the "ACP v2" section: the selected rows (v1 and v2, side by side),
    then v2 ÷ v1 per column."""
    selected = set(doc["sizes"]["workloads"])
    labels = {
        f"{label} {'↑' if higher else '↓'}"
        for _metric, workload, label, higher in all_rows
        if workload.rpartition(":")[2] in selected
    }
    rows_md = render(header, [line for line in table if line[0] in labels])
    cmp_header, cmp_table = comparison(doc["implementations"], doc["results"])
    interp = ", ".join(f"{k}: {v}" for k, v in info["interpreters"].items())
    return "\n".join(
        [
            f"Generated by `{command}` on {info['date']}.",
            "",
            f"- Machine: {info['cpu']}, {info['cores']} cores; load average {info['loadavg_start']} at the "
            f"start, {info['loadavg_end']} at the end (shared, noisy machine: other work ran alongside).",
            f"- Interpreters: {interp}.",
            f"- Medians of {doc['repeat']} runs per implementation and pairing (runs interleaved); v1 and v2 "
            "rows from the same invocation. Sizes: "
            + ", ".join(f"{k}={doc['sizes'][k]}" for k in ("stream", "cancel")),
            "- Work: "
            + (
                "every column did the same work in every row it ran (chunks counted, cancels confirmed)."
                if doc["work_equal"]
                else "UNEQUAL (see the run's output): these numbers do not compare."
            ),
            "",
            rows_md,
            "",
            "v2 ÷ v1, each column against itself in the same run (↑ > 1: v2 faster; ↓ < 1: v2 faster):",
            "",
            render(cmp_header, cmp_table),
            "",
            *[f"- n/a — {n}" for n in na_notes],
        ]
    )
