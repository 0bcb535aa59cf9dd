"""The benchmark harness's report: the rows of the table, acp-driver's targets and their verdicts,
the number formats, the text and markdown tables, the chart (drawn by ``benchmarks/chart.py``) and
the generated results section of docs/benchmarks.md."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import v2 as bench_v2  # the ACP v2 rows (benchmarks/v2.py)

from .environment import HERE, ROOT, WORK, chart_python, run_quiet
from .matrix import PREFIX, SDKS

DOCS = ROOT / "docs"
RESULTS = HERE / "results.json"
CHART = DOCS / "benchmarks.png"
DOC = DOCS / "benchmarks.md"
BEGIN = "<!-- BEGIN GENERATED RESULTS (benchmarks/run.py) -->"
END = "<!-- END GENERATED RESULTS -->"


# Targets for acp-driver, checked in the same run: (text, check(value, results, metric)). The
# host's throughput and memory targets are checked on the host-only rows (every host drives the
# ceiling agent, so the ratio is the host's alone). Latency (issue 25): rows 1 and 5 in each
# pairing at least as good as the best SDK's, a cancel's p99 at most 1 ms and its p50 at most
# twice the ceiling's.
def _at_least_best_sdk(value: float, results: dict[str, dict[str, Any]], metric: str, higher: bool) -> bool:
    """As good as the best SDK's value of the same run (vacuously, when no SDK ran)."""
    best = best_sdk(metric, higher, results)
    return best is None or (value >= best[1] if higher else value <= best[1])


def _latency_targets() -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for p in ("", "host:", "agent:"):
        out[f"{p}seq_rps"] = ("≥ best SDK", lambda v, r, m: _at_least_best_sdk(v, r, m, True))
        out[f"{p}cancel_p50_ms"] = (
            "≤ best SDK, ≤ 2x ceiling",
            lambda v, r, m: _at_least_best_sdk(v, r, m, False) and _ratio(v, r, m, "ceiling") <= 2.0,
        )
        out[f"{p}cancel_p99_ms"] = (
            "≤ best SDK, ≤ 1 ms",
            lambda v, r, m: _at_least_best_sdk(v, r, m, False) and v <= 1.0,
        )
    return out


