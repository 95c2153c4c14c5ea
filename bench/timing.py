"""Timing in the style of Triton's ``do_bench``: warm-up, repeats until a time budget,
the cache flushed between repeats for small kernels, median and min reported.

Example: ``t = measure(lambda: kern(A=a, B=b), budget_s=1.0)``; ``t.median``.
"""
from __future__ import annotations

import time

import numpy as np

# overwrites a buffer larger than the last-level cache; the autotuner times small
# kernels the same way
from schedlang.autotune.measure import flush_caches as flush_cache


class Measurement:
    def __init__(self, times):
        times = sorted(times)
        self.times, self.runs = times, len(times)
        self.median, self.min = float(np.median(times)), float(times[0])


def measure(fn, budget_s=1.0, warmup=2, min_runs=5, max_runs=200, flush_below_s=0.002):
    """Time ``fn()``; flushes the cache before each run when one run is shorter than
    ``flush_below_s`` seconds (so small kernels are not measured hot)."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    flush = one < flush_below_s
    times = []
    end = time.perf_counter() + budget_s
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() < end):
        if flush:
            flush_cache()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Measurement(times)
