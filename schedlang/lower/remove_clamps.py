"""Pass: drop integer ``min`` / ``max`` bounds that cannot bind where they are evaluated.
A fused loop whose parts are clamped (``y = min(max(p // W, 0), H - 1)``, kept so that
bounds inference sees the range when a tail guard or a symbolic size hides it) turns
into a gather / scatter once vectorized; after loop partitioning the steady part's loop
ranges often prove the clamp is the identity, and without it the fused index folds
back into a dense one. Runs after ``partition_loops`` and before ``vectorize_loops``,
on scalar index arithmetic only (float ``min`` / ``max`` carry NaN semantics; never
touched). The ranges are constant intervals, computed in one pass over each expression:
symbolic bounds would cost a simplification per node, and a clamp that can go is one
against constants.
Example: in ``for p in [0, 2688): let y = min(max(p // 56, 0), 55)`` the clamp goes:
``let y = p // 56``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .simplify import const_value, simplify_stmt

_UNKNOWN = (None, None)


def _add(a, b):
    return (None if a[0] is None or b[0] is None else a[0] + b[0],
            None if a[1] is None or b[1] is None else a[1] + b[1])


def _scale(a, c):
    lo, hi = (None if a[0] is None else a[0] * c), (None if a[1] is None else a[1] * c)
    return (lo, hi) if c >= 0 else (hi, lo)


def _join(op, a, b):
    """Range of min / max of two ranges (None is unbounded on that side)."""
    pick = min if op == "min" else max
    lo = (pick(a[0], b[0]) if a[0] is not None and b[0] is not None
          else (a[0] if b[0] is None else b[0]) if op == "max" else None)
    hi = (pick(a[1], b[1]) if a[1] is not None and b[1] is not None
          else (a[1] if b[1] is None else b[1]) if op == "min" else None)
    return lo, hi


def _wrapping(r, dt):
    """The range ``r`` of a sum, product or cast of type ``dt`` computed as if it could not
    wrap, or ``dt``'s whole range where it may: unsigned and 8/16-bit arithmetic wraps like C
    (``uint8(i) - 2`` is 254 at i = 0); signed 32/64-bit index arithmetic is assumed not to."""
    if dt.is_index:
        return r
    lo, hi = dt.min_value(), dt.max_value()
    return r if r[0] is not None and r[1] is not None and lo <= r[0] and r[1] <= hi \
        else (lo, hi)


class _Ranges:
    """Constant ranges of integer expressions under the enclosing loops and lets."""

    def __init__(self, scope):
        self.scope, self.memo = scope, {}

    def of(self, e):
        hit = self.memo.get(id(e))
        if hit is None:
            hit = self.memo[id(e)] = (e, self._visit(e))
        return hit[1]

    def _visit(self, e):
        if not (e.dtype.is_int and e.dtype.lanes == 1):
            return _UNKNOWN
        c = const_value(e)
        if c is not None:
            return int(c), int(c)
        if isinstance(e, E.Var):
            return self.scope.get(e.name, _UNKNOWN)
        if isinstance(e, E.Cast):
            if not e.value.dtype.is_int:
                return _UNKNOWN
            # widening keeps the range; narrowing index arithmetic (to a signed 32/64-bit
            # type) is assumed not to wrap; any other cast wraps (uint8(i * 37), uint32(i - 5))
            # unless every value fits
            r = self.of(e.value)
            return r if T.can_represent(e.dtype, e.value.dtype) else _wrapping(r, e.dtype)
        if isinstance(e, E.Select):
            t, f = self.of(e.t), self.of(e.f)
            return _join("min", t, f)[0], _join("max", t, f)[1]
        if not isinstance(e, E.BinOp):
            return _UNKNOWN
        a, b = self.of(e.a), self.of(e.b)
        cb = const_value(e.b)
        if e.op == "add":
            return _wrapping(_add(a, b), e.dtype)
        if e.op == "sub":
            return _wrapping(_add(a, (None if b[1] is None else -b[1],
                                      None if b[0] is None else -b[0])), e.dtype)
        if e.op == "mul" and cb is not None:
            return _wrapping(_scale(a, int(cb)), e.dtype)
        if e.op in ("min", "max"):
            return _join(e.op, a, b)
        if e.op == "floordiv" and cb is not None and cb > 0:
            return (None if a[0] is None else a[0] // int(cb),
                    None if a[1] is None else a[1] // int(cb))
        if e.op == "mod" and cb is not None and cb > 0:
            if a[0] is not None and a[1] is not None and a[0] // int(cb) == a[1] // int(cb):
                return a[0] % int(cb), a[1] % int(cb)      # one period: no wrap
            return 0, int(cb) - 1
        return _UNKNOWN


class _ClampRemover:
    def __init__(self):
        self.scope = {}       # loop / let name -> stack of constant (lo, hi) ranges
        self.removed = 0

    def get(self, name, default):
        stack = self.scope.get(name)
        return stack[-1] if stack else default

    def push(self, name, rng):
        self.scope.setdefault(name, []).append(rng)

    def pop(self, name):
        self.scope[name].pop()

    def expr(self, e):
        if not _has_int_minmax(e):
            return e
        ranges = _Ranges(self)

        def fn(n):
            if not (isinstance(n, E.BinOp) and n.op in ("min", "max") and n.dtype.is_int
                    and n.dtype.lanes == 1):
                return None
            a, b = ranges.of(n.a), ranges.of(n.b)
            below = lambda x, y: x[1] is not None and y[0] is not None and x[1] <= y[0]  # noqa
            if n.op == "min":
                keep = n.a if below(a, b) else n.b if below(b, a) else None
            else:
                keep = n.a if below(b, a) else n.b if below(a, b) else None
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
            r_lo, r_ext = _Ranges(self).of(lo), _Ranges(self).of(ext)
            hi = (None if r_lo[1] is None or r_ext[1] is None else r_lo[1] + r_ext[1] - 1)
            self.push(s.var, (r_lo[0], hi))
            body = self.stmt(s.body)
            self.pop(s.var)
            return s.replace(min=lo, extent=ext, body=body)
        if isinstance(s, ir.LetStmt):
            value = self.expr(s.value)
            self.push(s.var, _Ranges(self).of(value))
            body = self.stmt(s.body)
            self.pop(s.var)
            return s.replace(value=value, body=body)
        kw = {f: self.stmt(getattr(s, f)) for f in s.children}
        for f in s.exprs:
            kw[f] = self.expr(getattr(s, f))
        return s.replace(**kw) if kw else s


def _has_int_minmax(e):
    return bool(E.node_flags(e) & E.INT_MINMAX)


def remove_clamps(stmt, ctx):
    remover = _ClampRemover()
    out = remover.stmt(stmt)
    # an unclamped part is plain div / mod again: substituted, ``y * W + x`` folds into p
    return simplify_stmt(out) if remover.removed else stmt