TARGETS: dict[str, tuple[str, Any]] = {
    **_latency_targets(),
    "host:seq_rps": (
        "≥ best SDK, ≥ 90 % of ceiling",
        lambda v, r, m: _at_least_best_sdk(v, r, m, True) and _ratio(v, r, m, "ceiling") >= 0.90,
    ),
    "host:conc1k_rps": ("≥ 60 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.60),
    "host:conc10k_rps": ("≥ 60 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.60),
    "host:stream_ups": ("≥ 50 % of ceiling", lambda v, r, m: _ratio(v, r, m, "ceiling") >= 0.50),
    "host:rss_host_load_mib": ("≤ 45 MiB", lambda v, r, m: v <= 45),
    "cold_start_ms": ("≤ 150 ms", lambda v, r, m: v <= 150),
    "supervisor_cost_ms": ("≤ 30 ms", lambda v, r, m: v <= 30),
    "rss_host_idle_mib": ("≤ 30 MiB", lambda v, r, m: v <= 30),
    "storm_ms": (
        "all answered ≤ 1 s, ledger empty",
        lambda v, r, m: v <= 1000 and r.get("acp-driver", {}).get("storm_ledger_empty") is True,
    ),
    "ignored_s": (
        "resolved ≤ budget",
        lambda v, r, m: v <= float(r.get("acp-driver", {}).get("ignored_budget_s", math.inf)),
    ),
    "hang_s": (
        "SIGKILL at the budget, resolved ≤ budget + 0.1 s",
        lambda v, r, m: v <= float(r.get("acp-driver", {}).get("hang_budget_s", math.inf)) + 0.1,
    ),
}


def _ratio(value: float, results: dict[str, dict[str, Any]], metric: str, other: str) -> float:
    base = results.get(other, {}).get(metric)
    return value / base if isinstance(base, (int, float)) and base else math.nan


CHART_BASE_LABELS = {
    "seq_rps": "sequential\nreq/s",
    "conc1k_rps": "1k concurrent\nreq/s",
    "conc10k_rps": "10k concurrent\nreq/s",
    "stream_ups": "update stream\nupdates/s",
    "cancel_p50_ms": "cancel\np50",
    "cancel_p99_ms": "cancel\np99",
    "cold_start_ms": "cold start",
    "cold_start_direct_ms": "cold start, no supervisor",
    "supervisor_cost_ms": "supervisor cost",
    "rss_host_idle_mib": "host RSS\nidle",
    "rss_host_load_mib": "host RSS\nafter load",
    "rss_agent_idle_mib": "agent RSS\nidle",
    "rss_agent_load_mib": "agent RSS\nafter load",
    "storm_ms": "cancel storm\nall answered",
    "ignored_s": "ignored cancel",
    "hang_s": "hung agent\nkilled",
    "ctrl_c_p50_ms": "Ctrl-C → result\np50",
    "ctrl_c_p99_ms": "Ctrl-C → result\np99",
    **bench_v2.CHART_LABELS,
}
CHART_GROUPS = {
    "pair": "each host with its own agent",
    "host": "host only: every host drives the ceiling agent",
    "agent": "agent only: the ceiling host drives every agent",
    "cli": "acp-driver run (the CLI) drives every agent",
}


def chart_label(metric: str) -> tuple[str, str]:
    """(group, readable label) of a result key for the chart: no raw keys on the axis."""
    group, _, key = metric.rpartition(":")
    group = group or "pair"
    return group, CHART_BASE_LABELS.get(key, key.replace("_", " "))


def rows(cfg: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(metric, workload, label, higher_is_better); host/agent rows have prefixed names."""
    pair = [
        ("seq_rps", "seq", f"1. sequential round trips, req/s (n={cfg['seq']})", True),
        ("conc1k_rps", "conc1k", f"2. {cfg['conc1k']} concurrent requests, req/s", True),
        ("conc10k_rps", "conc10k", f"3. {cfg['conc10k']} concurrent requests, req/s", True),
        ("stream_ups", "stream", f"4. session/update stream, updates/s (n={cfg['stream']})", True),
        ("cancel_p50_ms", "cancel", f"5. session/cancel → cancelled, p50 ms (n={cfg['cancel']})", False),
        ("cancel_p99_ms", "cancel", "5. session/cancel → cancelled, p99 ms", False),
        (
            "cold_start_ms",
            "cold",
            f"6. cold start → initialize answered, ms (median of {cfg['cold']})",
            False,
        ),
        ("cold_start_direct_ms", "cold", "6. cold start without the supervisor, ms", False),
        ("supervisor_cost_ms", "cold", "6. supervisor cost: cold start with minus without, ms", False),
        ("rss_host_idle_mib", "rss", "7. host RSS idle (after initialize), MiB", False),
        ("rss_host_load_mib", "rss", "7. host RSS after the load, MiB", False),
        ("rss_agent_idle_mib", "rss", "7. agent RSS idle, MiB", False),
        ("rss_agent_load_mib", "rss", "7. agent RSS after the load, MiB", False),
        ("storm_ms", "storm", f"8. cancel storm: {cfg['storm']} in flight → all answered, ms", False),
        ("storm_ledger_empty", "storm", "8. cancel storm: ledger empty after the answers", True),
        (
            "ignored_s",
            "ignored",
            f"9. ignored cancel: cancel → resolved (SIGTERM), s (budget {cfg['ignored_budget']} s)",
            False,
        ),
        (
            "hang_s",
            "hang",
            f"10. hung agent: cancel → SIGKILL → resolved, s (budget {cfg['ignored_budget']} s)",
            False,
        ),
    ]
    split = []
    for mode, tag, who in (
        ("host", "H", "host only ↔ ceiling agent"),
        ("agent", "A", "agent only ↔ ceiling host"),
    ):
        p = PREFIX[mode]
        side = "host" if mode == "host" else "agent"
        split += [
            (f"{p}seq_rps", f"{p}seq", f"{tag}1. {who}: sequential round trips, req/s", True),
            (f"{p}conc1k_rps", f"{p}conc1k", f"{tag}2. {who}: {cfg['conc1k']} concurrent, req/s", True),
            (f"{p}conc10k_rps", f"{p}conc10k", f"{tag}3. {who}: {cfg['conc10k']} concurrent, req/s", True),
            (f"{p}stream_ups", f"{p}stream", f"{tag}4. {who}: session/update stream, updates/s", True),
            (f"{p}cancel_p50_ms", f"{p}cancel", f"{tag}5. {who}: cancel → cancelled, p50 ms", False),
            (f"{p}cancel_p99_ms", f"{p}cancel", f"{tag}5. {who}: cancel → cancelled, p99 ms", False),
            (f"{p}rss_{side}_idle_mib", f"{p}rss", f"{tag}7. {who}: {side} RSS idle, MiB", False),
            (f"{p}rss_{side}_load_mib", f"{p}rss", f"{tag}7. {who}: {side} RSS after the load, MiB", False),
            (f"{p}storm_ms", f"{p}storm", f"{tag}8. {who}: cancel storm → all answered, ms", False),
            (f"{p}storm_ledger_empty", f"{p}storm", f"{tag}8. {who}: storm ledger empty", True),
        ]
    cli = [
        (
            "cli:ctrl_c_p50_ms",
            "cli:ctrl_c",
            f"C1. acp-driver run ↔ each agent: Ctrl-C → result line, p50 ms (n={cfg['ctrl_c']})",
            False,
        ),
        (
            "cli:ctrl_c_p99_ms",
            "cli:ctrl_c",
            "C1. acp-driver run ↔ each agent: Ctrl-C → result line, p99 ms",
            False,
        ),
    ]
    return bench_v2.with_rows(pair + split + cli, cfg)  # each v2 row next to its v1 row


def fmt(value: Any, metric: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, str):
        return value
    if metric.endswith(("_rps", "_ups")):
        return f"{value:,.0f}"
    if metric.endswith("_ms"):
        return f"{value:.3f}" if value < 10 else f"{value:,.1f}"
    if metric.endswith("_s"):
        return f"{value:.3f}"
    return f"{value:.1f}"


def best_sdk(metric: str, higher: bool, results: dict[str, dict[str, Any]]) -> tuple[str, float] | None:
    cands = [
        (impl, results[impl][metric])
        for impl in SDKS
        if isinstance(results.get(impl, {}).get(metric), (int, float))
    ]
    if not cands:
        return None
    return max(cands, key=lambda c: c[1]) if higher else min(cands, key=lambda c: c[1])


def build_table(
    impls: list[str],
    results: dict[str, dict[str, Any]],
    status: dict[str, dict[str, str]],
    cfg: dict[str, Any],
) -> tuple[list[str], list[list[str]], dict[str, str]]:
    header = ["workload", *impls, "acp ÷ ceiling", "acp ÷ best SDK", "target (acp-driver)", "PASS/FAIL"]
    table: list[list[str]] = []
    verdicts: dict[str, str] = {}
    for metric, workload, label, higher in rows(cfg):
        arrow = "↑" if higher else "↓"
        line = [f"{label} {arrow}"]
        for impl in impls:
            value = results.get(impl, {}).get(metric)
            if value is None:
                line.append(status.get(impl, {}).get(workload, "—"))
            else:
                line.append(fmt(value, metric))
        ours = results.get("acp-driver", {}).get(metric)
        ceiling = results.get("ceiling", {}).get(metric)
        numeric = isinstance(ours, (int, float)) and not isinstance(ours, bool)
        line.append(
            f"{ours / ceiling:.2f}x" if numeric and isinstance(ceiling, (int, float)) and ceiling else "—"
        )
        best = best_sdk(metric, higher, results)
        line.append(f"{ours / best[1]:.2f}x ({best[0]})" if numeric and best and best[1] else "—")
        target = TARGETS.get(metric)
        if target is None:
            line += ["", ""]
        elif not numeric:
            line += [target[0], "—"]
        else:
            ok = bool(target[1](ours, results, metric))
            verdicts[metric] = "PASS" if ok else "FAIL"
            line += [target[0], verdicts[metric]]
        table.append(line)
    return header, table, verdicts


def render_text(header: list[str], table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    sep = "  "
    out = [sep.join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append(sep.join("-" * w for w in widths))
    for row in table:
        out.append(
            sep.join(
                (c.ljust(w) if i == 0 else c.rjust(w))
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(out)


def render_markdown(header: list[str], table: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for row in table:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(out)


def acp_note_lines(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """acp-driver's notes (how the ignored cancel resolved, the storm through the default API...),
    each distinct value once, in run order."""
    notes = [
        {f"{PREFIX[r.get('mode', 'pair')]}{k}": v for k, v in r["notes"].items()}
        for r in runs
        if "notes" in r
    ]
    out = []
    for key in sorted({k for n in notes for k in n}):
        values = list(dict.fromkeys(str(n[key]) for n in notes if key in n))
        out.append((key, " | ".join(values)))
    return out


def write_chart(
    impls: list[str],
    results: dict[str, dict[str, Any]],
    verdicts: dict[str, str],
    cfg: dict[str, Any],
    path: Path,
    title: str,
) -> None:
    """One picture: for each row, acp-driver's advantage over each SDK (see chart.py)."""
    sdks = [impl for impl in SDKS if impl in impls]
    chart_rows = []
    for metric, _workload, label, higher in rows(cfg):
        ours = results.get("acp-driver", {}).get(metric)
        if not isinstance(ours, (int, float)) or isinstance(ours, bool) or not ours:
            continue
        ratios: dict[str, float | None] = {}
        for sdk in sdks:
            theirs = results.get(sdk, {}).get(metric)
            usable = isinstance(theirs, (int, float)) and not isinstance(theirs, bool) and theirs
            ratios[sdk] = (ours / theirs if higher else theirs / ours) if usable else None
        if not any(ratios.values()):
            continue
        group, base = chart_label(metric)
        tag = label.split(".", 1)[0]
        target = TARGETS.get(metric)
        chart_rows.append(
            {
                "label": f"{tag}  {base.replace(chr(10), ' ')} {'↑' if higher else '↓'}",
                "group": CHART_GROUPS.get(group, group),
                "ratios": ratios,
                "target": target[0] if target else None,
                "verdict": verdicts.get(metric),
            }
        )
    spec = {"title": title, "sdks": sdks, "rows": chart_rows, "out": str(path)}
    spec_path = WORK / "chart-spec.json"
    spec_path.write_text(json.dumps(spec))
    run_quiet([str(chart_python()), str(HERE / "chart.py"), str(spec_path)])


def update_doc(markdown: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{markdown.strip()}\n{END}{tail}")


def results_markdown(
    doc: dict[str, Any],
    header: list[str],
    table: list[list[str]],
    na_notes: list[str],
    work_line: str,
    chart_note: str,
) -> str:
    """The results section of docs/benchmarks.md for a run's result document."""
    info, cfg, verdicts = doc["machine"], doc["sizes"], doc["verdicts"]
    passed = sum(v == "PASS" for v in verdicts.values())
    interp = ", ".join(f"{k}: {v}" for k, v in info["interpreters"].items())
    return "\n".join(
        [
            f"Generated by `{doc['command']}` on {info['date']}.",
            "",
            f"- Machine: {info['cpu']}, {info['cores']} cores, {info['os']}; load average "
            f"{info['loadavg_start']} at the start, {info['loadavg_end']} at the end (shared, noisy machine).",
            f"- Interpreters: {interp}.",
            f"- Medians of {doc['repeat']} runs per implementation (runs interleaved). Sizes: "
            + ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "workloads")
            + ".",
            f"- {work_line[0].upper()}{work_line[1:]}.",
            f"- acp-driver targets: {passed} PASS, {len(verdicts) - passed} FAIL. Ratios are acp-driver ÷ other; "
            "↑ rows: higher is better, ↓ rows: lower is better.",
            "",
            render_markdown(header, table),
            "",
            *[f"- n/a — {n}" for n in na_notes],
            *[f"- acp-driver {k}: {v}" for k, v in acp_note_lines(doc["runs"].get("acp-driver", []))],
            chart_note,
        ]
    )
