"""Pass (GPU targets only): move a guard that does not change inside a loop out of it.
``for k: if i < M: body`` becomes ``if i < M: for k: body``. A thread of a GPU tile that
falls past the edge then skips the whole reduction, and the accumulator of one that does
not is a plain loop that ``promote_accumulators`` keeps in a register (on the CPU,
``partition_loops`` already takes such guards out of the main loops).
Example: see above; a guard reading memory or the loop's own variables stays.
"""
from __future__ import annotations

from ..algo import expr as E
from . import ir
from .gpu_kernels import is_gpu_target


def hoist_invariant_guards(stmt, ctx):
    if not is_gpu_target(ctx.target):
        return stmt
    return ir.map_stmt(stmt, _hoist)


def _reads_memory(e):
    found = []
    E.walk_expr(e, lambda n: found.append(n) if isinstance(n, ir.Load) else None)
    return bool(found)


def _bound_inside(s):
    names = set()
    ir.walk_stmt(s, lambda n: names.add(n.var) if isinstance(n, (ir.For, ir.LetStmt)) else None)
    return names


def _hoist(s):
    if not isinstance(s, ir.For) or s.kind not in ("serial", "unrolled"):
        return None
    body = ir.map_stmt(s.body, _hoist)

    def invariant(e):
        return not _reads_memory(e) and not (E.expr_vars(e) & (_bound_inside(s) | {s.var}))

    def loop(inner):
        new = ir.For(s.var, s.min, s.extent, s.kind, inner, s.gpu_dim)
        return _hoist(new) or new
    # a let of the loop's guard (``let i = io*16 + ii; if i < M``) goes out with it
    if isinstance(body, ir.LetStmt) and invariant(body.value):
        return ir.LetStmt(body.var, body.value, loop(body.body), body.in_range)
    if isinstance(body, ir.IfThenElse) and body.else_ is None and invariant(body.cond):
        return ir.IfThenElse(body.cond, loop(body.then))
    return s.replace(body=body)
