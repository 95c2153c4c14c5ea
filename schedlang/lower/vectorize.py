"""Pass: turn loops marked ``vectorized`` into vector code. The loop variable becomes a
``Ramp``; everything depending on it becomes a vector of the loop's width; contiguous
accesses become vector loads / stores. A loop whose body cannot be expressed in vectors
(a condition that differs per lane, an allocation inside) runs as a serial loop, with
the same results. Example: ``for x in [0, 8) vectorized: out[x] = a[x] * 2`` becomes
``out[ramp(0, 1, 8)] = a[ramp(0, 1, 8)] * x8(2)``.
"""
from __future__ import annotations

import math

from ..algo import expr as E
from ..algo import types as T
from ..errors import ScheduleError
from ..schedule.stage_loops import MAX_VECTOR_LANES, too_many_lanes
from . import ir
from .simplify import _no_overflow, const_value, simplify
from .unroll import describe_extent, describe_loop


class CannotVectorize(Exception):
    """The body needs per-lane control flow: run the loop serially instead."""


def _lanes(e):
    return e.dtype.lanes


def widen(e, lanes):
    return e if _lanes(e) == lanes else ir.Broadcast(e, lanes)


def modulus_remainder(e, scope):
    """``(m, r)`` such that the integer ``e`` is ``r`` modulo ``m`` (``m == 0``: ``e == r``
    exactly), from its sums and products with constants; ``scope`` holds the same facts
    about let-bound variables. Any other value is ``(1, 0)``: nothing known.
    Example: ``modulus_remainder(x * 128 + y * 64 + 16, {})`` is ``(64, 16)``."""
    v = const_value(e)
    if isinstance(v, int) and not isinstance(v, bool):
        return 0, v
    if isinstance(e, E.Var):
        return scope.get(e.name, (1, 0))
    if isinstance(e, E.Cast) and e.dtype.is_int and e.value.dtype.is_int:
        m, r = modulus_remainder(e.value, scope)
        if e.dtype.bits < e.value.dtype.bits:   # wrapping keeps residues modulo 2**bits
            m = math.gcd(m, 1 << e.dtype.bits)
            r %= m
        return m, r
    if isinstance(e, E.BinOp) and e.op in ("add", "sub", "mul"):
        (ma, ra), (mb, rb) = modulus_remainder(e.a, scope), modulus_remainder(e.b, scope)
        if e.op == "mul":
            m = math.gcd(ma * mb, ma * rb, mb * ra)
            r = ra * rb
        else:
            m = math.gcd(ma, mb)
            r = ra + rb if e.op == "add" else ra - rb
        return m, (r % m if m else r)
    return 1, 0


