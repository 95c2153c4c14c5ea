"""Prove integer facts about expressions with z3, with a cache and a timeout on every query.

``prove(cond, facts)`` is True only when z3 shows that ``cond`` holds for every integer
assignment satisfying all ``facts``; ``counterexample(cond, facts)`` gives an assignment of
the user-visible variables that makes ``cond`` false. Both are conservative: a timeout, an
``unknown`` or any solver error answers "not proven" (False / None).

The model: signed 32/64-bit integer expressions are mathematical integers (their wraparound is
not modelled; unsigned and 8/16-bit arithmetic and explicit narrowing casts wrap), and every
integer variable lies in its type's range (sizes are also >= 0). ``//`` and ``%`` are Python's
floor division and modulo, and division or modulo by zero is 0. Float expressions, math calls,
Func reads, buffer loads and anything not understood become fresh unconstrained values (one per
structurally identical subexpression).
Vector expressions are modelled per lane: ``ramp(b, s, n)`` is ``b + s * lane`` for a lane
``0 <= lane < n`` shared by the whole query, ``x4(v)`` is ``v``; a vector condition is proven
when it holds in every lane.

Example: ``prove(x % n < n, facts=[n > 0])`` is True; ``counterexample(x + 1 < n,
[0 <= x, x < n])`` is ``{"x": n - 1, "n": ...}``.
"""
from __future__ import annotations

import threading
import time

import z3

from ..algo import expr as E
from ..algo import types as T
from . import ir

#: Counters for ``SCHEDLANG_DUMP=time``: queries asked, answered from the cache, answered
#: "unknown" (timeout) by the solver, failed with an exception, and seconds spent solving.
STATS = {"queries": 0, "cache_hits": 0, "unknown": 0, "errors": 0, "solver_s": 0.0}

_LOCK = threading.RLock()
_QUERY_CACHE: dict = {}     # (cond key, frozenset(fact keys), timeout) -> (status, model dict)
_TRANS_CACHE: dict = {}     # structural key -> (z3 expr or None, frozenset of leaf ids)
_LEAVES: dict = {}          # leaf id -> (z3 const, range fact or None, visible name or None)
_DIVMOD: dict = {}          # leaf id -> (quotient, remainder) of a symbolic division
_MAX_CACHE = 200_000

_UNPROVEN, _PROVEN = "unproven", "proven"


def prove(cond, facts=(), timeout_ms=250) -> bool:
    """True only if ``cond`` holds for every integer assignment that satisfies ``facts``."""
    status, _ = _query(cond, facts, timeout_ms)
    return status == _PROVEN


def counterexample(cond, facts=(), timeout_ms=250):
    """``{name: value}`` for the variables in ``cond`` / ``facts`` that makes ``cond`` false while
    every fact holds; None if ``cond`` is proven or the solver cannot decide in time."""
    status, model = _query(cond, facts, timeout_ms)
    return dict(model) if status == "sat" and model is not None else None


def stats() -> dict:
    """A copy of the query counters."""
    return dict(STATS)


def clear_cache():
    """Forget every cached query and translation (the counters are kept)."""
    with _LOCK:
        _QUERY_CACHE.clear()
        _TRANS_CACHE.clear()
        _LEAVES.clear()
        _DIVMOD.clear()


# ----------------------------------------------------------------------------- queries

def _query(cond, facts, timeout_ms):
    cond = _as_expr(cond)
    facts = [_as_expr(f) for f in facts]
    with _LOCK:
        STATS["queries"] += 1
        if len(_TRANS_CACHE) >= _MAX_CACHE or len(_QUERY_CACHE) >= _MAX_CACHE:
            clear_cache()
        try:
            memo = {}
            key = (_key(cond, memo), frozenset(_key(f, memo) for f in facts), int(timeout_ms))
            hash(key)
        except Exception:  # an unhashable constant, say: answer without the cache
            key, memo = None, {}
        if key is not None:
            hit = _QUERY_CACHE.get(key)
            if hit is not None:
                STATS["cache_hits"] += 1
                return hit
        try:
            result = _solve(cond, facts, timeout_ms, memo)
        except Exception:
            STATS["errors"] += 1
            result = (_UNPROVEN, None)
        if key is not None:
            _QUERY_CACHE[key] = result
        return result


