"""Compiling candidates in a process pool, and checking and timing them in the parent.

A candidate is schedule JSON. A pool worker (forked, so it shares the algorithm objects)
replays it, lowers it, computes its loop-IR features and, when asked, JIT-compiles it,
which leaves the machine code in the on-disk cache. The worker sends the lowered loop IR
back (pickled), so the parent only generates code and loads the cached machine code. The
parent then runs each kernel on fixed random inputs, compares its output with the default
schedule's output (a wrong candidate is dropped and counted), and times it with warm-up
and repeats while the pool is idle, so compiling never disturbs a timing.
Example::

    bench = Bench(outputs, "llvm", threads=2)          # random inputs + reference output
    with CompilePool(outputs, "llvm", jobs=2) as pool:
        results = pool.run([s.to_json() for s in candidates], jit=True, deadline=t_end)
    status, seconds = bench.check_and_time(bench.kernel(s, results[0]), best_s=None)
"""
from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
import pickle
import re
import signal
import sys
import threading
import time

import numpy as np

from ..algo import expr as E
from ..algo.func import definition_exprs
from ..compiler import compile as sl_compile, kernel_args
from ..deep_recursion import deep_recursion
from ..errors import CompileError, ScheduleError, SchedlangError
from ..lower.lower import lower_pipeline
from ..schedule.schedule import Schedule
from ..targets.kernel import Kernel
from .features import loop_features

# Set in the parent before the pool forks; the workers read the algorithm from here.
_JOB = {}

# A compile job is given up when it runs this many times longer than the slowest finished
# one of its batch (and at least HANG_MIN_S seconds).
HANG_FACTOR = 6.0
HANG_MIN_S = 5.0
# how long stopping a compile pool may take before its workers are killed and it is left
POOL_STOP_S = 10.0

# A candidate whose first run is this many times slower than the best so far is not timed
# further: one run already shows it will not be chosen.
SLOW_FACTOR = 4.0

# A default schedule whose first run takes longer than this is timed by one more run
# instead of a median of several (its time is only the reference the others must beat).
DEFAULT_REPEAT_MAX_S = 0.05
# The buffer ``flush_caches`` overwrites: larger than the last-level cache.
FLUSH_BYTES = 64 * 1024 * 1024
_FLUSH_BUFFER = None


def runs_start_cold(inputs, outputs):
    """Whether a kernel with these input arrays (a dict) and output array(s) is timed with
    the caches flushed before each run (as ``schedlang bench`` and the tuner both do):
    when inputs and outputs fit in the caches (FLUSH_BYTES / 2), a hot timing would show
    a speed no caller sees. The choice depends on the data only, never on a candidate's
    own speed, so every schedule of a workload (and every system in one bench row) is
    timed the same way. Example: ``runs_start_cold({"A": a, "B": b}, c)``."""
    nbytes = (sum(np.asarray(a).nbytes for a in inputs.values())
              + sum(np.asarray(a).nbytes for a in _as_tuple(outputs)))
    return nbytes <= FLUSH_BYTES // 2


class CandidateResult:
    """What a worker reports for one candidate: ``ok``; ``kind`` and ``message`` of the
    error when not ok; ``features``; ``ir_hash`` (equal loop IR, equal kernel); ``payload``
    (the pickled loop IR the parent compiles from)."""

    __slots__ = ("ok", "kind", "message", "features", "ir_hash", "payload", "seconds")

    def __init__(self, ok, kind="", message="", features=None, ir_hash="", payload=None,
                 seconds=0.0):
        self.ok, self.kind, self.message = ok, kind, message
        self.features, self.ir_hash, self.payload = features, ir_hash, payload
        self.seconds = seconds


def kernel_name(outputs):
    """The native function name ``sl.compile`` gives the kernel of ``outputs``.
    Example: ``kernel_name([C]) == "sl_C"``."""
    return "sl_" + re.sub(r"\W", "_", "_".join(o.name for o in outputs))


