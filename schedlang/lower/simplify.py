"""A fast simplifier for the affine cases lowering produces.

Integer sums are put in a canonical linear form (so ``x + 1 - x`` folds and
``min(a, a + 3)`` picks ``a``), constants fold with our semantics (floor division,
division by zero gives 0), and ``(c*x + y) // c`` style patterns reduce. It never
changes a result: sums and products are rewritten only in ways that hold modulo 2**bits,
and the folds that need the true order of values (comparisons, ``min``/``max``, ``//`` and
``%`` by a constant) only where the operands cannot wrap: signed 32/64-bit index
arithmetic that reads no data, assumed not to overflow (as in Halide).
Example: ``simplify((x * 4 + 3) // 4)`` gives ``x``.
"""
from __future__ import annotations

import math

from ..algo import expr as E
from ..algo import types as T
from ..algo.evaluate import fold
from . import ir


def const_value(e):
    """The Python value of a scalar Const, else None."""
    return e.value if isinstance(e, E.Const) and e.dtype.lanes == 1 else None


def mk_const(v, dtype):
    dt = dtype.element()
    if dt.is_int:
        v = E._convert_value(int(v), dt)
    c = E.Const(v, dt)
    return c if dtype.lanes == 1 else ir.Broadcast(c, dtype.lanes)


# ------------------------------------------------------------------ linear forms

def linear(e):
    """``e`` as (terms, const): terms maps structural key -> [coeff, expr]; integer only."""
    terms, const = {}, 0
    stack = [(e, 1)]
    while stack:
        n, c = stack.pop()
        v = const_value(n)
        if v is not None and not isinstance(v, float) and not isinstance(v, bool):
            const += c * v
        elif isinstance(n, E.BinOp) and n.op in ("add", "sub"):
            stack.append((n.b, c if n.op == "add" else -c))
            stack.append((n.a, c))
        elif isinstance(n, E.BinOp) and n.op == "mul" and const_value(n.b) is not None:
            stack.append((n.a, c * const_value(n.b)))
        elif isinstance(n, E.BinOp) and n.op == "mul" and const_value(n.a) is not None:
            stack.append((n.b, c * const_value(n.a)))
        elif isinstance(n, E.UnOp) and n.op == "neg":
            stack.append((n.a, -c))
        else:
            k = E.structural_key(n)
            if k in terms:
                terms[k][0] += c
            else:
                terms[k] = [c, n]
    return terms, const


def _join_div_mod(terms, const):
    """``(a // c) * (m * c) + (a % c) * m`` in a linear form becomes ``a * m`` (a fused
    loop's ``y * W + x``, where ``y = p // W`` and ``x = p % W``, becomes ``p`` again)."""
    for key, (m, e) in list(terms.items()):
        # also under a widening cast: int64(p // W) * W + int64(p % W) is int64(p)
        wide = e.dtype if isinstance(e, E.Cast) and e.dtype.is_int and \
            e.value.dtype.is_int and e.dtype.bits >= e.value.dtype.bits else None
        if wide is not None:
            e = e.value
        if not (isinstance(e, E.BinOp) and e.op == "mod"):
            continue
        c = const_value(e.b)
        div_expr = E.BinOp("floordiv", e.a, e.b)
        div = terms.get(E.structural_key(E.Cast(wide, div_expr) if wide else div_expr))
        if c is None or c <= 0 or div is None or div[0] != m * c or m == 0:
            continue
        div[0] = 0
        terms[key][0] = 0
        inner, k = linear(E.Cast(wide, e.a) if wide else e.a)
        const += m * k
        for ik, (ic, ie) in inner.items():
            if ik in terms:
                terms[ik][0] += m * ic
            else:
                terms[ik] = [m * ic, ie]
    return terms, const


def from_linear(terms, const, dtype):
    pos = [(c, x) for c, x in terms.values() if c > 0]
    neg = [(-c, x) for c, x in terms.values() if c < 0]
    out = None

    def term(c, x):
        return x if c == 1 else E.BinOp("mul", x, mk_const(c, dtype))
    for c, x in pos:
        out = term(c, x) if out is None else E.BinOp("add", out, term(c, x))
    for c, x in neg:
        out = E.BinOp("sub", mk_const(0, dtype) if out is None else out, term(c, x)) \
            if out is not None else E.UnOp("neg", term(c, x))
    if out is None:
        return mk_const(const, dtype)
    if const > 0:
        out = E.BinOp("add", out, mk_const(const, dtype))
    elif const < 0:
        out = E.BinOp("sub", out, mk_const(-const, dtype))
    return out