def _solve(cond, facts, timeout_ms, memo):
    if isinstance(cond, E.Const) and not cond.dtype.is_float:
        if cond.value:
            return (_PROVEN, None)
    goal, leaves = _translate_bool(cond, memo)
    if goal is None:  # a float comparison, say: nothing can be shown
        return (_UNPROVEN, None)
    assumptions = []
    for f in facts:
        zf, lf = _translate_bool(f, memo)
        if zf is not None:  # an opaque fact constrains nothing: drop it
            assumptions.append(zf)
            leaves = leaves | lf
    visible = []
    for leaf in leaves:
        const, rng, name = _LEAVES[leaf]
        if rng is not None:
            assumptions.append(rng)
        if name is not None:
            visible.append((name, const))
    solver = _make_solver()
    solver.set("timeout", int(timeout_ms))
    solver.add(*assumptions)
    solver.add(z3.Not(goal))
    t0 = time.perf_counter()
    try:
        res = solver.check()
    finally:
        STATS["solver_s"] += time.perf_counter() - t0
    if res == z3.unsat:
        return (_PROVEN, None)
    if res == z3.sat:
        m = solver.model()
        out = {}
        for name, const in sorted(visible, key=lambda p: p[0]):
            v = m.eval(const, model_completion=True)
            if z3.is_int_value(v):
                out[name] = v.as_long()
            elif z3.is_true(v) or z3.is_false(v):
                out[name] = z3.is_true(v)
        return ("sat", out)
    STATS["unknown"] += 1
    return (_UNPROVEN, None)


def _make_solver():
    # Eliminating the equalities first (the definitions of quotients and remainders, and
    # facts like ``x == 7``) turns most index facts into linear ones: ``x // n * n <= x``
    # goes from ~100 ms with the default solver to ~1 ms.
    try:
        return z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()
    except z3.Z3Exception:  # a z3 without one of these tactics
        return z3.Solver()


def _as_expr(c):
    if isinstance(c, (bool, int)) and not isinstance(c, E.Expr):
        return E.Const(c, T.bool_ if isinstance(c, bool) else T.int64)
    return E.to_expr(c)


# ------------------------------------------------------------------------- translation

def _translate_bool(e, m):
    """``e`` as a z3 Bool (an integer means ``e != 0``), or None when it is opaque."""
    z, leaves = _tr(e, m)
    if z is None:
        return None, leaves
    if z3.is_int(z):
        z = z != 0
    return z, leaves


def _tr(e, m):
    """Translate ``e`` to ``(z3 expr or None, leaf ids)``; None means a float value."""
    key = _key(e, m)
    hit = _TRANS_CACHE.get(key)
    if hit is not None:
        return hit
    out = _translate(e, key, m)
    _TRANS_CACHE[key] = out
    return out


_NO_LEAVES = frozenset()
_SKIP_SLOTS = frozenset(("dtype", "_key"))


def _key(e, memo):
    """A hashable structural identity of ``e`` covering every field of every node (unlike a
    key that leaves out, say, the buffer a Load reads); ``memo`` maps id(node) -> key."""
    k = memo.get(id(e))
    if k is not None:
        return k
    if isinstance(e, E.Const):
        k = ("C", type(e.value).__name__, e.value, e.dtype.name, e.dtype.lanes)
    elif isinstance(e, E.Var):
        k = ("V", type(e).__name__, e.name, e.dtype.name, e.dtype.lanes)
    else:
        cls = type(e)
        kids = e.kids()
        kid_fields = set(getattr(cls, "children", ()))
        if isinstance(e, (E.Call, E.FuncRef)):
            kid_fields.add("args")
        extra = []
        for c in cls.__mro__:
            for sl in getattr(c, "__slots__", ()):
                if sl in _SKIP_SLOTS or sl in kid_fields or not hasattr(e, sl):
                    continue
                v = getattr(e, sl)
                if v is None or isinstance(v, (str, int, float, bool)):
                    extra.append((sl, v))
                else:  # a Func, an RDom, ...: identity
                    extra.append((sl, "id", id(v)))
        k = (cls.__name__, e.dtype.name, e.dtype.lanes, tuple(extra),
             tuple(_key(c, memo) for c in kids))
    memo[id(e)] = k
    return k


def _kind(dtype):
    if dtype.is_bool:
        return "bool"
    if dtype.is_int:
        return "int"
    return None


def _range(z, dtype):
    lo, hi = dtype.min_value(), dtype.max_value()
    return z3.And(z >= lo, z <= hi)


def _leaf(leaf_id, make, rng_fn, name):
    if leaf_id not in _LEAVES:
        z = make()
        _LEAVES[leaf_id] = (z, rng_fn(z) if rng_fn is not None else None, name)
    return _LEAVES[leaf_id][0], frozenset((leaf_id,))


