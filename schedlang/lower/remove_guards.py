"""Pass: drop the tail guards (``if x < extent``) that always hold, proven with z3 from
what is known on the path to them: loop ranges, let definitions and enclosing
conditions. Splits decided before region sizes were known (a ``compute_at`` producer's
extent is a Let) keep their guards until here; a guard that holds in every iteration
would otherwise stop vectorization.
Example: ``for xo in [0, 2): for xi in [0, 16): if xo*16 + xi < 32: ...`` loses its ``if``.
"""
from __future__ import annotations

from ..algo import expr as E
from . import ir
from .prove import prove
from .simplify import simplify


def remove_guards(stmt, ctx):
    facts = []

    def go(s):
        if s is None:
            return None
        if isinstance(s, ir.Block):
            return ir.make_block([go(c) for c in s.stmts])
        if isinstance(s, ir.For):
            v = E.Var(s.var, s.min.dtype)
            facts.append(E.BinOp("ge", v, s.min))
            facts.append(E.BinOp("lt", v, simplify(E.BinOp("add", s.min, s.extent))))
            body = go(s.body)
            del facts[-2:]
            return s.replace(body=body)
        if isinstance(s, ir.LetStmt):
            known = s.value.dtype.is_int and s.value.dtype.lanes == 1
            if known:
                facts.append(E.BinOp("eq", E.Var(s.var, s.value.dtype), s.value))
            body = go(s.body)
            if known:
                facts.pop()
            return s.replace(body=body)
        if isinstance(s, ir.IfThenElse):
            if s.else_ is None and _is_index_cond(s.cond) and prove(
                    s.cond, facts + list(ctx.facts), timeout_ms=500):
                return go(s.then)
            facts.append(s.cond)
            then = go(s.then)
            facts.pop()
            return ir.IfThenElse(s.cond, then, go(s.else_))
        kw = {f: go(getattr(s, f)) for f in s.children}
        return s.replace(**kw) if kw else s
    return go(stmt)


def _is_index_cond(c):
    """Only integer comparisons of loop arithmetic are worth a proof (no data loads)."""
    found = []
    E.walk_expr(c, lambda n: found.append(1) if isinstance(n, (ir.Load, E.FuncRef, E.Call))
                or n.dtype.is_float else None)
    return not found