def difference(a, b):
    """``a - b`` as an int when it is a constant, else None (integer expressions)."""
    if not (a.dtype.is_int and b.dtype.is_int):
        return None
    ta, ca = linear(a)
    tb, cb = linear(b)
    keys = set(ta) | set(tb)
    for k in keys:
        if ta.get(k, [0])[0] != tb.get(k, [0])[0]:
            return None
    return ca - cb


def _is_index_math(e):
    found = []
    E.walk_expr(e, lambda n: found.append(1) if isinstance(n, (E.FuncRef, ir.Load, E.Call))
                or n.dtype.is_float else None)
    return not found


def _no_overflow(*es):
    """Whether ordering folds (``x + 1 > x``, ``(x * 2) // 2 -> x``, ``min(x, x + 3)``) are
    valid for these integer expressions: they are signed, at least 32 bits, and read no
    data. Such index arithmetic over loop variables and sizes is assumed not to overflow (as
    in Halide); narrow or unsigned types, and any value read from memory, wrap like C."""
    return all(e.dtype.is_index and _is_index_math(e)
               for e in es)


def never_negative(e, const_of=const_value):
    """Whether ``e`` is known >= 0: a constant, a size (sizes come from array shapes), or
    sums, products, quotients, remainders (x // 0 and x % 0 are 0), mins, maxes and
    widenings of such (``K // 8``, ``A.shape[0] * A.shape[1]``). ``const_of`` reads a
    constant (bounds inference passes one that simplifies first)."""
    v = const_of(e)
    if v is not None:
        return v >= 0
    if isinstance(e, E.SizeVar):
        return True
    if isinstance(e, E.Cast) and e.dtype.is_int and e.value.dtype.is_int \
            and T.can_represent(e.dtype, e.value.dtype):
        return never_negative(e.value, const_of)
    return isinstance(e, E.BinOp) and e.op in ("add", "mul", "floordiv", "mod", "min", "max") \
        and never_negative(e.a, const_of) and never_negative(e.b, const_of)


def _wrapped_is_zero(d, dtype):
    """Whether a constant difference ``d`` is zero modulo 2**bits (the two sides equal)."""
    return d % (1 << dtype.bits) == 0


# ------------------------------------------------------------------ the simplifier