def _opaque(e, key):
    """A fresh value standing for ``e`` (of its sort), or None for a float."""
    kind = _kind(e.dtype)
    if kind is None:
        return None, _NO_LEAVES
    leaf_id = ("opaque", key)
    name = f"!opaque{len(_LEAVES)}"
    if kind == "bool":
        return _leaf(leaf_id, lambda: z3.Bool(name), None, None)
    dt = e.dtype.element()
    return _leaf(leaf_id, lambda: z3.Int(name), lambda z: _range(z, dt), None)


def _var(e):
    kind = _kind(e.dtype)
    if kind is None:
        return None, _NO_LEAVES
    dt = e.dtype.element()
    if kind == "bool":
        return _leaf(("var", e.name, "bool"), lambda: z3.Bool(e.name), None, e.name)
    leaf_id = ("var", e.name, "int", dt.name, isinstance(e, E.SizeVar))
    if isinstance(e, E.SizeVar):
        # a kernel refuses any size above MAX_EXTENT when it is called, so loop variables
        # (int32) hold every index below a size: int32(x) is x
        def rng(z):
            return z3.And(z >= 0, z <= T.MAX_EXTENT)
    else:
        def rng(z):
            return _range(z, dt)
    return _leaf(leaf_id, lambda: z3.Int(e.name), rng, e.name)


def _lane(lanes):
    name = f"!lane{lanes}"
    return _leaf(("lane", lanes), lambda: z3.Int(name),
                 lambda z: z3.And(z >= 0, z < lanes), None)


def _translate(e, key, m):
    if isinstance(e, E.Const):
        if e.dtype.is_bool:
            return z3.BoolVal(bool(e.value)), _NO_LEAVES
        if e.dtype.is_int:
            return z3.IntVal(int(e.value)), _NO_LEAVES
        return None, _NO_LEAVES
    if isinstance(e, E.Var):
        return _var(e)
    if isinstance(e, E.BinOp):
        return _binop(e, key, m)
    if isinstance(e, E.UnOp):
        a, la = _tr(e.a, m)
        if a is None:
            return _opaque(e, key)
        if z3.is_bool(a):
            return (z3.Not(a) if e.op == "not" else a), la
        if e.op == "neg":
            return _wrapped(-a, e.dtype), la
        if e.op == "not":
            dt = e.dtype.element()
            return ((dt.max_value() - a) if dt.is_unsigned else (-a - 1)), la
        return _opaque(e, key)
    if isinstance(e, E.Select):
        c, lc = _translate_bool(e.cond, m)
        if c is None:
            c, lc2 = _opaque(e.cond, _key(e.cond, m))
            lc = lc | lc2
        t, lt = _tr(e.t, m)
        f, lf = _tr(e.f, m)
        if t is None or f is None or z3.is_bool(t) != z3.is_bool(f):
            return _opaque(e, key)
        return z3.If(c, t, f), lc | lt | lf
    if isinstance(e, E.Cast):
        return _cast(e, key, m)
    if isinstance(e, E.Call) and e.name == "abs" and len(e.args) == 1:
        a, la = _tr(e.args[0], m)
        if a is not None and z3.is_int(a):
            return z3.If(a < 0, -a, a), la
        return _opaque(e, key)
    if isinstance(e, ir.Ramp):
        base, lb = _tr(e.base, m)
        stride, ls = _tr(e.stride, m)
        if base is None or stride is None or not z3.is_int(base) or not z3.is_int(stride):
            return _opaque(e, key)
        lane, ll = _lane(e.lanes)
        return base + stride * lane, lb | ls | ll
    if isinstance(e, ir.Broadcast):
        v, lv = _tr(e.value, m)
        return (v, lv) if v is not None else _opaque(e, key)
    # Call, FuncRef, Load, Reduce, VectorReduce and anything else: an unknown value.
    return _opaque(e, key)


def _const_int(e):
    return int(e.value) if isinstance(e, E.Const) and e.dtype.is_int else None


def _floordiv(a, bc):
    """``a // bc`` for a constant ``bc`` (z3's Int division is Euclidean)."""
    if bc > 0:
        return a / bc
    if bc < 0:
        return (-a) / (-bc)
    return z3.IntVal(0)


def _floormod(a, bc):
    if bc > 0:
        return a % bc
    if bc < 0:
        return -((-a) % (-bc))
    return z3.IntVal(0)


