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
from schedlang.autotune.integration import seconds_from_env
from schedlang.autotune.measure import runs_start_cold


DEFAULT_ROW_BUDGET_S = 1.0


def row_budget_s():
    """Seconds each system of one bench row is timed for: ``SCHEDLANG_BENCH_BUDGET_S`` or
    1 s (a smaller budget gives quicker, noisier rows; the test suite uses one). A value
    that is not a finite number of seconds > 0 raises SystemExit with what to set.
    Example: ``measure_in_turns(fns, cold, budget_s=row_budget_s())``."""
    value, text = seconds_from_env("SCHEDLANG_BENCH_BUDGET_S", DEFAULT_ROW_BUDGET_S)
    if value is None:
        raise SystemExit(f"SCHEDLANG_BENCH_BUDGET_S={text!r}: the timing budget of a bench row "
                         "must be a finite number of seconds > 0; set e.g. "
                         f"SCHEDLANG_BENCH_BUDGET_S=0.5, or unset it for {DEFAULT_ROW_BUDGET_S:g} s")
    return value


class Measurement:
    def __init__(self, times):
        times = sorted(times)
        self.times, self.runs = times, len(times)
        self.median, self.min = float(np.median(times)), float(times[0])


def measure(fn, cold, budget_s=1.0, warmup=2, min_runs=5, max_runs=200):
    """Time ``fn()``; with ``cold`` (``runs_start_cold``) the cache is flushed before
    each run. The choice is the workload's, so every system of one row is timed alike."""
    return measure_in_turns({"fn": fn}, cold, budget_s, warmup, min_runs, max_runs)["fn"]


def measure_in_turns(fns, cold, budget_s=1.0, warmup=2, min_runs=5, max_runs=200, turns=4):
    """Time every system of ``fns`` (``{name: fn}``) in ``turns`` bursts each, the systems
    taking turns, until ``budget_s`` seconds per system are spent and each ran ``min_runs``
    times: a slow spell of the machine then hits every system of the row alike, and their
    ratios hold. Each burst starts with one untimed run, while the helper threads of the
    system before may still be spinning. Returns ``{name: Measurement}``.
    Example: ``measure_in_turns({"a": f, "b": g}, cold=True)``."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    burst_s = budget_s / turns
    turn = 0
    while turn < turns or min(len(t) for t in times.values()) < min_runs:
        for name, fn in fns.items():
            runs = times[name]
            if len(runs) >= max_runs:
                continue
            fn()
            # the last turn makes up what is missing from min_runs
            want = 1 if turn < turns - 1 else max(1, min_runs - len(runs))
            end = time.perf_counter() + burst_s
            start = len(runs)
            while len(runs) < max_runs and (len(runs) - start < want or
                                            time.perf_counter() < end):
                if cold:
                    flush_cache()
                t0 = time.perf_counter()
                fn()
                runs.append(time.perf_counter() - t0)
        turn += 1
    return {name: Measurement(t) for name, t in times.items()}


__all__ = ["row_budget_s", "Measurement", "measure", "measure_in_turns", "flush_cache", "runs_start_cold"]
