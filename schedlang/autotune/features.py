"""Loop-IR features of a lowered kernel, the cost model's input (versioned).

The features summarise what the generated code does, counted over the loop nest with
every loop's trip count: arithmetic (flops, transcendental calls), memory traffic (bytes
loaded and stored, in total and per loop depth, gathers), vectorization (vector width,
share of stores that are vector stores), parallelism (extent of the parallel loop and the
share of cores it can use), code size after unrolling, guards, storage (allocations) and
working-set estimates (bytes one iteration of a loop touches, against cache sizes).
Counts enter as log2(1 + x) so that a linear model sees ratios. Bump FEATURE_VERSION
whenever the list or a definition changes: the database keeps features per version.
Example::

    stmt = sl.lower(C, s)
    vec = loop_features(stmt)            # len(vec) == len(FEATURE_NAMES)
"""
from __future__ import annotations

import math
import os

from ..algo import expr as E
from ..algo.evaluate import Unbound, evaluate
from ..lower import ir

FEATURE_VERSION = 1
MAX_DEPTH_FEATURES = 6
L1_BYTES = 32 * 1024
L2_BYTES = 1024 * 1024
# A loop extent that cannot be evaluated (it depends on a runtime value) counts as this.
UNKNOWN_EXTENT = 16

FEATURE_NAMES = (
    ["log_flops", "log_load_bytes", "log_store_bytes", "log_stores_executed",
     "vector_store_share", "log_max_lanes", "log_parallel_extent", "parallel_core_share",
     "log_static_stores", "log_guards_executed", "log_alloc_bytes", "log_max_alloc_bytes"]
    + [f"log_bytes_depth{d}" for d in range(MAX_DEPTH_FEATURES)]
    + ["log_gather_elements", "log_transcendentals", "log_arith_intensity", "log_max_depth",
       "log_loops", "log_innermost_iter_bytes", "log_iters_over_l2", "log_iters_over_l1",
       "log_scalar_load_elements"])


class _Counts:
    def __init__(self):
        self.flops = self.load_bytes = self.store_bytes = self.stores = 0.0
        self.vector_elems = self.elems = 0.0
        self.max_lanes = 1
        self.parallel = 0.0
        self.static_stores = 0
        self.guards = 0.0
        self.alloc_bytes = self.max_alloc = 0.0
        self.depth_bytes = [0.0] * MAX_DEPTH_FEATURES
        self.gathers = self.transcendental = self.scalar_loads = 0.0
        self.max_depth = 0
        self.loops = 0
        self.innermost_bytes = self.innermost_trips = 0.0
        self.over_l2 = self.over_l1 = 0.0


