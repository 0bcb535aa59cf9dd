"""Draw the benchmark chart from a spec written by run.py: ``python chart.py SPEC.json``.

One picture: for each row of the table that acp-driver and at least one official SDK ran, how
many times better acp-driver did than each SDK (a dot per SDK, log scale; right of the line:
acp-driver better, left: worse). Rows are grouped by pairing; a row with a target for acp-driver
shows the target and its verdict at the right. The spec::

    {"title": str, "out": str, "sdks": [name...],
     "rows": [{"label": str, "group": str, "ratios": {sdk: float | null}, "target": str | null,
               "verdict": "PASS" | "FAIL" | null}...]}

where a ratio is acp-driver ÷ SDK for rows where higher is better, SDK ÷ acp-driver otherwise
(so > 1 is always acp-driver ahead). Runs in whatever interpreter has matplotlib (the current
one, or benchmarks/.work/chart).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MARKERS = ["o", "s", "D", "^", "v"]
COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]


def draw(spec: dict[str, Any]) -> None:
    rows: list[dict[str, Any]] = spec["rows"]
    sdks: list[str] = spec["sdks"]
    # Top to bottom in table order, a gap and a heading before each group.
    y = 0.0
    placed: list[tuple[float, dict[str, Any]]] = []
    headings: list[tuple[float, str]] = []
    group = None
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            y += 0.6 if placed else 0.0
            headings.append((y, group))
            y += 0.9
        placed.append((y, row))
        y += 1.0
    values = [v for _, row in placed for v in row["ratios"].values() if v]
    lo = min([0.5, *values]) / 1.5
    hi = max([2.0, *values]) * 1.5
    fig, ax = plt.subplots(figsize=(11, 0.3 * y + 1.6), dpi=110)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(y, -0.8)
    ax.axvspan(1.0, hi, color="#2ca02c", alpha=0.07, lw=0)
    ax.axvline(1.0, color="black", lw=1.0)
    ax.text(1.0, -0.6, " as good as the SDK", fontsize=7, va="center")
    for i, sdk in enumerate(sdks):
        xs = [row["ratios"].get(sdk) for _, row in placed]
        ys = [yy for yy, _ in placed]
        pts = [(x, yy) for x, yy in zip(xs, ys, strict=True) if x]
        if pts:
            ax.scatter(
                [x for x, _ in pts],
                [yy for _, yy in pts],
                marker=MARKERS[i % len(MARKERS)],
                color=COLORS[i % len(COLORS)],
                s=26,
                zorder=3,
                label=sdk,
            )
    for yy, row in placed:
        ax.axhline(yy, color="#dddddd", lw=0.5, zorder=0)
        best = min((v for v in row["ratios"].values() if v), default=None)
        if best is not None:  # the ratio to the best SDK, printed at the row's weakest dot
            ax.text(best / 1.12, yy, f"{best:.2f}x", fontsize=6.5, ha="right", va="center", color="#444444")
        if row.get("target"):
            verdict = row.get("verdict")
            color = {"PASS": "#2ca02c", "FAIL": "#d62728"}.get(verdict or "", "#777777")
            ax.text(
                1.01,
                yy,
                f"{verdict or 'target'}  {row['target']}",
                transform=ax.get_yaxis_transform(),
                fontsize=7,
                va="center",
                color=color,
                fontweight="bold",
            )
    for yy, name in headings:
        ax.text(lo * 1.02, yy, name, fontsize=8.5, fontweight="bold", va="center")
    ax.set_yticks([yy for yy, _ in placed])
    ax.set_yticklabels(
        [row["label"] for _, row in placed],
        fontsize=7.5,
    )
    for tick, (_, row) in zip(ax.get_yticklabels(), placed, strict=True):
        if row.get("target"):
            tick.set_fontweight("bold")
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50) if lo <= t <= hi]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}x" for t in ticks], fontsize=8)
    ax.set_xlabel("acp-driver's advantage over each SDK (x better; log scale)", fontsize=8.5)
    handles, names = ax.get_legend_handles_labels()
    fig.legend(handles, [f"vs {name}" for name in names], loc="lower center", ncol=len(names), fontsize=8)
    ax.set_title(spec["title"], fontsize=10, loc="left")
    fig.tight_layout(rect=(0, 0.03, 0.78, 1))
    fig.savefig(spec["out"])


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    if not any(v for row in spec["rows"] for v in row["ratios"].values() if v and math.isfinite(v)):
        raise SystemExit("nothing to draw: no row with acp-driver and an SDK")
    draw(spec)


if __name__ == "__main__":
    main(sys.argv[1])