class Vectorizer:
    def __init__(self, var, base, lanes, scope=None):
        self.lanes = lanes
        self.vmap = {var: ir.Ramp(base, E.Const(1, base.dtype), lanes)}
        self.epoch = 0      # bumped when vmap or scope changes: memoized results expire
        self.memo = {}      # id(expr) -> (expr, epoch, vectorized expr)
        # modulus/remainder facts of the scalar lets around and inside the loop
        self.scope = dict(scope or {})

    def expr(self, e):
        if isinstance(e, E.Var):
            return self.vmap.get(e.name, e)
        # a shared sub-expression (x * y reused by each Newton step) is vectorized once:
        # as a tree, each step doubled the work. Keyed by identity, kept with its node
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e and hit[1] == self.epoch:
            return hit[2]
        out = self._expr(e)
        self.memo[id(e)] = (e, self.epoch, out)
        return out

    def _expr(self, e):
        kids = e.kids()
        if not kids:
            return e
        new = [self.expr(k) for k in kids]
        if all(_lanes(k) == 1 for k in new) and all(a is b for a, b in zip(new, kids)):
            return e
        if all(_lanes(k) == 1 for k in new):
            return e.with_kids(tuple(new))
        W = self.lanes
        if isinstance(e, E.BinOp):
            return self.binop(e.op, new[0], new[1], e)
        if isinstance(e, E.Cast):
            v = new[0]
            if isinstance(v, ir.Ramp) and e.dtype.is_int and v.dtype.is_int and (
                    T.can_represent(e.dtype, v.dtype)
                    or (e.dtype.is_index and _no_overflow(v.base, v.stride))):
                # a lane-wise cast stays a ramp only where no lane wraps: a widening, or
                # index math between the signed 32/64-bit types (assumed not to overflow);
                # uint16(ramp(0, 5000, 8)) wraps past 65535 and stays a cast of the ramp
                return ir.Ramp(simplify(E.Cast(e.dtype.element(), v.base)),
                               simplify(E.Cast(e.dtype.element(), v.stride)), W)
            if isinstance(v, ir.Broadcast):
                return ir.Broadcast(E.Cast(e.dtype.element(), v.value), W)
            return E.Cast(e.dtype.with_lanes(W), v)
        if isinstance(e, ir.Load):
            idx = new[0]
            if isinstance(idx, ir.Broadcast):
                return ir.Broadcast(ir.Load(e.buffer, idx.value, e.dtype.element()), W)
            if isinstance(idx, ir.Ramp) and const_value(idx.stride) == 0:
                return ir.Broadcast(ir.Load(e.buffer, idx.base, e.dtype.element()), W)
            return ir.Load(e.buffer, idx, e.dtype.element())
        if isinstance(e, E.Select):
            c, t, f = new
            t, f = widen(t, W), widen(f, W)
            return E.Select(c, t, f)
        if isinstance(e, E.UnOp):
            return E.UnOp(e.op, new[0])
        if isinstance(e, E.Call):
            args = [widen(a, W) for a in new]
            return E.Call(e.name, args, e.dtype.with_lanes(W))
        if isinstance(e, (ir.Ramp, ir.Broadcast, ir.VectorReduce)):
            raise CannotVectorize()
        raise CannotVectorize()

    def binop(self, op, a, b, orig):
        W = self.lanes
        ra, rb = isinstance(a, ir.Ramp), isinstance(b, ir.Ramp)
        sa, sb = _lanes(a) == 1 or isinstance(a, ir.Broadcast), _lanes(b) == 1 or isinstance(
            b, ir.Broadcast)
        scal = (lambda x: x.value if isinstance(x, ir.Broadcast) else x)
        if a.dtype.is_int and op in ("add", "sub"):
            if ra and sb:
                return ir.Ramp(simplify(E.BinOp(op, a.base, scal(b))), a.stride, W)
            if sa and rb:
                stride = b.stride if op == "add" else simplify(E.UnOp("neg", b.stride))
                return ir.Ramp(simplify(E.BinOp(op, scal(a), b.base)), stride, W)
            if ra and rb:
                return ir.Ramp(simplify(E.BinOp(op, a.base, b.base)),
                               simplify(E.BinOp(op, a.stride, b.stride)), W)
        if ra and op in ("floordiv", "mod") and sb:
            same = self._same_quotient(a, scal(b))
            if same is not None:
                q = simplify(E.BinOp("floordiv", a.base, scal(b)))
                return ir.Broadcast(q, W) if op == "floordiv" else \
                    ir.Ramp(simplify(E.BinOp("mod", a.base, scal(b))), a.stride, W)
        if a.dtype.is_int and op == "mul":
            if ra and sb:
                return ir.Ramp(simplify(E.BinOp("mul", a.base, scal(b))),
                               simplify(E.BinOp("mul", a.stride, scal(b))), W)
            if sa and rb:
                return ir.Ramp(simplify(E.BinOp("mul", scal(a), b.base)),
                               simplify(E.BinOp("mul", scal(a), b.stride)), W)
        if sa and sb:
            return ir.Broadcast(E.BinOp(op, scal(a), scal(b)), W)
        a, b = widen(a, W), widen(b, W)
        return E.BinOp(op, a, b, orig.dtype.with_lanes(W))

    def _same_quotient(self, ramp, divisor):
        """Whether every lane of the ramp has the same quotient by the constant ``divisor``:
        the base's remainder modulo gcd(its known modulus, divisor), plus the ramp's span, stays
        under that gcd (e.g. ``ramp(64*t + 16, 1, 16) // 128``, a tile inside a panel).
        Index arithmetic is assumed not to wrap, as for the simplifier's ordering folds."""
        c, stride = const_value(divisor), const_value(ramp.stride)
        if not (isinstance(c, int) and c > 0 and isinstance(stride, int) and stride >= 0
                and _no_overflow(ramp.base)):
            return None
        m, r = modulus_remainder(ramp.base, self.scope)
        g = math.gcd(m, c) if m else c
        return True if r % g + stride * (self.lanes - 1) < g else None

    def stmt(self, s):
        if s is None:
            return None
        if isinstance(s, ir.Block):
            return ir.make_block([self.stmt(c) for c in s.stmts])
        if isinstance(s, ir.Store):
            v, idx = self.expr(s.value), self.expr(s.index)
            if _lanes(idx) == 1:
                if _lanes(v) != 1:
                    raise CannotVectorize()
                return ir.Store(s.buffer, v, idx)
            if isinstance(idx, ir.Broadcast):
                raise CannotVectorize()
            return ir.Store(s.buffer, widen(v, self.lanes), idx)
        if isinstance(s, ir.LetStmt):
            v = self.expr(s.value)
            if isinstance(v, (ir.Ramp, ir.Broadcast)):
                # keep the ramp visible to its uses (contiguous accesses); bind its scalar part
                base = v.base if isinstance(v, ir.Ramp) else v.value
                if base.dtype.is_int:
                    self.scope[s.var] = modulus_remainder(base, self.scope)
                bvar = E.Var(s.var, base.dtype)
                self.epoch += 1
                self.vmap[s.var] = ir.Ramp(bvar, v.stride, v.lanes) if isinstance(v, ir.Ramp) \
                    else ir.Broadcast(bvar, v.lanes)
                return ir.LetStmt(s.var, base, self.stmt(s.body))
            self.epoch += 1
            if _lanes(v) != 1:
                self.vmap[s.var] = E.Var(s.var, v.dtype)
            elif v.dtype.is_int:
                self.scope[s.var] = modulus_remainder(v, self.scope)
            body = self.stmt(s.body)
            return ir.LetStmt(s.var, v, body)
        if isinstance(s, ir.For):
            m, ext = self.expr(s.min), self.expr(s.extent)
            if _lanes(m) != 1 or _lanes(ext) != 1:
                raise CannotVectorize()
            kind = "serial" if s.kind in ("parallel", "vectorized") else s.kind
            return ir.For(s.var, m, ext, kind, self.stmt(s.body), s.gpu_dim, s.rolled)
        if isinstance(s, ir.IfThenElse):
            c = self.expr(s.cond)
            if _lanes(c) != 1:
                raise CannotVectorize()
            return ir.IfThenElse(c, self.stmt(s.then), self.stmt(s.else_))
        if isinstance(s, ir.Evaluate):
            return s
        if isinstance(s, ir.FlatPrefetch):
            idx = self.expr(s.index)
            return s.replace(index=idx.value if isinstance(idx, ir.Broadcast) else idx)
        raise CannotVectorize()