class Simplifier:
    def __init__(self):
        self.memo = {}

    def __call__(self, e):
        if getattr(e, "_fixed", False):
            return e
        k = id(e)
        hit = self.memo.get(k)
        if hit is not None and hit[0] is e:
            return hit[1]
        kids = e.kids()
        n = e.with_kids(tuple(self(c) for c in kids)) if kids else e
        r = self.visit(n)
        if r is not n and type(r) is type(n) and E.same(r, n):
            r = n       # rebuilt alike (a linear form in canonical order already)
        if r is e:
            # e and all its children simplify to themselves: a later pass (each
            # re-simplifies whole statements) returns it at once. Exact, as the rules
            # depend on the node alone
            e._fixed = True
        self.memo[k] = (e, r)
        return r

    def visit(self, e):
        if isinstance(e, E.BinOp):
            return self.binop(e)
        if isinstance(e, E.Cast):
            return self.cast(e)
        if isinstance(e, E.Select):
            c = const_value(e.cond)
            if c is not None:
                return e.t if c else e.f
            if E.same(e.t, e.f):
                return e.t
            return e
        if isinstance(e, E.UnOp):
            v = const_value(e.a)
            if v is not None:
                if e.op == "neg":
                    return mk_const(-v, e.dtype)
                if e.dtype.is_bool:
                    return mk_const(not v, e.dtype)
                return mk_const(~v, e.dtype)
            if isinstance(e.a, E.UnOp) and e.a.op == e.op:
                return e.a.a
            if e.op == "neg" and e.dtype.is_int:
                return self.canon(e)
            return e
        if isinstance(e, ir.Broadcast) and isinstance(e.value, ir.Broadcast):
            return e
        return e

    def canon(self, e):
        terms, const = linear(e)
        terms, const = _join_div_mod(terms, const)
        terms = {k: v for k, v in terms.items() if v[0] != 0}
        return from_linear(terms, const, e.dtype)

    def cast(self, e):
        v = e.value
        t = e.dtype
        if v.dtype == t:
            return v
        c = const_value(v)
        if c is not None and t.lanes == 1:
            return E.Const(E._convert_value(c, t), t)
        if (t.is_int and t.bits == 64 and isinstance(v, E.Cast) and v.dtype.is_int
                and v.dtype.bits == 32 and v.value.dtype.element() == t.element()
                and _is_index_math(v.value)):
            return v.value          # index math: int64(int32(x)) == x, no overflow assumed
        if (t.is_int and t.bits == 64 and v.dtype.is_int and v.dtype.bits == 32 and v.dtype.is_signed
                and isinstance(v, E.BinOp) and v.op in ("add", "sub", "mul", "min", "max")
                and _is_index_math(v)):
            return self(E.BinOp(v.op, E.Cast(t, v.a), E.Cast(t, v.b)))
        if (t.is_int and t.bits == 64 and v.dtype.is_int and v.dtype.bits == 32 and v.dtype.is_signed
                and isinstance(v, E.BinOp) and v.op in ("floordiv", "mod")
                and (const_value(v.b) or 0) > 0 and _is_index_math(v.a)):
            # a quotient or remainder by a positive constant is the same value in any width:
            # widening first lets the 64-bit index math fold it ((96 io + 6 it + 5) // 6)
            return self(E.BinOp(v.op, self(E.Cast(t, v.a)), E.Cast(t, v.b)))
        return e

    def binop(self, e):
        op, a, b, dt = e.op, e.a, e.b, e.dtype
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None and dt.lanes == 1:
            r = fold(op, ca, cb, a.dtype)
            if r is not None:
                return mk_const(r, dt)
        if op in ("add", "sub", "mul") and dt.is_int:
            if op == "mul" and ca is None and cb is None:
                return e
            return self.canon(e)
        if op == "add" and dt.is_float:
            # only -0.0 is an identity: -0.0 + 0.0 is 0.0
            if cb is not None and cb == 0.0 and math.copysign(1.0, cb) < 0:
                return a
            if ca is not None and ca == 0.0 and math.copysign(1.0, ca) < 0:
                return b
        if op == "mul" and dt.is_float:
            if cb == 1.0:
                return a
            if ca == 1.0:
                return b
        if op in ("floordiv", "div", "mod") and dt.is_int and ca == 0:
            return a        # 0 // x and 0 % x are 0 for every x (x // 0 is 0 here too)
        if op in ("floordiv", "div") and dt.is_int and cb is not None and cb > 0:
            return self.floordiv(a, cb, dt)
        if op == "mod" and dt.is_int and cb is not None and cb > 0:
            return self.mod(a, cb, dt)
        if op in ("min", "max") and dt.lanes == 1:
            return self.minmax(op, a, b, dt)
        if op in E.CMP_OPS and a.dtype.is_int and a.dtype.lanes == 1:
            d = difference(a, b)
            if d is None:
                return e
            if op in ("eq", "ne"):
                # a - b is exact modulo 2**bits, so equality folds even where values wrap
                return mk_const(_wrapped_is_zero(d, a.dtype) == (op == "eq"), dt)
            if _no_overflow(a, b):
                return mk_const(fold(op, d, 0, a.dtype), dt)
            return e
        if op == "and":
            if ca is not None:
                return b if ca else mk_const(False, dt)
            if cb is not None:
                return a if cb else mk_const(False, dt)
        if op == "or":
            if ca is not None:
                return mk_const(True, dt) if ca else b
            if cb is not None:
                return mk_const(True, dt) if cb else a
        return e

    def floordiv(self, a, c, dt):
        if c == 1:
            return a
        if not _no_overflow(a):
            # (x * c) // c is not x once x * c has wrapped
            return E.BinOp("floordiv", a, mk_const(c, dt))
        terms, const = linear(a)
        q = {k: [v[0] // c, v[1]] for k, v in terms.items() if v[0] % c == 0 and v[0] != 0}
        rest = {k: v for k, v in terms.items() if v[0] % c != 0}
        if not rest:
            return from_linear(q, const // c, dt)
        if q or const >= c or const < 0:
            qc, r = divmod(const, c)
            inner = from_linear(rest, r, dt)
            base = E.BinOp("floordiv", inner, mk_const(c, dt))
            qexpr = from_linear(q, qc, dt)
            return self.canon(E.BinOp("add", qexpr, base)) if (q or qc) else base
        return E.BinOp("floordiv", a, mk_const(c, dt))

    def mod(self, a, c, dt):
        if c == 1:
            return mk_const(0, dt)
        if not _no_overflow(a) and c & (c - 1):
            # a wrap changes a value by a multiple of 2**bits, which only a power of two
            # divides: (x * 3 + 1) % 3 is not 1 once x * 3 has wrapped
            return E.BinOp("mod", a, mk_const(c, dt))
        terms, const = linear(a)
        rest = {k: v for k, v in terms.items() if v[0] % c != 0}
        if not rest:
            return mk_const(const % c, dt)
        if len(rest) != len(terms) or const >= c or const < 0:
            return E.BinOp("mod", from_linear(rest, const % c, dt), mk_const(c, dt))
        return E.BinOp("mod", a, mk_const(c, dt))

    def minmax(self, op, a, b, dt):
        if E.same(a, b):
            return a
        if dt.is_int:
            ordered = _no_overflow(a, b)    # may a - b = constant decide the order?
            d = difference(a, b) if ordered else None
            if d is not None:
                return (a if d <= 0 else b) if op == "min" else (a if d >= 0 else b)
            # floor division by one positive constant keeps order: min((K + 7) // 8, K // 8)
            # is K // 8 (a guarded split's steady part)
            if isinstance(a, E.BinOp) and isinstance(b, E.BinOp) and a.op == b.op == "floordiv":
                c = const_value(a.b)
                if c is not None and c > 0 and c == const_value(b.b) and _no_overflow(a.a, b.a):
                    d = difference(a.a, b.a)
                    if d is not None:
                        return (a if d <= 0 else b) if op == "min" else (a if d >= 0 else b)
            # max(K // 8, 0) -> K // 8: sizes come from array shapes, never negative
            if op == "max" and const_value(b) is not None and const_value(b) <= 0 and \
                    never_negative(a):
                return a
            # min(min(x, c1), c2) -> min(x, min(c1, c2)); same for max
            cb = const_value(b)
            if cb is not None and isinstance(a, E.BinOp) and a.op == op and \
                    const_value(a.b) is not None:
                v = min(cb, a.b.value) if op == "min" else max(cb, a.b.value)
                return E.BinOp(op, a.a, mk_const(v, dt))
            # min(x, max(x, y)) -> x ; max(x, min(x, y)) -> x
            other = "max" if op == "min" else "min"
            for p, q in ((a, b), (b, a)):
                if isinstance(q, E.BinOp) and q.op == other and (E.same(q.a, p) or E.same(q.b, p)):
                    return p
            # min(a, min(a', y)) where a - a' is constant
            for p, q in ((a, b), (b, a)):
                if ordered and isinstance(q, E.BinOp) and q.op == op:
                    for x, y in ((q.a, q.b), (q.b, q.a)):
                        d = difference(p, x)
                        if d is not None:
                            keep = p if ((d <= 0) if op == "min" else (d >= 0)) else x
                            return self(E.BinOp(op, keep, y))
        if const_value(a) is not None and const_value(b) is None:
            return E.BinOp(op, b, a)
        return E.BinOp(op, a, b)


# structural key -> simplified expression: lowering simplifies the same region and index
# expressions again and again (a 16-block MLP: ~130k calls, half of them repeats)
_SIMPLIFIED = {}
_SIMPLIFIED_MAX = 50_000


def simplify(e):
    """Simplify one expression (see the module docstring)."""
    if isinstance(e, (E.Const, E.Var)):
        return Simplifier()(e)
    key = E.structural_key(e)
    hit = _SIMPLIFIED.get(key)
    if hit is None:
        hit = Simplifier()(e)
        if len(_SIMPLIFIED) >= _SIMPLIFIED_MAX:
            _SIMPLIFIED.clear()
        _SIMPLIFIED[key] = hit
    return hit


_VARS_CACHE = {}


def _vars_of(key, var_expr):
    """Names read by the value whose structural key is ``key``."""
    hit = _VARS_CACHE.get(key)
    if hit is None:
        hit = _VARS_CACHE[key] = frozenset(_names_in_key(key))
    return hit


def _names_in_key(key):
    if isinstance(key, tuple):
        if len(key) >= 3 and key[0] == "V":
            yield key[2]
        for k in key:
            yield from _names_in_key(k)


def _trivial(v):
    """Values cheap enough to substitute for their Let: constants, plain variables, a
    variable plus a constant and a variable's quotient or remainder by a constant
    (substituting those lets index arithmetic cancel)."""
    if v.dtype.lanes != 1:
        return False
    if isinstance(v, (E.Const, E.Var)):
        return True
    # a variable plus a constant, or a fused loop's row / column (``p // W``, ``p % W``),
    # also of a shifted variable and shifted itself (``(p + 32) // W + 4`` in a loop tail)
    return _shifted_div_mod(v, 3)


def _affine_of_vars(v):
    """A split loop's index, ``io * 96 + it * 6 + 5``: a few variables times constants
    plus a constant. Substituted, a quotient by the split factor folds
    (``(io * 96 + it * 6 + 5) // 6`` is ``io * 16 + it``) and addresses share one base."""
    if not (v.dtype.lanes == 1 and v.dtype.is_index):
        return False
    terms, _ = linear(v)
    return 0 < len(terms) <= 3 and all(isinstance(x, E.Var) for _, x in terms.values())


def _shifted_div_mod(v, depth):
    if isinstance(v, E.Var):
        return True
    return (depth > 0 and isinstance(v, E.BinOp) and v.op in ("add", "sub", "floordiv", "mod")
            and isinstance(v.b, E.Const) and _shifted_div_mod(v.a, depth - 1))


_ONCE_KINDS = ("serial", "unrolled", "vectorized")


def simplify_stmt(s, affine_lets=False):
    """Simplify every expression of a statement; substitute Lets of constants and plain
    variables, drop loops of extent 0, turn serial loops of extent 1 into Lets, and drop ifs
    with a constant condition. With ``affine_lets`` (the last simplification, after
    vectorizing and unrolling), Lets of a few variables times constants are substituted too,
    so a quotient of a split index folds and unrolled addresses share one base."""
    simp = Simplifier()
    env = {}
    bound = {}     # structural key of a Let's value -> the enclosing Let holding it

    def ex(e):
        return simp(ir.substitute(e, env)) if env else simp(e)

    def rebinding(var):
        """Forget the CSE entries whose values read ``var`` (it is being rebound)."""
        gone = {k: v for k, v in bound.items() if var in _vars_of(k, v)}
        for k in gone:
            del bound[k]
        return gone

    def go(n):
        if n is None:
            return None
        if isinstance(n, (ir.LetStmt, ir.For)):
            gone = rebinding(n.var)
            out = go_bind(n)
            bound.update(gone)
            return out
        return go_other(n)

    def go_bind(n):
        if isinstance(n, ir.LetStmt):
            v = ex(n.value)
            key = E.structural_key(v) if v.dtype.lanes == 1 else None
            same = bound.get(key) if key is not None else None
            if same is not None and same.name != n.var:
                v = same       # the same value is already bound: reuse it (CSE)
            if _trivial(v) or (affine_lets and _affine_of_vars(v)):
                env[n.var] = v
                body = go(n.body)
                del env[n.var]
                return body
            shadow = env.pop(n.var, None)
            had = bound.get(key) if key is not None else None
            if key is not None:
                bound[key] = E.Var(n.var, v.dtype)
            body = go(n.body)
            if key is not None:
                if had is None:
                    del bound[key]
                else:
                    bound[key] = had
            if shadow is not None:
                env[n.var] = shadow
            return ir.LetStmt(n.var, v, body, n.in_range) if body is not None else None
        return go_other(n)

    def go_other(n):
        if isinstance(n, ir.IfThenElse):
            c = ex(n.cond)
            v = const_value(c)
            if v is not None:
                return go(n.then if v else n.else_)
            return ir.IfThenElse(c, go(n.then), go(n.else_)) if (n.then or n.else_) else None
        if isinstance(n, ir.For):
            ext = ex(n.extent)
            if const_value(ext) == 0:
                return None
            if const_value(ext) == 1 and n.kind in _ONCE_KINDS:
                # a loop that runs once is a binding: later passes then see addresses that
                # do not change in the loops around it (e.g. accumulators stay in registers)
                return go_bind(ir.LetStmt(n.var, ex(n.min), n.body))
            shadow = env.pop(n.var, None)
            body = go(n.body)
            if shadow is not None:
                env[n.var] = shadow
            if body is None:
                return None
            return ir.For(n.var, ex(n.min), ext, n.kind, body, n.gpu_dim, n.rolled)
        if isinstance(n, ir.Block):
            return ir.make_block([go(c) for c in n.stmts])
        kw = {f: go(getattr(n, f)) for f in n.children}
        if n.children and all(kw[f] is None for f in n.children):
            return None
        for f in n.exprs:
            kw[f] = ex(getattr(n, f))
        if isinstance(n, ir.Allocate):
            kw["extents"] = tuple(ex(x) for x in n.extents)
        elif isinstance(n, ir.Provide):
            kw["args"], kw["value"] = tuple(ex(a) for a in n.args), ex(n.value)
        elif isinstance(n, ir.Realize):
            kw["bounds"] = tuple((ex(a), ex(b)) for a, b in n.bounds)
        elif isinstance(n, ir.TensorOp):
            kw.update({f: getattr(n, f).with_base(ex(getattr(n, f).base))
                       for f in ("out", "a", "b")})
        return n.replace(**kw)
    return go(s) or _nop()


def _nop():
    return ir.Evaluate(E.Const(0, T.int32))
