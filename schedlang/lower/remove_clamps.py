"""Pass: drop integer ``min`` / ``max`` bounds that cannot bind where they are evaluated.
A fused loop whose parts are clamped (``y = min(max(p // W, 0), H - 1)``, kept so that
bounds inference sees the range when a tail guard or a symbolic size hides it) turns
into a gather / scatter once vectorized; after loop partitioning the steady part's loop
ranges often prove the clamp is the identity, and without it the fused index folds
back into a dense one. Runs after ``partition_loops`` and before ``vectorize_loops``,
on scalar index arithmetic only (float ``min`` / ``max`` carry NaN semantics; never
touched).
Example: in ``for p in [0, 2688): let y = min(max(p // 56, 0), 55)`` the clamp goes:
``let y = p // 56``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .interval import Interval, Scope, bounds_of
from .simplify import const_value, simplify, simplify_stmt


def _i64(e):
    return e if e.dtype == T.int64 else E.Cast(T.int64, e)


def _le(a, b):
    """True when ``a <= b`` is certain (both known; their difference a constant)."""
    if a is None or b is None:
        return False
    d = const_value(simplify(E.BinOp("sub", _i64(a), _i64(b))))
    return d is not None and d <= 0


class _ClampRemover:
    def __init__(self):
        self.scope = Scope()
        self.removed = 0

    def expr(self, e):
        if not _has_int_minmax(e):
            return e

        def fn(n):
            if not (isinstance(n, E.BinOp) and n.op in ("min", "max") and n.dtype.is_int
                    and n.dtype.lanes == 1):
                return None
            a, b = bounds_of(n.a, self.scope), bounds_of(n.b, self.scope)
            if n.op == "min":
                keep = n.a if _le(a.hi, b.lo) else n.b if _le(b.hi, a.lo) else None
            else:
                keep = n.a if _le(b.hi, a.lo) else n.b if _le(a.hi, b.lo) else None
            self.removed += keep is not None
            return keep
        return E.map_expr(e, fn)

    def stmt(self, s):
        if s is None:
            return None
        if isinstance(s, ir.Block):
            return ir.make_block([self.stmt(c) for c in s.stmts])
        if isinstance(s, ir.For):
            lo, ext = self.expr(s.min), self.expr(s.extent)
            self.scope.push(s.var, Interval(lo, simplify(lo + ext - 1)))
            body = self.stmt(s.body)
            self.scope.pop(s.var)
            return s.replace(min=lo, extent=ext, body=body)
        if isinstance(s, ir.LetStmt):
            value = self.expr(s.value)
            known = value.dtype.is_int and value.dtype.lanes == 1
            self.scope.push(s.var, bounds_of(value, self.scope) if known
                            else Interval(None, None))
            body = self.stmt(s.body)
            self.scope.pop(s.var)
            return s.replace(value=value, body=body)
        kw = {f: self.stmt(getattr(s, f)) for f in s.children}
        for f in s.exprs:
            kw[f] = self.expr(getattr(s, f))
        return s.replace(**kw) if kw else s


def _has_int_minmax(e):
    found = []
    E.walk_expr(e, lambda n: found.append(1) if isinstance(n, E.BinOp) and n.op in (
        "min", "max") and n.dtype.is_int else None)
    return bool(found)


def remove_clamps(stmt, ctx):
    remover = _ClampRemover()
    out = remover.stmt(stmt)
    # an unclamped part is plain div / mod again: substituted, ``y * W + x`` folds into p
    return simplify_stmt(out) if remover.removed else stmt
