"""Draw the benchmark chart from a spec written by run.py: ``python chart.py SPEC.json``.

The spec: ``{"title", "labels": [workload...], "groups": [pairing of each label...], "series":
{impl: [value or null...]}, "out"}``; values are relative to the ceiling (1.0 = ceiling, higher is
better). One panel per pairing (``groups``, in order of appearance), stacked. Runs in whatever
interpreter has matplotlib (the current one, or benchmarks/.work/chart).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def panel(ax: Any, labels: list[str], series: dict[str, list[float | None]], title: str) -> None:
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (impl, values) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        heights = [v if v is not None else 0 for v in values]
        bars = ax.bar(xs, heights, width, label=impl)
        for x, v in zip(xs, values, strict=True):
            if v is None:
                ax.text(x, 0.012, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
        for bar, v in zip(bars, values, strict=True):
            if v is not None:
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    v * 1.06,
                    f"{v:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    rotation=90,
                )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_ylim(0.005, 40)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("÷ ceiling (log)")
    ax.set_title(title, fontsize=9, loc="left")


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    labels: list[str] = spec["labels"]
    groups: list[str] = spec.get("groups") or [""] * len(labels)
    series: dict[str, list[float | None]] = spec["series"]
    order = list(dict.fromkeys(groups))
    widest = max(groups.count(g) for g in order)
    fig, axes = plt.subplots(
        len(order), 1, figsize=(max(9, 0.75 * widest * max(len(series), 1) / 2.5), 3.4 * len(order)), dpi=110
    )
    axes = axes if len(order) > 1 else [axes]
    for ax, group in zip(axes, order, strict=True):
        idx = [i for i, g in enumerate(groups) if g == group]
        panel(ax, [labels[i] for i in idx], {k: [v[i] for i in idx] for k, v in series.items()}, group)
    fig.suptitle(f"{spec['title']} (1.0 = ceiling, higher is better)", fontsize=10)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=8, ncol=len(series), loc="lower center")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(spec["out"])


if __name__ == "__main__":
    main(sys.argv[1])
