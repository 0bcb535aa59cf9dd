"""Draw the benchmark chart from a spec written by run.py: ``python chart.py SPEC.json``.

The spec: ``{"title", "labels": [workload...], "series": {impl: [value or null...]}, "out"}``;
values are relative to the ceiling (1.0 = ceiling, higher is better). Runs in whatever interpreter
has matplotlib (the current one, or benchmarks/.work/chart).
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    labels: list[str] = spec["labels"]
    series: dict[str, list[float | None]] = spec["series"]
    n = len(series)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(10, 1.0 * len(labels)), 5.5), dpi=110)
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
                    v * 1.04,
                    f"{v:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=5.5,
                    rotation=90,
                )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_ylim(0.005, 30)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("relative to the ceiling (1.0 = ceiling; higher is better; log scale)")
    ax.set_title(spec["title"], fontsize=10)
    ax.legend(fontsize=8, ncol=n, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    fig.savefig(spec["out"])


if __name__ == "__main__":
    main(sys.argv[1])
