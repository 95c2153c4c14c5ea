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


def _hoist(s):
    if not isinstance(s, ir.For) or s.kind not in ("serial", "unrolled"):
        return None
    body = ir.map_stmt(s.body, _hoist)

    def invariant(e):
        return not ir.reads_memory(e) and not (E.expr_vars(e) & ir.bound_vars(s))

    def loop(inner):
        new = ir.For(s.var, s.min, s.extent, s.kind, inner, s.gpu_dim)
        return _hoist(new) or new
    # a let of the loop's guard (``let i = io*16 + ii; if i < M``) goes out with it
    if isinstance(body, ir.LetStmt) and invariant(body.value):
        return ir.LetStmt(body.var, body.value, loop(body.body), body.in_range)
    if isinstance(body, ir.IfThenElse) and body.else_ is None and invariant(body.cond):
        return ir.IfThenElse(body.cond, loop(body.then))
    return s.replace(body=body)
