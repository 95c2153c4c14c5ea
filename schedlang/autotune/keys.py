"""What identifies a tuning problem: the algorithm's structural hash, its concrete sizes and
dtypes, the target, the machine, the number of threads the kernel runs on, and the version
of the action set.

Func, Input and RDom names do not enter the hash: the tensor frontend invents them
(``matmul7``), so two builds of the same graph must share a database entry. Instead every
such name gets a canonical position (``algorithm_hash``), and a stored schedule is renamed
onto the current pipeline's names when it is loaded (``Schedule.from_json`` does it).
Example::

    key = workload_key([C], "llvm", threads=2)
    key.digest          # the database key (hex)
    key.names           # C's pipeline names in canonical order: Funcs, Inputs, RDoms
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import numbers
import platform

from ..algo import expr as E
from ..algo.func import Func
from ..errors import AlgorithmError, ScheduleError
from ..schedule.names import pipeline_names, rdoms_in_order
from ..schedule.schedule import Schedule
from ..targets.kernel import MAX_THREADS, default_threads

# Bumped whenever the search's actions or templates change in a way that makes schedules
# stored by an older version not comparable (a key must include anything that changes the
# action set, or a stale best schedule is served for a new search).
ACTION_VERSION = 1


class WorkloadKey:
    """The identity of one tuning problem (see the module docstring)."""

    def __init__(self, algo_hash, sizes, dtypes, target, machine, names, threads):
        self.algo_hash, self.sizes, self.dtypes = algo_hash, sizes, dtypes
        self.target, self.machine, self.names = target, machine, list(names)
        # the best schedule for one thread (no parallel loop, bigger tiles) is not the best
        # for sixteen, so a schedule tuned for one thread count is never served for another
        self.threads = int(threads)
        text = json.dumps([algo_hash, sizes, dtypes, target, machine, self.threads,
                           ACTION_VERSION])
        self.digest = hashlib.sha256(text.encode()).hexdigest()

    def describe(self):
        """A short human-readable description:
        ``I0[64x64] I1[64x64] float32 float32 -> float32 on llvm, 2 threads``."""
        plural = "s" if self.threads != 1 else ""
        return f"{self.sizes} {self.dtypes} on {self.target}, {self.threads} thread{plural}"

    def __repr__(self):
        return f"<WorkloadKey {self.digest[:12]} {self.describe()}>"


def _pipeline(outputs):
    outputs = [outputs] if isinstance(outputs, Func) else list(outputs)
    return outputs, Schedule(*outputs)


def algorithm_hash(outputs):
    """``(hex digest, canonical names)``: a hash equal for structurally identical pipelines
    (same definitions, shapes and dtypes) whatever their Funcs, Inputs and RDoms are called.
    Example: ``algorithm_hash(C)[0]`` is the same for two separately built 64x64 matmuls."""
    outs, s = _pipeline(outputs)
    rdoms = rdoms_in_order(s)
    canon = {}
    for n, f in enumerate(s.funcs):
        canon[("F", f.name)] = f"F{n}"
    for n, i in enumerate(s.inputs):
        canon[("F", i.name)] = f"I{n}"
    for n, r in enumerate(rdoms):
        canon[("R", r.name)] = f"R{n}"
    memo = {}

    def ser(e):
        if e is None:
            return None
        got = memo.get(id(e))
        if got is not None:
            return got
        dt = (e.dtype.name, e.dtype.lanes)
        if isinstance(e, E.Const):
            out = ("C", dt, repr(e.value))
        elif isinstance(e, E.RVar):
            out = ("RV", canon.get(("R", e.rdom.name), e.rdom.name), e.dim)
        elif isinstance(e, E.SizeVar):
            out = ("S", e.name)
        elif isinstance(e, E.Param):
            out = ("P", e.name, dt)
        elif isinstance(e, E.Var):
            out = ("V", e.name, dt)
        elif isinstance(e, E.FuncRef):
            out = ("F", canon.get(("F", e.func.name), e.func.name)) + tuple(ser(a) for a in e.args)
        elif isinstance(e, E.Reduce):
            out = ("R", e.op, dt, canon.get(("R", e.rdom.name), e.rdom.name), ser(e.body))
        else:
            extra = tuple(getattr(e, a) for a in ("op", "name") if hasattr(e, a))
            out = (type(e).__name__, dt) + extra + tuple(ser(k) for k in e.kids())
        # each node is named by a digest of its own fields and its children's digests, so
        # a sub-expression shared many times (a DAG) is written out once: nested tuples
        # printed a 40-deep chain of selects as 3**40 nodes and never finished
        out = hashlib.blake2b(repr(out).encode(), digest_size=16).hexdigest()
        memo[id(e)] = out
        return out

    parts = [("out", tuple(canon[("F", o.name)] for o in outs))]
    for i in s.inputs:
        parts.append(("input", canon[("F", i.name)], i.dtype.name, tuple(ser(x) for x in i.shape)))
    for f in s.funcs:
        shape = None if f.shape is None else tuple(ser(x) for x in f.shape)
        defs = tuple((tuple(ser(a) for a in d.args), ser(d.value),
                      tuple(v.name for v in d.pure_vars), tuple(ser(v) for v in d.rvars),
                      ser(d.predicate)) for d in s.definitions(f))
        parts.append(("func", canon[("F", f.name)], shape, defs))
    for r in rdoms:
        parts.append(("rdom", canon[("R", r.name)], tuple((ser(a), ser(b)) for a, b in r.bounds),
                      ser(r.predicate)))
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()
    return digest, pipeline_names(s)


def concrete_sizes(outputs, sizes=None):
    """``{Input name: shape tuple}`` with every size an int, using ``sizes`` (a dict from
    symbolic size names to ints) for symbolic ones. Raises AlgorithmError naming the Input
    and the size when one stays unknown. Example: ``concrete_sizes(C)`` is
    ``{"A": (64, 64), "B": (64, 64)}``."""
    from ..algo.evaluate import Unbound, evaluate
    _, s = _pipeline(outputs)
    sizes = dict(sizes or {})
    out = {}
    for i in s.inputs:
        shape = []
        for d, x in enumerate(i.shape):
            try:
                shape.append(int(evaluate(x, sizes)))
            except Unbound as u:
                raise AlgorithmError(f"autotune: Input {i.name} dimension {d} is the symbolic size "
                                     f"{u}; tuning needs concrete sizes, pass sizes={{'{u}': ...}}"
                                     ) from None
            if shape[-1] < 0:
                given = f" with sizes={sizes!r}" if sizes else ""
                raise AlgorithmError(f"autotune: Input {i.name} dimension {d} is {shape[-1]}"
                                     f"{given}; a size cannot be negative: pass sizes that "
                                     "make every dimension >= 0, e.g. sizes={'N': 1024}")
        out[i.name] = tuple(shape)
    return out


# Symbolic sizes tuned without values are given the largest of these that keeps every
# Input at most ESTIMATE_ELEMENTS elements (a 1024 x 1024 image, a 128^3 volume).
_ESTIMATES = (1024, 512, 256, 128, 64, 32, 16, 8)
ESTIMATE_ELEMENTS = 1 << 20


def symbolic_sizes(outputs):
    """The names of the symbolic sizes in the pipeline's Input shapes, sorted.
    Example: ``symbolic_sizes(f)`` is ``["N"]`` for ``Input("A", float32, ("N",))``."""
    _, s = _pipeline(outputs)
    return sorted(size_names(i.shape for i in s.inputs))


def size_names(shapes):
    """The set of symbolic size names the dimensions of ``shapes`` (tuples of ints and
    expressions) mention. Example: ``size_names([A.shape])`` is ``{"N"}`` for
    ``Input("A", float32, ("N", 4))``."""
    names = set()
    for shape in shapes:
        for x in shape:
            if isinstance(x, E.Expr):
                E.walk_expr(x, lambda n: names.add(n.name) if isinstance(n, E.SizeVar) else None)
    return names


def estimated_sizes(outputs):
    """Values for the pipeline's symbolic sizes to tune with when the user gave none (as
    Halide's estimates): one value for all, the largest in 1024, 512, ... 8 that keeps
    every Input non-empty and at most ESTIMATE_ELEMENTS elements. A schedule found for
    these sizes is valid for any (its splits keep their tails). Raises AlgorithmError
    when no value fits. Example: ``estimated_sizes(f)`` is ``{"N": 1024}``."""
    names = symbolic_sizes(outputs)
    for n in _ESTIMATES:
        sizes = {name: n for name in names}
        try:
            shapes = concrete_sizes(outputs, sizes)
        except AlgorithmError:
            break
        counts = [math.prod(sh) for sh in shapes.values()]
        if all(0 < c <= ESTIMATE_ELEMENTS for c in counts):
            return sizes
    raise AlgorithmError(f"autotune: no estimate of the symbolic sizes {', '.join(names)} "
                         "gives every Input a sensible size; pass sizes={...} to sl.autotune")


def estimated_sizes_note(outputs, sizes):
    """The warning for tuning at ``estimated_sizes``: what was assumed and how to choose."""
    return (f"schedlang: tuning {', '.join(o.name for o in outputs)} for the estimated sizes "
            f"{', '.join(f'{k}={v}' for k, v in sizes.items())} (its sizes are symbolic); the "
            "schedule runs at any size. Call sl.autotune(f, sizes={...}) to tune for the "
            "sizes you use")


@functools.lru_cache(maxsize=None)
def machine_id(target="llvm"):
    """The machine a measurement was taken on: CPU model, the LLVM CPU name and a hash of the
    CPU feature string (timings and the best schedule differ between machines).
    Example: ``machine_id()`` is like ``"Intel Xeon ... | skylake-avx512 | 3f2a..."``."""
    from ..targets.llvm_jit import _resolve_target
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cpu, features = _resolve_target("llvm")
    feat_hash = hashlib.sha256(features.encode()).hexdigest()[:16]
    return f"{model} | {cpu} | {feat_hash}"


def check_threads(threads, where="autotune"):
    """``threads`` as an int >= 1, or ``default_threads()`` (``SCHEDLANG_NUM_THREADS`` or
    every core) when it is None; anything else raises ScheduleError naming ``where``.
    Example: ``check_threads(None) == default_threads()``."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or \
            not 1 <= threads <= MAX_THREADS:
        raise ScheduleError(f"{where}(threads={threads!r}): the thread count must be an int >= 1 "
                            f"and <= {MAX_THREADS} (the threads each kernel runs on), or "
                            "None for SCHEDLANG_NUM_THREADS / every core")
    return int(threads)


def workload_key(outputs, target="llvm", sizes=None, threads=None):
    """The WorkloadKey of ``outputs`` (a Func or a list) compiled for ``target`` with the
    Input shapes made concrete by ``sizes``, for kernels run on ``threads`` threads
    (default: ``SCHEDLANG_NUM_THREADS`` or every core, as a compiled kernel runs).
    Example: ``workload_key(C, "llvm", threads=1).digest``."""
    threads = check_threads(threads, "workload_key")
    digest, names = algorithm_hash(outputs)
    shapes = concrete_sizes(outputs, sizes)
    _, s = _pipeline(outputs)
    size_text = " ".join(f"{n}[{'x'.join(map(str, sh))}]" for n, sh in
                         zip([f"I{k}" for k in range(len(shapes))], shapes.values()))
    dtype_text = " ".join(i.dtype.name for i in s.inputs) + " -> " + " ".join(
        o.dtype.name for o in s.outputs)
    return WorkloadKey(digest, size_text, dtype_text, target, machine_id(target), names, threads)


__all__ = ["ACTION_VERSION", "WorkloadKey", "algorithm_hash", "workload_key", "check_threads",
           "concrete_sizes", "machine_id"]
