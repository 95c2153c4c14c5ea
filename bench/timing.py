"""Timing in the style of Triton's ``do_bench``: warm-up, repeats until a time budget,
the cache flushed between repeats for workloads whose data fits in the caches, median and
min reported.

Example: ``t = measure(lambda: kern(A=a, B=b), cold=True, budget_s=1.0)``; ``t.median``.
"""
from __future__ import annotations

import time

import numpy as np

# overwrites a buffer larger than the last-level cache; the autotuner times small
# kernels the same way
from schedlang.autotune.measure import flush_caches as flush_cache
from schedlang.autotune.measure import runs_start_cold


class Measurement:
    def __init__(self, times):
        times = sorted(times)
        self.times, self.runs = times, len(times)
        self.median, self.min = float(np.median(times)), float(times[0])


def measure(fn, cold, budget_s=1.0, warmup=2, min_runs=5, max_runs=200):
    """Time ``fn()``; with ``cold`` (``runs_start_cold``) the cache is flushed before
    each run. The choice is the workload's, so every system of one row is timed alike."""
    for _ in range(warmup):
        fn()
    times = []
    end = time.perf_counter() + budget_s
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() < end):
        if cold:
            flush_cache()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Measurement(times)



__all__ = ["Measurement", "measure", "flush_cache", "runs_start_cold"]