def lower_candidate(outputs, target, schedule_json, jit, threads):
    """Replay, lower, featurize and (with ``jit``) compile one candidate; never raises.
    This is what a pool worker runs. Example:
    ``lower_candidate([C], "llvm", s.to_json(), True, 2).ok``."""
    t0 = time.perf_counter()
    try:
        features, ir_hash, payload = _lower_and_compile(outputs, target, schedule_json, jit,
                                                        threads)
        return CandidateResult(True, features=features, ir_hash=ir_hash, payload=payload,
                               seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a candidate that crashes the compiler is counted
        return _failed(e, t0)


@deep_recursion(CompileError, "lowering a tuning candidate")
def _lower_and_compile(outputs, target, schedule_json, jit, threads):
    """The work of ``lower_candidate``, on the large stack ``sl.compile`` gets when a heavily
    unrolled candidate nests its expressions deeply."""
    s = Schedule.from_json(schedule_json, *outputs)
    stmt, ctx = lower_pipeline(s, target)
    args = kernel_args(stmt, s)
    features, ir_hash = _features_and_hash(stmt, threads)
    payload = _pickle_deep((stmt, args, list(ctx.user_facts), list(ctx.call_checks),
                            dict(ctx.assert_messages)))
    if jit:
        from ..targets.llvm import compile_llvm
        compile_llvm(stmt, args, kernel_name(outputs), target)
    return features, ir_hash, payload


def kernel_result(kern, threads):
    """The CandidateResult of a Kernel compiled already (the default schedule's, made for
    the reference output): its features and IR hash from the loop IR it was built from,
    with no second lowering. Example: ``kernel_result(bench.default_kernel, 2).ir_hash``."""
    features, ir_hash = _features_and_hash(kern.loop_ir_stmt, threads)
    return CandidateResult(True, features=features, ir_hash=ir_hash)


def _features_and_hash(stmt, threads):
    """A candidate's cost-model features and the hash that tells equal loop IR apart (one
    definition, so a worker's candidate and the default compare alike)."""
    return loop_features(stmt, threads), hashlib.sha256(str(stmt).encode()).hexdigest()


def _failed(e, t0):
    """The CandidateResult of a candidate whose compile raised ``e`` (started at ``t0``):
    a SchedlangError keeps its class name, anything else is a "crash"."""
    if isinstance(e, SchedlangError):
        return CandidateResult(False, type(e).__name__, str(e), seconds=time.perf_counter() - t0)
    return CandidateResult(False, "crash", f"{type(e).__name__}: {e}",
                           seconds=time.perf_counter() - t0)


def _pickle_deep(obj):
    """Pickle a loop-IR tree; the pickler recurses once per nesting level and long chains of
    ``let`` statements nest thousands deep, beyond Python's default recursion limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        return pickle.dumps(obj)
    finally:
        sys.setrecursionlimit(old)


def _ignore_interrupt():
    """Pool workers leave Ctrl-C to the parent, which stops them; otherwise each one,
    being in the terminal's process group, prints its own KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_job(schedule_json, jit):
    return lower_candidate(_JOB["outputs"], _JOB["target"], schedule_json, jit, _JOB["threads"])


def jit_payload(outputs, target, result):
    """Compile a lowered candidate (a ``CandidateResult`` from a lowering-only job) into the
    machine-code cache; returns the result, or a failed one. Never raises.
    Example: ``jit_payload([C], "llvm", lowered).ok``."""
    t0 = time.perf_counter()
    try:
        from ..targets.llvm import compile_llvm
        stmt, args = pickle.loads(result.payload)[:2]
        compile_llvm(stmt, args, kernel_name(outputs), target)
        return CandidateResult(True, features=result.features, ir_hash=result.ir_hash,
                               payload=result.payload, seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a candidate that crashes the compiler is counted
        return _failed(e, t0)


def _worker_jit(result):
    return jit_payload(_JOB["outputs"], _JOB["target"], result)


class CompilePool:
    """A pool of ``jobs`` forked worker processes that lower and compile candidates of one
    algorithm. Where fork is not available the candidates are compiled in this process.
    Use it as a context manager; ``run`` returns one CandidateResult per candidate."""

    def __init__(self, outputs, target, jobs=None, threads=None):
        self.outputs, self.target = list(outputs), target
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.threads = threads
        self._pool = None
        self.can_fork = "fork" in multiprocessing.get_all_start_methods() and self.jobs > 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self):
        if self._pool is None and self.can_fork:
            _JOB.update(outputs=self.outputs, target=self.target, threads=self.threads)
            # the parent never times a kernel while the workers compile (the two phases
            # alternate), so the workers run at normal priority
            self._pool = multiprocessing.get_context("fork").Pool(
                self.jobs, initializer=_ignore_interrupt)
        return self._pool

    def close(self):
        """Stop the workers (a compile still running is abandoned)."""
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        # CPython's Pool.terminate can wait forever for its task handler when that thread
        # is blocked writing queued jobs to workers that are already gone (seen once in a
        # full test run); its threads are daemons, so after a while they are left behind
        stopper = threading.Thread(target=pool.terminate, daemon=True)
        stopper.start()
        stopper.join(POOL_STOP_S)
        if stopper.is_alive():
            for worker in getattr(pool, "_pool", ()):
                worker.kill()
            return
        pool.join()

    def run(self, schedule_jsons, jit, deadline, per_job_timeout_s=60.0, min_wait_s=None):
        """Lower (and with ``jit`` compile) every candidate; a candidate not done by
        ``deadline`` (a ``time.perf_counter()`` value) or within ``per_job_timeout_s`` is
        reported as a failure of kind "timeout". ``min_wait_s`` (default HANG_MIN_S): how
        long a job is waited for before it may be given up as hung."""
        return self._map(_worker_job, [(text, jit) for text in schedule_jsons],
                         lambda text, j: lower_candidate(self.outputs, self.target, text, j,
                                                         self.threads),
                         deadline, per_job_timeout_s, min_wait_s)

    def compile_lowered(self, results, deadline, per_job_timeout_s=60.0, min_wait_s=None):
        """JIT-compile candidates lowered by ``run(..., jit=False)`` (into the disk cache)."""
        return self._map(_worker_jit, [(r,) for r in results],
                         lambda r: jit_payload(self.outputs, self.target, r),
                         deadline, per_job_timeout_s, min_wait_s)

    def _map(self, worker_fn, arg_tuples, local_fn, deadline, per_job_timeout_s,
             min_wait_s=None):
        min_wait_s = HANG_MIN_S if min_wait_s is None else min_wait_s
        if not arg_tuples:
            return []
        if self._start() is None:
            out = []
            for args in arg_tuples:
                if time.perf_counter() > deadline:
                    out.append(CandidateResult(False, "timeout", "the tuning budget ran out"))
                    continue
                out.append(local_fn(*args))
            return out
        out = [None] * len(arg_tuples)
        todo = list(range(len(arg_tuples)))
        while todo:
            pool = self._start()
            pending = {k: pool.apply_async(worker_fn, arg_tuples[k]) for k in todo}
            todo = []
            order = sorted(pending)
            for n, k in enumerate(order):
                # results are collected in submission order, so a job has run at most as
                # long as we wait for it here; one far slower than the others (a huge
                # unrolled body in LLVM) is given up so it does not hold the round
                done = [r.seconds for r in out if r is not None and r.ok]
                hang_s = min(per_job_timeout_s, max(min_wait_s, HANG_FACTOR * max(done, default=0)))
                wait = min(hang_s, deadline - time.perf_counter())
                try:
                    if wait <= 0:
                        raise multiprocessing.TimeoutError
                    out[k] = pending[k].get(timeout=wait)
                except multiprocessing.TimeoutError:
                    late = time.perf_counter() >= deadline
                    out[k] = CandidateResult(False, "timeout", "the tuning budget ran out" if late
                                             else f"compiling took more than {hang_s:.0f} s")
                    rest = order[n + 1:]
                    for j in rest:
                        if pending[j].ready():
                            out[j] = pending[j].get()
                        elif late:
                            out[j] = CandidateResult(False, "timeout", "the tuning budget ran out")
                        else:
                            todo.append(j)
                    # the workers may still be busy with given-up jobs: start fresh ones
                    self.close()
                    break
        return out


class _KernelContext:
    """The parts of a LowerContext a Kernel keeps (facts and checks made at lowering)."""

    def __init__(self, user_facts, call_checks, assert_messages):
        self.user_facts, self.call_checks = user_facts, call_checks
        self.assert_messages = assert_messages


def build_kernel(outputs, schedule, result, target):
    """A callable Kernel for a candidate from its worker result: code generation from the
    worker's loop IR, machine code from the disk cache the worker filled (a test may
    replace this function to inject a miscompiling candidate).
    Example: ``build_kernel([C], s, result, "llvm")(A=a, B=b)``."""
    from ..targets.llvm import compile_llvm
    stmt, args, facts, checks, messages = pickle.loads(result.payload)
    module = compile_llvm(stmt, args, kernel_name(outputs), target)
    return Kernel(outputs, schedule, stmt, _KernelContext(facts, checks, messages), module, args,
                  target)


def random_inputs(schedule, shapes, seed=0):
    """Random arguments for every Input (by shape and dtype) and Param of a pipeline.
    Floats are uniform in [0.5, 1.5) (no NaN from log / sqrt, no cancellation to zero),
    integers in [0, 8), bools fair coins. Example: ``random_inputs(sl.Schedule(C), shapes)``."""
    from ..targets.llvm_jit import float32_to_bfloat16_bits
    rng = np.random.default_rng(seed)
    values = {}
    for inp in schedule.inputs:
        shape, dt = shapes[inp.name], inp.dtype
        if dt.is_float:
            a = rng.uniform(0.5, 1.5, size=shape)
            if dt.name == "bfloat16":
                values[inp.name] = float32_to_bfloat16_bits(a.astype(np.float32)).reshape(shape)
            else:
                values[inp.name] = a.astype(dt.numpy)
        elif dt.is_bool:
            values[inp.name] = rng.random(shape) < 0.5
        else:
            values[inp.name] = rng.integers(0, 8, size=shape).astype(dt.numpy)
    params = {}
    exprs = [e for g in schedule.funcs for d in schedule.definitions(g)
             for e in definition_exprs(d)] + list(schedule.assumptions)
    for e in exprs:
        E.walk_expr(e, lambda n: params.setdefault(n.name, n) if isinstance(n, E.Param) else None)
    values.update(_param_values(schedule, shapes, params))
    return values


# Param values tried in turn, the first one that keeps every ``assume`` true is used: a
# Param often scales or offsets values, and 1.25 / 2 keep results in a normal range
_INT_TRIES = (2, 1, 3, 4, 0, 5, 6, 7, 8) + tuple(1 << k for k in range(4, 31)) + (
    -1, -2, -8, -(1 << 10), -(1 << 20))
_FLOAT_TRIES = (1.25, 0.5, 2.0, 1.0, 0.0, 0.25, 4.0, 10.0, 100.0, 1e4, 1e6, -1.25, -100.0)


def _param_values(schedule, shapes, params):
    """A value for each Param (``params``: name -> Param) that keeps the pipeline's
    ``assume`` facts true at these Input ``shapes`` (the kernel refuses arguments that
    break one, and autotune has no Param values from the user); ScheduleError naming the
    Param and the fact when none of the values tried does."""
    from ..algo.evaluate import Unbound, evaluate
    from ..algo.printer import user_text
    env = {}
    for inp in schedule.inputs:
        for x, n in zip(inp.shape, shapes[inp.name]):
            if isinstance(x, E.Var):
                env[x.name] = int(n)
    facts = list(schedule.assumptions)
    # then values next to the facts' constants: assume(p >= 1000) holds for 1000
    consts = []
    for f in facts:
        E.walk_expr(f, lambda n: consts.append(n.value) if isinstance(n, E.Const)
                    and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
                    else None)
    near = [c + d for c in sorted(set(consts), key=abs) for d in (0, 1, -1)]

    def holds(fact, known):
        try:
            return bool(evaluate(fact, known, exact=True))
        except (Unbound, ArithmeticError, ValueError):
            return True      # about a Param not chosen yet, or not decidable here

    chosen = {}
    for name, p in sorted(params.items()):
        if p.dtype.is_bool:
            tries = (True, False)
        elif p.dtype.is_float:
            tries = _FLOAT_TRIES + tuple(float(c) for c in near)
        else:
            lo, hi = p.dtype.min_value(), p.dtype.max_value()
            tries = tuple(dict.fromkeys(v for v in _INT_TRIES + tuple(
                int(c) for c in near if math.isfinite(c)) if lo <= v <= hi))
        for v in tries:
            known = {**env, **chosen, name: v}
            if all(holds(f, known) for f in facts):
                chosen[name] = v
                break
        else:
            broken = [f for f in facts if not holds(f, {**env, **chosen, name: tries[0]})]
            raise ScheduleError(f"autotune: no value tried for Param {name} satisfies "
                                f"assume({user_text(broken[0])}), so the pipeline cannot be "
                                "run on random data to time its schedules; tune a pipeline "
                                f"without that assume, or one where {name} is a constant")
    return chosen


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def outputs_match(got, want):
    """Whether a candidate's output(s) equal the reference's: exactly for integers and
    bools, within reassociation error for floats (relative 1e-3 of the values and of their
    largest magnitude; 2e-2 for 16-bit floats); NaNs and infinities must match in place.
    Example: ``outputs_match(kern(**inputs), reference)``."""
    for g, w in zip(_as_tuple(got), _as_tuple(want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False
        if w.dtype.kind != "f":
            if not np.array_equal(g, w):
                return False
            continue
        tol = 2e-2 if w.dtype.itemsize <= 2 else 1e-3
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if not np.array_equal(np.isnan(g64), np.isnan(w64)):
            return False
        finite = np.isfinite(w64)
        if not np.array_equal(g64[~finite & ~np.isnan(w64)], w64[~finite & ~np.isnan(w64)]):
            return False
        if finite.any():
            gw, ww = g64[finite], w64[finite]
            scale = max(1.0, float(np.max(np.abs(ww))))
            if not np.all(np.abs(gw - ww) <= tol * np.abs(ww) + tol * scale):
                return False
    return True


def too_big_to_allocate(nbytes):
    """The machine's physical memory in bytes when ``nbytes`` is more than half of it (so
    the caller refuses before allocating), else None (also where the OS does not say)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return memory if nbytes > memory // 2 else None


def check_inputs_fit(outputs, shapes):
    """Refuse, before anything is allocated, to measure a pipeline whose random inputs
    (made as float64 first) need more than half the machine's memory."""
    total = sum(8 * int(np.prod(shape, dtype=np.float64)) for shape in shapes.values())
    memory = too_big_to_allocate(total)
    if memory is not None:
        names = ", ".join(o.name for o in outputs)
        raise CompileError(f"autotune of {names}: measuring needs about {total / 2**30:,.1f} GiB "
                           f"for random inputs of shapes {shapes}, more than half of this "
                           f"machine's {memory / 2**30:,.1f} GiB; tune at smaller sizes")


class Bench:
    """Fixed random inputs and the default schedule's output for one algorithm; checks and
    times candidate kernels on them. ``default_s`` is the default schedule's time."""

    def __init__(self, outputs, target, threads, shapes, seed=0):
        self.outputs, self.target = list(outputs), target
        self.threads = threads
        default = Schedule(*self.outputs)
        check_inputs_fit(self.outputs, shapes)
        self.inputs = random_inputs(default, shapes, seed)
        kern = sl_compile(self.outputs, default, target)
        if threads:
            kern.num_threads = threads
        _check_runnable(kern)
        t0 = time.perf_counter()
        self.reference = _copy(kern(**self.inputs))
        first = time.perf_counter() - t0
        self.cold = runs_start_cold(self.inputs, self.reference)
        # the default competes with the candidates, so it is timed as they are (warm-up,
        # then the median of repeats), not by its cold first run; a slow one (which will
        # not win, and whose reruns would eat the search's budget) by that first run
        if first <= DEFAULT_REPEAT_MAX_S:
            self.default_s = self._median_s(kern, min(0.25, max(0.02, 10 * first)))
        else:
            self.default_s = first
        self.default_schedule = default
        self.default_kernel = kern

    def kernel(self, schedule, result):
        """The Kernel of a candidate (see ``build_kernel``)."""
        kern = build_kernel(self.outputs, schedule, result, self.target)
        if self.threads:
            kern.num_threads = self.threads
        return kern

    def check_and_time(self, kern, best_s, budget_s=0.25):
        """``(status, seconds)``: status "wrong" (with seconds None) when the output differs
        from the reference, else "ok" and the median run time. A candidate whose checked run
        is SLOW_FACTOR times slower than ``best_s`` is timed by that one run."""
        _check_runnable(kern)
        t0 = time.perf_counter()
        got = kern(**self.inputs)
        first = time.perf_counter() - t0
        if not outputs_match(got, self.reference):
            return "wrong", None
        del got
        if best_s is not None and first > SLOW_FACTOR * best_s and first > 1e-3:
            return "ok", first
        if first >= budget_s:
            # repeats (three at least, with cold caches) would overrun the timing budget
            # many times over: a run this long is timed well enough by one
            return "ok", first
        budget = min(budget_s, max(0.02, 10 * first))
        return "ok", self._median_s(kern, budget)

    def retime_in_turns(self, kernels, budget_s=0.9):
        """Median seconds of each kernel, timed one run each in turn (cold caches when
        ``self.cold``) until ``budget_s`` is spent and every kernel ran at least 5 times;
        a drift of the machine's speed then affects every kernel alike.
        Example: ``bench.retime_in_turns([k1, k2])``."""
        if not kernels:
            return []
        for kern in kernels:
            kern(**self.inputs)                 # warm-up
        times = [[] for _ in kernels]
        end = time.perf_counter() + budget_s
        while len(times[0]) < 5 or time.perf_counter() < end:
            for kern, ts in zip(kernels, times):
                if self.cold:
                    flush_caches()
                ts.append(kern.time_arguments(self.inputs, warmup=0, repeats=1).median)
        return [float(np.median(ts)) for ts in times]

    def _median_s(self, kern, budget_s):
        """The median run time, with cold caches when ``self.cold`` (``runs_start_cold``)."""
        if not self.cold:
            return kern.time_arguments(self.inputs, warmup=1, budget_s=budget_s).median
        times, end = [], time.perf_counter() + budget_s
        while len(times) < 3 or time.perf_counter() < end:
            flush_caches()
            times.append(kern.time_arguments(self.inputs, warmup=0, repeats=1).median)
        return float(np.median(times))


def _check_runnable(kern):
    """Do before a timed first run what a kernel for a named CPU (``llvm:<cpu>``) does once
    on its first call: check its machine code against this machine's CPU (tens of ms, which
    timed with that run made the default schedule or a candidate look that slow)."""
    getattr(getattr(kern, "module", None), "cannot_run", None)


def flush_caches():
    """Overwrite a buffer larger than the last-level cache (64 MiB), so that the next run
    starts with cold caches. Example: ``flush_caches(); kern(**inputs)``."""
    global _FLUSH_BUFFER
    if _FLUSH_BUFFER is None:
        _FLUSH_BUFFER = np.empty(FLUSH_BYTES // 8, dtype=np.float64)
    _FLUSH_BUFFER.fill(1.0)


def _copy(x):
    return tuple(np.array(a, copy=True) for a in x) if isinstance(x, tuple) else np.array(x,
                                                                                          copy=True)


__all__ = ["CompilePool", "Bench", "CandidateResult", "lower_candidate", "build_kernel",
           "jit_payload", "random_inputs", "outputs_match", "kernel_name", "flush_caches",
           "runs_start_cold"]
