"""Interval arithmetic over symbolic expressions: the core of bounds inference.

``bounds_of(e, scope)`` gives an ``Interval(lo, hi)`` (inclusive, Exprs; None means
unbounded) of an integer expression when the variables in ``scope`` range over their
intervals and every other variable is a fixed symbol.
Example: with ``x`` in ``[0, N - 1]``, ``bounds_of(x + 1, scope)`` is ``[1, N]``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from ..algo.evaluate import fold
from .simplify import const_value, mk_const, never_negative, simplify


class Interval:
    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    @staticmethod
    def point(e):
        return Interval(e, e)

    @property
    def bounded(self):
        return self.lo is not None and self.hi is not None

    def __repr__(self):
        return f"[{self.lo}, {self.hi}]"



def _op(op, a, b):
    if a is None or b is None:
        return None
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None and not (a.dtype.is_float or b.dtype.is_float):
        # most bounds are constants: fold them without building and simplifying a node
        r = fold(op, _as_int64_value(ca, a.dtype), _as_int64_value(cb, b.dtype), T.int64)
        if r is not None:
            return E.Const(r, T.int64) if _INT64_MIN <= r <= _INT64_MAX else mk_const(r, T.int64)
    return simplify(E.BinOp(op, ir.as_int64(a), ir.as_int64(b)))


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _as_int64_value(c, dtype):
    """The value of a constant of ``dtype`` cast to int64 (only a uint64 can wrap)."""
    return int(c) if dtype.is_signed or dtype.bits < 64 else E._convert_value(int(c), T.int64)


def union(a: Interval, b: Interval) -> Interval:
    if a is None:
        return b
    if b is None:
        return a
    return Interval(_op("min", a.lo, b.lo), _op("max", a.hi, b.hi))


def _intersect(a: Interval, b: Interval) -> Interval:
    lo = b.lo if a.lo is None else a.lo if b.lo is None else _op("max", a.lo, b.lo)
    hi = b.hi if a.hi is None else a.hi if b.hi is None else _op("min", a.hi, b.hi)
    return Interval(lo, hi)


def intersect_hi(iv: Interval, hi):
    return Interval(iv.lo, hi if iv.hi is None else _op("min", iv.hi, hi))


def intersect_lo(iv: Interval, lo):
    return Interval(lo if iv.lo is None else _op("max", iv.lo, lo), iv.hi)


def type_range(dt):
    if dt.is_bool:
        return Interval(E.Const(0, T.int64), E.Const(1, T.int64))
    if dt.is_int and dt.bits <= 16:
        return Interval(E.Const(dt.min_value(), T.int64), E.Const(dt.max_value(), T.int64))
    return Interval(None, None)


class Scope:
    """Variable name -> Interval, with nested push/pop."""

    def __init__(self):
        self.vars = {}
        # structural key of an expression -> Intervals known for it on this path (an
        # enclosing ``if k.o * 4 + k.i < K`` bounds that sum, not each variable alone)
        self.exprs = {}

    def push_expr(self, e, iv):
        self.exprs.setdefault(E.structural_key(e), []).append(iv)

    def pop_expr(self, e):
        key = E.structural_key(e)
        self.exprs[key].pop()
        if not self.exprs[key]:
            del self.exprs[key]

    def push(self, name, iv):
        self.vars.setdefault(name, []).append(iv)

    def pop(self, name):
        self.vars[name].pop()
        if not self.vars[name]:
            del self.vars[name]

    def get(self, name):
        s = self.vars.get(name)
        return s[-1] if s else None


def bounds_of(e, scope: Scope) -> Interval:
    """Inclusive bounds of an integer (or bool) expression under ``scope``."""
    return _Bounds(scope).go(e)


class _Bounds:
    def __init__(self, scope):
        self.scope = scope
        self.memo = {}

    def go(self, e):
        k = id(e)
        if k in self.memo:
            return self.memo[k][1]
        r = self.visit(e)
        if not r.bounded and e.dtype.is_int and e.dtype.lanes == 1 and _fixed_symbol(e):
            # sizes and Params only (a size A.shape[0] << 1): one value for the whole kernel
            r = Interval.point(ir.as_int64(e))
        if self.scope.exprs and not isinstance(e, (E.Const, E.Var)):
            for known in self.scope.exprs.get(E.structural_key(e), ()):
                r = _intersect(r, known)
        self.memo[k] = (e, r)
        return r

    def visit(self, e):
        dt = e.dtype
        if isinstance(e, E.Const):
            v = E.Const(int(e.value), T.int64) if not dt.is_float else None
            return Interval(v, v)
        if isinstance(e, E.Var):
            iv = self.scope.get(e.name)
            if iv is not None:
                return iv
            return Interval.point(ir.as_int64(e)) if (dt.is_int or dt.is_bool) else Interval(None, None)
        if isinstance(e, E.Cast):
            if e.dtype.is_float or e.value.dtype.is_float:
                return type_range(e.dtype) if not e.dtype.is_float else Interval(None, None)
            iv = self.go(e.value)
            if T.can_represent(e.dtype, e.value.dtype) or (e.dtype.bits >= 32 and (
                    e.dtype.is_signed or (iv.lo is not None and never_negative(iv.lo)))):
                return iv  # widening, or index narrowing assumed not to overflow
            if e.dtype.bits >= 32:
                # a negative value wraps to a large unsigned one: uint32(i - 5)
                big = E.Const(e.dtype.max_value(), T.int64) if e.dtype.bits < 64 else None
                zero = E.Const(0, T.int64)
                if iv.lo is None or (const_value(iv.lo) is not None and const_value(iv.lo) < 0):
                    return Interval(zero, big)
                # a symbolic minimum: the value's own range wherever that minimum is >= 0
                hi = None if big is None or iv.hi is None else \
                    E.Select(E.BinOp("ge", iv.lo, zero), iv.hi, big)
                return Interval(_op("max", iv.lo, zero), hi)
            return type_range(e.dtype)
        if isinstance(e, E.BinOp):
            return _wrapping(self.binop(e), dt)
        if isinstance(e, E.UnOp) and e.op == "neg":
            a = self.go(e.a)
            return _wrapping(Interval(_neg(a.hi), _neg(a.lo)), dt)
        if isinstance(e, E.Select):
            return union(self.go(e.t), self.go(e.f))
        if isinstance(e, E.Call) and e.name == "abs" and dt.is_int:
            a = self.go(e.args[0])
            if not a.bounded:
                return Interval(E.Const(0, T.int64), None)
            return Interval(E.Const(0, T.int64), _op("max", _neg(a.lo), a.hi))
        if isinstance(e, ir.Ramp):
            b, s = self.go(e.base), self.go(e.stride)
            last = E.BinOp("add", ir.as_int64(e.base), E.BinOp("mul", ir.as_int64(e.stride),
                                                         E.Const(e.lanes - 1, T.int64)))
            return union(b, self.go(simplify(last))) if s.bounded else Interval(None, None)
        if isinstance(e, ir.Broadcast):
            return self.go(e.value)
        return type_range(dt)

    def binop(self, e):
        op = e.op
        if op in E.CMP_OPS or op in ("and", "or"):
            return type_range(T.bool_)
        a, b = self.go(e.a), self.go(e.b)
        if op == "add":
            return Interval(_op("add", a.lo, b.lo), _op("add", a.hi, b.hi))
        if op == "sub":
            return Interval(_op("sub", a.lo, b.hi), _op("sub", a.hi, b.lo))
        if op == "min":
            return Interval(_op("min", a.lo, b.lo) if a.lo is not None and b.lo is not None else None,
                            a.hi if b.hi is None else b.hi if a.hi is None else _op("min", a.hi, b.hi))
        if op == "max":
            return Interval(a.lo if b.lo is None else b.lo if a.lo is None else _op("max", a.lo, b.lo),
                            _op("max", a.hi, b.hi) if a.hi is not None and b.hi is not None else None)
        cb = const_value(e.b)
        ca = const_value(e.a)
        if op == "mul":
            if cb is not None or ca is not None:
                c, x = (cb, a) if cb is not None else (ca, b)
                cexp = E.Const(int(c), T.int64)
                if c >= 0:
                    return Interval(_op("mul", x.lo, cexp), _op("mul", x.hi, cexp))
                return Interval(_op("mul", x.hi, cexp), _op("mul", x.lo, cexp))
            if a.bounded and b.bounded and _nonneg(a.lo) and _nonneg(b.lo):
                return Interval(_op("mul", a.lo, b.lo), _op("mul", a.hi, b.hi))
            return type_range(e.dtype)
        if op in ("floordiv", "div") and e.dtype.is_int:
            if cb is not None and cb > 0:
                c = E.Const(int(cb), T.int64)
                return Interval(_op("floordiv", a.lo, c), _op("floordiv", a.hi, c))
            if cb is not None and cb < 0:
                # floor division by a negative constant reverses the order: x // -3
                c = E.Const(int(cb), T.int64)
                return Interval(_op("floordiv", a.hi, c), _op("floordiv", a.lo, c))
            if a.bounded and _nonneg(a.lo) and b.bounded and _positive(b.lo):
                # a non-negative range over a positive one (x // C, C a size)
                return Interval(_op("floordiv", a.lo, b.hi), _op("floordiv", a.hi, b.lo))
            return type_range(e.dtype)
        if op == "mod" and e.dtype.is_int:
            if cb is not None and cb > 0:
                return Interval(E.Const(0, T.int64), E.Const(int(cb) - 1, T.int64))
            if cb is not None and cb < 0:
                # a floor modulo takes the divisor's sign: x % -3 is in [-2, 0]
                return Interval(E.Const(int(cb) + 1, T.int64), E.Const(0, T.int64))
            if b.lo is not None and _positive(b.lo) and b.hi is not None:
                # a size may be 0 at run time, and x % 0 is 0: [0, max(N - 1, 0)], so a read
                # at ``i % N`` of an empty input is caught (N >= 1 is checked at the call)
                return Interval(E.Const(0, T.int64), _op("max", _op(
                    "sub", b.hi, E.Const(1, T.int64)), E.Const(0, T.int64)))
            return type_range(e.dtype)
        if op == "bitand" and cb is not None and cb >= 0:
            return Interval(E.Const(0, T.int64), E.Const(int(cb), T.int64))
        if op == "shr" and cb is not None and e.dtype.is_int and 0 <= cb < 63:
            c = E.Const(1 << int(cb), T.int64)
            return Interval(_op("floordiv", a.lo, c), _op("floordiv", a.hi, c))
        return type_range(e.dtype)


def _wrapping(iv, dt):
    """``iv``, the range of an integer result of type ``dt`` as if it could not wrap, or
    ``dt``'s whole range where it may wrap: unsigned and 8/16-bit arithmetic wraps like C
    (``uint8(i) * 200``, ``uint32(i) - 5``). Signed 32/64-bit index arithmetic, and an
    unsigned one that stays non-negative, are assumed not to overflow (as in Halide)."""
    dt = dt.element()
    if not dt.is_int or dt.is_index:
        return iv
    lo = None if iv.lo is None else const_value(iv.lo)
    hi = None if iv.hi is None else const_value(iv.hi)
    if lo is not None and hi is not None and dt.min_value() <= lo and hi <= dt.max_value():
        return iv
    if dt.bits < 32:
        return type_range(dt)
    if iv.lo is not None and (lo >= 0 if lo is not None else never_negative(iv.lo)) and (
            hi is None or hi <= dt.max_value()):
        return iv
    return Interval(E.Const(0, T.int64),
                    E.Const(dt.max_value(), T.int64) if dt.bits < 64 else None)


def _fixed_symbol(e):
    """Whether ``e`` is built only of constants, sizes and Params (no loop variable, no
    read of data): a symbol fixed for the whole kernel."""
    ok = [True]

    def visit(n):
        if isinstance(n, E.Var) and not isinstance(n, (E.SizeVar, E.Param)) or isinstance(
                n, (E.FuncRef, ir.Load)):
            ok[0] = False
    E.walk_expr(e, visit)
    return ok[0]


def _neg(x):
    return None if x is None else simplify(E.UnOp("neg", ir.as_int64(x)))


def _nonneg(x):
    return never_negative(x, lambda e: const_value(simplify(e)))


def _positive(x):
    v = const_value(simplify(x))
    if v is not None:
        return v > 0
    return isinstance(x, E.SizeVar)


def min_branches(e, depth=0):
    """Expressions each at least ``e``: ``min(a, b) + r`` is at most ``a + r`` and at most
    ``b + r``; interval arithmetic alone loses that ``a`` and ``r`` cancel (a tile's extent
    ``min(t*16 + 15, N - 1) - t*16 + 1`` is at most 16)."""
    if depth > 4:
        return [e]
    if isinstance(e, E.BinOp) and e.op == "floordiv" and (const_value(e.b) or 0) > 0:
        # floor division by a positive constant is monotone: min(a, b) // c <= a // c
        inner = min_branches(e.a, depth + 1)
        if len(inner) > 1:
            return [E.BinOp("floordiv", x, e.b) for x in inner]
    if isinstance(e, E.BinOp) and e.op == "min":
        return min_branches(e.a, depth + 1) + min_branches(e.b, depth + 1)
    if isinstance(e, E.BinOp) and e.op in ("add", "sub"):
        for side in ("a", "b"):
            x = getattr(e, side)
            if side == "a" and isinstance(x, E.BinOp) and x.op == "min" or \
                    side == "b" and e.op == "sub" and isinstance(x, E.BinOp) and x.op == "max":
                other = e.b if side == "a" else e.a
                out = []
                for part in (x.a, x.b):
                    out += _branch(E.BinOp(e.op, part, other) if side == "a"
                                   else E.BinOp(e.op, other, part), depth + 1)
                return out
            if side == "b" and e.op == "add" and isinstance(x, E.BinOp) and x.op == "min":
                out = []
                for part in (x.a, x.b):
                    out += _branch(E.BinOp("add", e.a, part), depth + 1)
                return out
        inner = min_branches(e.a, depth + 1)
        if len(inner) > 1:
            return [E.BinOp(e.op, x, e.b) for x in inner]
    return [e]


def _branch(e, depth):
    """``min_branches`` of a branch, simplified first: a shifted tile's
    ``min(b + 5, M - 1) - b + 1`` has the branch ``b + 5 - b + 1``, which is 6; split
    further, the ``max`` inside ``b`` would come apart from its other copy."""
    return min_branches(simplify(e), depth)


def constant_upper_bound(e, scope=None):
    """A constant upper bound of the integer expression ``e`` (variables in ``scope`` over
    their intervals, others fixed symbols), or None. Through min, max and a constant added,
    and through the branches of a min (``min(t*6 + 5, M - 1) - t*6 + 1`` is at most 6).
    Example: ``constant_upper_bound(min(x, 7) + 1) == 8``."""
    scope = scope if scope is not None else Scope()
    if isinstance(e, E.BinOp) and e.op in ("min", "max"):
        a, b = constant_upper_bound(e.a, scope), constant_upper_bound(e.b, scope)
        if e.op == "max":
            return None if a is None or b is None else max(a, b)
        return a if b is None else b if a is None else min(a, b)
    if isinstance(e, E.BinOp) and e.op in ("add", "sub") and const_value(e.b) is not None:
        a = constant_upper_bound(e.a, scope)
        if a is not None:
            return a + const_value(e.b) if e.op == "add" else a - const_value(e.b)
    best = None
    for branch in min_branches(e):
        hi = bounds_of(simplify(branch), scope).hi
        c = const_value(simplify(hi)) if hi is not None else None
        if c is not None:
            best = c if best is None else min(best, c)
    return best
