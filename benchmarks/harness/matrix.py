"""What the benchmark harness measures: the columns (implementations), the workloads, the pairings
(``--modes``) and which workloads each runs, the sizes (full and ``--quick``) and the work every
column must do per workload (checked by ``runs.check_work``)."""

from __future__ import annotations

from typing import Any

import v2 as bench_v2  # the ACP v2 rows (benchmarks/v2.py)

SDK_OLD = "0.12.1"
SDK_NEW = "1.0.0rc3"
TS_SDK = "2.4.0"

IMPLS = ["acp-driver", f"sdk-{SDK_OLD}", f"sdk-{SDK_NEW}", f"ts-{TS_SDK}", "ceiling"]
SDKS = IMPLS[1:4]
ALIASES = {
    "acp": "acp-driver",
    "ts": f"ts-{TS_SDK}",
    "sdk-old": f"sdk-{SDK_OLD}",
    "sdk-new": f"sdk-{SDK_NEW}",
}
WORKLOADS = [
    "seq",
    "conc1k",
    "conc10k",
    "stream",
    "cancel",
    "cold",
    "storm",
    "ignored",
    "hang",
    "ctrl_c",
    *bench_v2.WORKLOADS,
]
MODES = ["pair", "host", "agent", "cli"]
PREFIX = {"pair": "", "host": "host:", "agent": "agent:", "cli": "cli:"}
# The workloads of the host-only and agent-only pairings (RSS is measured in every run).
SPLIT_WORKLOADS = ["seq", "conc1k", "conc10k", "stream", "cancel", "storm"]
# What each pairing runs: ``cli`` is acp-driver's CLI (``acp-driver run``) with each column's agent.
MODE_WORKLOADS = {
    "pair": [w for w in WORKLOADS if w != "ctrl_c"],
    "host": [*SPLIT_WORKLOADS, *bench_v2.WORKLOADS],
    "agent": [*SPLIT_WORKLOADS, *bench_v2.WORKLOADS],
    "cli": ["ctrl_c"],
}
# What each column's agent calls its extension methods (the ceiling host needs them in agent rows).
ECHO_SLEEP = {"acp-driver": ("_acp_driver/echo", "_acp_driver/sleep")}
# The work each workload must have done, in every column: (unit, count from the sizes).
WORK_UNITS: dict[str, tuple[str, Any]] = {
    "seq": ("answered", lambda c: c["seq"]),
    "conc1k": ("answered", lambda c: c["conc1k"] * c["conc1k_rounds"]),
    "conc10k": ("answered", lambda c: c["conc10k"] * c["conc10k_rounds"]),
    "stream": ("updates", lambda c: c["stream"]),
    "cancel": ("cancelled", lambda c: c["cancel"]),
    "storm": ("ids_answered", lambda c: c["storm"]),
    "ignored": ("resolved", lambda c: 1),
    "hang": ("resolved", lambda c: 1),
    "ctrl_c": ("cancelled", lambda c: c["ctrl_c"]),
    **bench_v2.WORK_UNITS,
}

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "warmup": 500,
        "seq": 5000,
        "conc1k": 1000,
        "conc1k_rounds": 5,
        "conc10k": 10000,
        "conc10k_rounds": 2,
        "stream": 50000,
        "cancel": 200,
        "cold": 10,
        "storm": 10000,
        "ignored_budget": 2.0,
        "ctrl_c": 100,
    },
    "quick": {
        "warmup": 50,
        "seq": 200,
        "conc1k": 100,
        "conc1k_rounds": 1,
        "conc10k": 300,
        "conc10k_rounds": 1,
        "stream": 500,
        "cancel": 10,
        "cold": 2,
        "storm": 200,
        "ignored_budget": 0.5,
        "ctrl_c": 3,
    },
}
