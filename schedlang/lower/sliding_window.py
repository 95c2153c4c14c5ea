"""Sliding windows (Halide's): a producer stored outside the loop it is computed in keeps
what earlier iterations computed, so an iteration computes only what is new.

With ``s[bx].store_at(by, yo).compute_at(by, yi)`` and ``by[y, x]`` reading ``bx`` at rows
``y .. y + 2``, each iteration of ``yi`` needs rows ``[yi, yi + 3)`` of ``bx``, two of which
the iteration before already stored. The region of ``bx`` computed there becomes ``[yi +
2, yi + 3)`` after the loop's first iteration: one new row instead of three. Used by the
scheduling pass when it places such a producer; it changes only where the producer's
loops start, never what they compute, so results are the same.
Example: ``slide_region(ctx, bx, loop, region)`` -> the region with the window applied.
"""
from __future__ import annotations

from ..algo import expr as E
from . import ir
from .simplify import difference, simplify


def slide_region(ctx, f, loop, region):
    """``region`` ([(min, extent, check)] per dimension, in terms of the variables around
    ``loop``'s body) with the window applied along the one dimension whose region moves
    forward as ``loop`` advances; ``region`` itself when the window does not apply:
    ``loop`` is not serial, ``f`` has update stages, its loop along that dimension is
    split, fused, vectorized or unrolled, or its region moves backward or along several
    dimensions."""
    if loop.kind != "serial" or len(ctx.defs[id(f)]) != 1:
        return region
    v = E.Var(loop.var, loop.min.dtype)
    prev = {loop.var: simplify(v - E.Const(1, v.dtype))}
    moving = None
    for d, (lo, ext, _) in enumerate(region):
        hi = simplify(lo + ext)
        if loop.var not in E.expr_vars(lo) | E.expr_vars(hi):
            continue
        if moving is not None or not (_forward(lo, v) and _forward(hi, v)):
            return region
        moving = d
    if moving is None or not _plain_loop(ctx, f, moving):
        return region
    lo, ext, check = region[moving]
    # after the first iteration, start where the previous iteration's region ended (or
    # where this one starts, if the windows leave a gap)
    done = simplify(ir.substitute(lo + ext, prev))
    first = E.binary("le", v, loop.min)
    new_lo = simplify(E.select(first, lo, E.binary("max", lo, done)))
    # never negative: the region's end does not move backward (checked above)
    new_ext = simplify(lo + ext - new_lo)
    out = list(region)
    out[moving] = (new_lo, new_ext, check)
    return out


def _forward(e, v):
    """``e`` never decreases as ``v`` grows: a constant step of at least 0, or a sum, min or
    max of such parts (a guarded tile's last row ``min(yo * 8 + yi, H - 3)``)."""
    if v.name not in E.expr_vars(e):
        return True
    step = difference(ir.as_int64(simplify(ir.substitute(e, {v.name: v + E.Const(1, v.dtype)}))),
                      ir.as_int64(e))
    if step is not None:
        return step >= 0
    if isinstance(e, E.BinOp) and e.op in ("add", "min", "max"):
        return _forward(e.a, v) and _forward(e.b, v)
    if isinstance(e, E.Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return _forward(e.value, v)
    return False


def _plain_loop(ctx, f, d):
    """``f``'s pure stage loops over dimension ``d`` unsplit, as a serial or parallel loop:
    its loop starts and ends where the region does, so a shorter region cannot shift a
    tail outside it, and no vector or unrolled loop needs a constant extent there."""
    st0 = ctx.schedule.stage_schedules(f)[0]
    name = f.definitions[0].args[d].name
    return any(dim.name == name and dim.kind in ("serial", "parallel") for dim in st0.dims)