def _divmod_leaf(a, b, ka, kb):
    """Quotient and remainder of a symbolic divisor as fresh values defined by
    ``a == b*q + r`` with ``r`` between 0 and ``b`` (sign of ``b``); both 0 when ``b == 0``.
    (An If-of-divisions encoding of the same thing is much harder for z3.)"""
    leaf_id = ("divmod", ka, kb)
    if leaf_id not in _LEAVES:
        i = len(_LEAVES)
        q, r = z3.Int(f"!q{i}"), z3.Int(f"!r{i}")
        zero = z3.IntVal(0)
        fact = z3.If(b == 0, z3.And(q == 0, r == 0),
                     z3.And(a == b * q + r,
                            z3.If(b > 0, z3.And(zero <= r, r < b), z3.And(b < r, r <= zero))))
        _LEAVES[leaf_id] = (q, fact, None)
        _DIVMOD[leaf_id] = (q, r)
    q, r = _DIVMOD[leaf_id]
    return q, r, frozenset((leaf_id,))


def _is_low_mask(v):
    return v is not None and v >= 0 and (v & (v + 1)) == 0


def _binop(e, key, m):
    op = e.op
    a, la = _tr(e.a, m)
    b, lb = _tr(e.b, m)
    if a is None or b is None or z3.is_bool(a) != z3.is_bool(b):
        return _opaque(e, key)
    leaves = la | lb
    if z3.is_bool(a):
        if op in ("and", "bitand"):
            return z3.And(a, b), leaves
        if op in ("or", "bitor"):
            return z3.Or(a, b), leaves
        if op in ("ne", "bitxor"):
            return z3.Xor(a, b), leaves
        if op == "eq":
            return a == b, leaves
        return _opaque(e, key)
    if op == "add":
        return _wrapped(a + b, e.dtype), leaves
    if op == "sub":
        return _wrapped(a - b, e.dtype), leaves
    if op == "mul":
        return _wrapped(a * b, e.dtype), leaves
    if op == "min":
        return z3.If(a <= b, a, b), leaves
    if op == "max":
        return z3.If(a >= b, a, b), leaves
    if op == "eq":
        return a == b, leaves
    if op == "ne":
        return a != b, leaves
    if op == "lt":
        return a < b, leaves
    if op == "le":
        return a <= b, leaves
    if op == "gt":
        return a > b, leaves
    if op == "ge":
        return a >= b, leaves
    if op in ("floordiv", "mod"):
        bc = _const_int(e.b)
        if bc is not None:
            return (_floordiv if op == "floordiv" else _floormod)(a, bc), leaves
        q, r, ld = _divmod_leaf(a, b, _key(e.a, m), _key(e.b, m))
        return (q if op == "floordiv" else r), leaves | ld
    if op == "bitand":
        # x & (2**k - 1) == x mod 2**k for two's-complement integers of any sign.
        cb, ca = _const_int(e.b), _const_int(e.a)
        if _is_low_mask(cb):
            return a % (cb + 1), leaves
        if _is_low_mask(ca):
            return b % (ca + 1), leaves
        return _opaque(e, key)
    if op in ("shl", "shr"):
        c = _const_int(e.b)
        if c is not None and 0 <= c < e.dtype.bits:
            if op == "shl":
                return _wrapped(a * (1 << c), e.dtype), leaves
            return a / (1 << c), leaves  # arithmetic shift right == floor division
        return _opaque(e, key)
    # integer "div" (not produced by the algorithm language), bitor, bitxor, ...: unknown.
    return _opaque(e, key)


def _cast(e, key, m):
    src, dst = e.value.dtype.element(), e.dtype.element()
    v, lv = _tr(e.value, m)
    if v is None or dst.is_float:
        return _opaque(e, key)  # float -> int: a fresh value in dst's range
    if dst.is_bool:
        return (v if z3.is_bool(v) else v != 0), lv
    # dst is an integer type
    if z3.is_bool(v):
        return z3.If(v, z3.IntVal(1), z3.IntVal(0)), lv
    if src.is_int and T.can_represent(dst, src):
        return v, lv
    # a narrowing (or sign-changing) conversion wraps modulo 2**bits
    return _wrap_to(v, dst), lv


def _wrap_to(v, dt):
    """``v`` modulo 2**bits, in ``dt``'s range."""
    size = 1 << dt.bits
    if dt.is_unsigned:
        return v % size
    half = size >> 1
    return (v + half) % size - half


def _wrapped(v, dtype):
    """The result ``v`` of arithmetic in ``dtype``: unsigned and 8/16-bit arithmetic wraps
    like C (uint32(i) - 5 is about 4e9 for i < 5); signed 32/64-bit index arithmetic is
    assumed not to overflow (as in Halide)."""
    dt = dtype.element()
    if not dt.is_int or dt.is_index:
        return v
    return _wrap_to(v, dt)