def _value(e, env, default=UNKNOWN_EXTENT):
    try:
        v = evaluate(e, env)
        return float(v) if v is not None else float(default)
    except (Unbound, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return float(default)


def _expr_costs(e, c, trips):
    """Add the arithmetic and loads of expression ``e`` (executed ``trips`` times)."""
    touched = 0.0

    def visit(n):
        nonlocal touched
        lanes = n.dtype.lanes
        if isinstance(n, ir.Load):
            nbytes = lanes * n.dtype.bytes
            c.load_bytes += nbytes * trips
            touched += nbytes
            if lanes > 1 and not isinstance(n.index, ir.Ramp):
                c.gathers += lanes * trips
            elif lanes == 1:
                c.scalar_loads += trips
        elif isinstance(n, E.BinOp) and n.dtype.is_float and n.op in (
                "add", "sub", "mul", "div", "min", "max"):
            c.flops += lanes * trips
        elif isinstance(n, E.Call):
            c.transcendental += lanes * trips
            c.flops += lanes * trips
    E.walk_expr(e, visit)
    return touched


def _walk(s, c, trips, depth, env):
    """Accumulate counts of statement ``s`` run ``trips`` times at loop depth ``depth``;
    returns the bytes one execution of ``s`` touches."""
    if s is None:
        return 0.0
    if isinstance(s, ir.Block):
        return sum(_walk(x, c, trips, depth, env) for x in s.stmts)
    if isinstance(s, ir.For):
        lo = _value(s.min, env, 0)
        ext = max(1.0, _value(s.extent, env))
        c.loops += 1
        c.max_depth = max(c.max_depth, depth + 1)
        if s.kind == "parallel" and c.parallel == 0:
            c.parallel = ext
        inner_env = dict(env)
        inner_env[s.var] = int(lo)
        loops_before = c.loops
        per_iter = _walk(s.body, c, trips * ext, depth + 1, inner_env)
        if c.loops == loops_before:       # no loop inside: an innermost loop
            c.innermost_bytes += per_iter * trips * ext
            c.innermost_trips += trips * ext
        if per_iter > L2_BYTES:
            c.over_l2 += trips * ext
        if per_iter > L1_BYTES:
            c.over_l1 += trips * ext
        return per_iter * ext
    if isinstance(s, ir.LetStmt):
        inner_env = dict(env)
        try:
            inner_env[s.var] = evaluate(s.value, env)
        except (Unbound, TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass
        return _expr_costs(s.value, c, trips) + _walk(s.body, c, trips, depth, inner_env)
    if isinstance(s, ir.Store):
        lanes = s.value.dtype.lanes
        nbytes = lanes * s.value.dtype.bytes
        c.store_bytes += nbytes * trips
        c.stores += trips
        c.static_stores += 1
        c.elems += lanes * trips
        if lanes > 1:
            c.vector_elems += lanes * trips
        c.max_lanes = max(c.max_lanes, lanes)
        touched = nbytes + _expr_costs(s.value, c, trips) + _expr_costs(s.index, c, trips)
        c.depth_bytes[min(depth, MAX_DEPTH_FEATURES - 1)] += touched * trips
        return touched
    if isinstance(s, ir.IfThenElse):
        c.guards += trips
        return (_expr_costs(s.cond, c, trips) + _walk(s.then, c, trips, depth, env)
                + _walk(s.else_, c, trips, depth, env))
    if isinstance(s, ir.Allocate):
        size = s.dtype.bytes
        for x in s.extents:
            size *= max(1.0, _value(x, env))
        c.alloc_bytes += size * (trips if depth else 1)
        c.max_alloc = max(c.max_alloc, size)
        return _walk(s.body, c, trips, depth, env)
    touched = 0.0
    for e in ir.stmt_exprs(s):
        touched += _expr_costs(e, c, trips)
    for f in s.children:
        touched += _walk(getattr(s, f), c, trips, depth, env)
    return touched


def _lg(x):
    return math.log2(1.0 + max(0.0, float(x)))


def loop_features(stmt, threads=None):
    """The feature vector (a list of floats, FEATURE_NAMES order) of lowered loop IR
    ``stmt`` for a kernel run on ``threads`` threads (default: every core). Example:
    ``loop_features(sl.lower(C, s))[FEATURE_NAMES.index("log_flops")]``."""
    threads = threads or os.cpu_count() or 1
    c = _Counts()
    _walk(stmt, c, 1.0, 0, {})
    traffic = c.load_bytes + c.store_bytes
    inner = c.innermost_bytes / c.innermost_trips if c.innermost_trips else 0.0
    out = [_lg(c.flops), _lg(c.load_bytes), _lg(c.store_bytes), _lg(c.stores),
           c.vector_elems / c.elems if c.elems else 0.0, math.log2(c.max_lanes),
           _lg(c.parallel), min(c.parallel, threads) / threads if c.parallel else 0.0,
           _lg(c.static_stores), _lg(c.guards), _lg(c.alloc_bytes), _lg(c.max_alloc)]
    out += [_lg(b) for b in c.depth_bytes]
    out += [_lg(c.gathers), _lg(c.transcendental), _lg(c.flops) - _lg(traffic),
            _lg(c.max_depth), _lg(c.loops), _lg(inner), _lg(c.over_l2), _lg(c.over_l1),
            _lg(c.scalar_loads)]
    return out


__all__ = ["FEATURE_VERSION", "FEATURE_NAMES", "loop_features"]