def vectorize_loops(stmt, ctx):
    # modulus/remainder facts of the scalar lets enclosing the statement being rewritten
    scope = {}

    def stmt_fn(s):
        if isinstance(s, ir.LetStmt) and s.value.dtype.is_int and s.value.dtype.lanes == 1:
            saved = scope.get(s.var)
            scope[s.var] = modulus_remainder(s.value, scope)
            body = ir.map_stmt(s.body, stmt_fn)
            if saved is None:
                del scope[s.var]
            else:
                scope[s.var] = saved
            return s.replace(body=body)
        if isinstance(s, ir.For) and s.kind == "vectorized":
            body = ir.map_stmt(s.body, stmt_fn)
            n = const_value(simplify(s.extent))
            dim = ctx.loop_names.get(s.var, (None, s.var))[1]     # the user's loop name
            if n is None:
                raise ScheduleError(f"{describe_loop(ctx, s.var, 'vectorize')}: its extent is "
                                    f"not a compile-time constant ({describe_extent(s.extent)}); "
                                    f"vectorize with a width (vectorize({dim}, 8)) or split it "
                                    "first")
            if n > MAX_VECTOR_LANES:
                raise ScheduleError(too_many_lanes(describe_loop(ctx, s.var, "vectorize"), dim,
                                                   n))
            serial = s.replace(kind="serial", body=body)
            if n == 1 or ctx.debug_bounds:
                return serial
            try:
                return Vectorizer(s.var, simplify(s.min), n, scope).stmt(body)
            except CannotVectorize:
                return serial
        return None
    return ir.map_stmt(stmt, stmt_fn)
