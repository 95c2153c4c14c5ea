"""The lowering pipeline: algorithm + schedule -> loop IR, as an ordered list of passes
(one module each). ``SCHEDLANG_DUMP=1`` prints the IR after every pass and
``SCHEDLANG_DUMP=time`` the time each pass takes.
Example: ``stmt, ctx = lower_pipeline(schedule)``; ``print(stmt)``.
"""
from __future__ import annotations

import os
import sys
import time
import weakref

from ..errors import AlgorithmError, ScheduleError
from . import ir
from .bounds_inference import bounds_inference
from .check_access_bounds import check_access_bounds
from .context import LowerContext
from .debug_bounds import debug_bounds
from .gpu_kernels import gpu_kernels, is_gpu_target
from .hoist_invariant_guards import hoist_invariant_guards
from .inline import inline_functions
from .mark_streaming_stores import mark_streaming_stores
from .merge_prefetches import merge_prefetches
from .partition_loops import partition_loops
from .promote_accumulators import promote_accumulators
from .remove_clamps import remove_clamps
from .remove_guards import remove_guards
from .schedule_functions import schedule_functions
from .simplify import simplify_stmt
from .specialize_tiles import specialize_tiles
from .storage_flattening import storage_flattening
from .tensorize import tensorize
from .unroll import unroll_loops
from .vectorize import vectorize_loops

PASSES = [
    ("inline_functions", inline_functions),
    ("schedule_functions", schedule_functions),
    ("bounds_inference", bounds_inference),
    ("check_access_bounds", check_access_bounds),
    ("specialize_tiles", specialize_tiles),
    ("storage_flattening", storage_flattening),
    ("simplify", lambda s, ctx: simplify_stmt(s)),
    ("remove_guards", remove_guards),
    ("tensorize", tensorize),
    ("debug_bounds", debug_bounds),
    ("unroll_loops", unroll_loops),
    ("partition_loops", partition_loops),
    ("remove_clamps", remove_clamps),
    # GPU code keeps its vectorized loops as loops: a thread's lanes are other threads
    ("vectorize_loops", lambda s, ctx: s if is_gpu_target(ctx.target) else vectorize_loops(s, ctx)),
    ("hoist_invariant_guards", hoist_invariant_guards),
    ("promote_accumulators", promote_accumulators),
    ("final_simplify", lambda s, ctx: simplify_stmt(s, affine_lets=True)),
    ("gpu_kernels", gpu_kernels),
    ("merge_prefetches", merge_prefetches),
    ("mark_streaming_stores", mark_streaming_stores),
]


def lower_pipeline(schedule, target="llvm"):
    """Run every pass in order; returns (loop IR statement, LowerContext)."""
    try:
        return _run_passes(schedule, target, PASSES)
    except AlgorithmError as e:
        raise _blamed_on_schedule(e, schedule, target) from None


# the passes up to the check that every read of an Input is in bounds
_THROUGH_ACCESS_CHECK = PASSES[:[name for name, _ in PASSES].index("check_access_bounds") + 1]


def _blamed_on_schedule(err, schedule, target):
    """``err`` (a read outside an Input that bounds inference could not rule out) as the
    schedule's fault when the algorithm alone passes the same check: directives such as a
    fuse or a vectorized tail make the region to prove looser than the algorithm's. SPEC:
    a schedule compiles or is rejected with a ScheduleError naming its directives."""
    reader = getattr(err, "reader", None)
    if reader is None or not schedule.trace or not _algorithm_alone_passes(schedule, target):
        return err
    mine = [d for d in schedule.trace if d.func == reader]
    shown = "; ".join(d.to_python(schedule.user_funcs) for d in (mine or schedule.trace)[:6])
    what = str(err).split("; ")[0]      # the read and its range, without the advice
    return ScheduleError(f"{what}; the algorithm alone reads inside, so the schedule makes this "
                         f"region larger than bounds inference can prove safe: its directives"
                         f"{' on ' + reader if mine else ''} ({shown}); change them, or read "
                         "the input through a boundary condition (sl.clamp_edge, ...)")


# the first output Func -> {(target, the outputs' ids): whether the unscheduled algorithm
# passes the access check}; a tuner meets many failing candidates of one algorithm, and
# lowering a conv's takes ~1 s
_ALONE_PASSES = weakref.WeakKeyDictionary()


def _algorithm_alone_passes(schedule, target):
    """Whether the algorithm of ``schedule``, unscheduled, passes the access check."""
    from ..schedule.schedule import Schedule
    outputs = list(schedule.outputs)
    known = _ALONE_PASSES.setdefault(outputs[0], {})
    key = (target, tuple(id(o) for o in outputs))
    if key not in known:
        try:
            _run_passes(Schedule(*outputs), target, _THROUGH_ACCESS_CHECK)
            known[key] = True
        except Exception:   # noqa: BLE001 - any failure: the algorithm is not known good
            known[key] = False
    return known[key]


def _run_passes(schedule, target, passes):
    ctx = LowerContext(schedule, target)
    dump = os.environ.get("SCHEDLANG_DUMP", "")
    stmt = None
    total = time.perf_counter()
    for name, fn in passes:
        t0 = time.perf_counter()
        stmt = fn(stmt, ctx)
        dt = time.perf_counter() - t0
        if dump == "time":
            print(f"[schedlang] {name:22s} {dt * 1e3:8.2f} ms", file=sys.stderr)
        elif dump and dump != "0":
            print(f"[schedlang] after {name}:\n{ir.stmt_to_str(stmt)}", file=sys.stderr)
    if dump == "time":
        print(f"[schedlang] {'lowering total':22s} {(time.perf_counter() - total) * 1e3:8.2f} ms",
              file=sys.stderr)
    return stmt, ctx
