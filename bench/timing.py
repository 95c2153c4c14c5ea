"""Timing in the style of Triton's ``do_bench``: warm-up, repeats until a time budget,
the cache flushed between repeats for workloads whose data fits in the caches, median and
min reported.

The systems of one bench row are timed in turns (``measure_in_turns``).
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
    return measure_in_turns({"fn": fn}, cold, budget_s, warmup, min_runs, max_runs)["fn"]


def measure_in_turns(fns, cold, budget_s=1.0, warmup=2, min_runs=5, max_runs=200):
    """Time every system of ``fns`` (``{name: fn}``) one run at a time, in turns, until
    ``budget_s`` seconds per system are spent and each ran ``min_runs`` times: a slow
    spell of the machine then hits every system of the row alike, and their ratios hold.
    Returns ``{name: Measurement}``. Example: ``measure_in_turns({"a": f, "b": g}, True)``."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    end = time.perf_counter() + budget_s * len(fns)
    while True:
        for name, fn in fns.items():
            if len(times[name]) >= max_runs:
                continue
            if cold:
                flush_cache()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        counts = [len(t) for t in times.values()]
        if min(counts) >= max_runs or (min(counts) >= min_runs and time.perf_counter() >= end):
            break
    return {name: Measurement(t) for name, t in times.items()}


__all__ = ["Measurement", "measure", "measure_in_turns", "flush_cache", "runs_start_cold"]
