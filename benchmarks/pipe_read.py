#!/usr/bin/env python3
"""What one read of a pipe costs by the size it asks for: ``python3 benchmarks/pipe_read.py [N]``.

A one-line message is written to a pipe and read back N times, asking ``os.read`` for 256 KiB
(asyncio's default for pipe transports) and for 64 KiB (what acp-driver and the ceiling ask for,
and what node reads), alternately, three times each; the best of each is printed in µs per write
and read. A 256 KiB buffer is too big for glibc's heap, so each read maps one (``mmap``, page
faults, ``mremap`` when the bytes object shrinks, ``munmap``); 64 KiB comes from the heap.
"""

from __future__ import annotations

import os
import sys
import time

MESSAGE = b'{"jsonrpc":"2.0","id":1,"result":{"text":"hello","n":0}}\n'


def per_read(size: int, n: int) -> float:
    r, w = os.pipe()
    try:
        started = time.perf_counter()
        for _ in range(n):
            os.write(w, MESSAGE)
            os.read(r, size)
        return (time.perf_counter() - started) / n * 1e6
    finally:
        os.close(r)
        os.close(w)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    best = {256: float("inf"), 64: float("inf")}
    for _ in range(3):
        for kib in best:
            best[kib] = min(best[kib], per_read(kib * 1024, n))
    for kib, us in best.items():
        print(f"write + read asking for {kib:3} KiB: {us:6.2f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
