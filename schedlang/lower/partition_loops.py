"""Pass: loop partitioning. A tail guard (``if x < extent``) inside a vectorized loop
would make the whole loop run serially, and one that an inner serial loop tests again
unchanged (the rows of a guarded strip around a reduction loop) branches in the hot
loop and keeps its sums out of registers; instead, each enclosing loop whose variable
the guard grows with is split into a steady part, where the guard provably holds for
every inner iteration and is dropped, and a short tail that keeps it (as Halide does).
Example: ``for xo in [0, (N+15)//16): vectorized for xi: if xo*16 + xi < N`` becomes
``for xo in [0, N//16): <no guard>`` then ``for xo in [N//16, (N+15)//16): <guard>``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .interval import Interval, Scope, bounds_of
from .simplify import const_value, linear, from_linear, simplify


def _conjuncts(c):
    if isinstance(c, E.BinOp) and c.op == "and":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _and(cs):
    out = None
    for c in cs:
        out = c if out is None else E.BinOp("and", out, c)
    return out



def _threshold(conj, var, scope):
    """The first value of ``var`` for which ``conj`` may fail for some inner iteration
    (the conjunct holds for every smaller value), or None when it does not grow with var."""
    if not (isinstance(conj, E.BinOp) and conj.op in ("lt", "le") and conj.a.dtype.is_int
            and conj.a.dtype.lanes == 1):
        return None
    diff = bounds_of(simplify(ir.as_int64(conj.a) - ir.as_int64(conj.b)), scope).hi
    if diff is None:
        return None
    terms, const = linear(simplify(diff))
    coeff, rest = 0, {}
    for k, (c, x) in terms.items():
        if isinstance(x, E.Var) and x.name == var:
            coeff += c
        else:
            if var in ir.expr_vars(x):
                return None
            rest[k] = [c, x]
    if coeff <= 0:
        return None
    r = from_linear(rest, const, T.int64)
    # holds while coeff*var + r <= limit, limit = -1 for '<' and 0 for '<='
    limit = -1 if conj.op == "lt" else 0
    return simplify(E.BinOp("floordiv", E.BinOp("sub", E.Const(limit, T.int64), r),
                            E.Const(coeff, T.int64)) + 1)


def _never_holds(conj, scope):
    """Whether ``conj`` (an index comparison ``a < b`` or ``a <= b``) fails for every value
    in ``scope``: the least value of ``a - b`` is past the limit (a tail guard in a loop
    tail that lies wholly beyond the extent, ``for x in [4, 8): if x < 4``)."""
    if not (isinstance(conj, E.BinOp) and conj.op in ("lt", "le") and conj.a.dtype.is_int
            and conj.a.dtype.lanes == 1):
        return False
    lo = bounds_of(simplify(ir.as_int64(conj.a) - ir.as_int64(conj.b)), scope).lo
    v = const_value(simplify(lo)) if lo is not None else None
    return v is not None and v > (-1 if conj.op == "lt" else 0)


def _invariant_in(used, loops):
    """True when the names ``used`` do not change along some loop of ``loops`` (for each
    loop, the set of names that do)."""
    return any(not used & names for names in loops)


class _Partitioner:
    def __init__(self):
        self.scope = Scope()
        self.in_tail = 0

    def stmt(self, s, in_vector=False):
        if s is None:
            return None
        if isinstance(s, ir.Block):
            return ir.make_block([self.stmt(c, in_vector) for c in s.stmts])
        if isinstance(s, ir.For):
            if s.kind in ("serial", "parallel") and not in_vector and self.in_tail < 2:
                done = self.partition(s)
                if done is not None:
                    return done
            self.scope.push(s.var, Interval(s.min, simplify(s.min + s.extent - 1)))
            body = self.stmt(s.body, in_vector or s.kind == "vectorized")
            self.scope.pop(s.var)
            return s.replace(body=body) if body is not None else None
        if isinstance(s, ir.LetStmt):
            self.scope.push(s.var, bounds_of(s.value, self.scope) if s.value.dtype.is_int
                            else Interval(None, None))
            body = self.stmt(s.body, in_vector)
            self.scope.pop(s.var)
            return s.replace(body=body) if body is not None else None
        if isinstance(s, ir.IfThenElse) and s.else_ is None:
            if any(_never_holds(c, self.scope) for c in _conjuncts(s.cond)):
                return None         # a guard no iteration passes: dead code
            then = self.stmt(s.then, in_vector)
            return s.replace(then=then) if then is not None else None
        kw = {f: self.stmt(getattr(s, f), in_vector) for f in s.children}
        return s.replace(**kw) if kw else s

    def partition(self, loop):
        """Split ``loop`` if a guard inside a vectorized loop below it grows with its var."""
        found = []   # (conjunct key, threshold)
        lanes = set()   # names whose value differs between the lanes of a vectorized loop

        # the serial loops between ``loop`` and the statement walked, each with the names
        # (its variable, and Lets computed from it) whose value changes along it
        inner = []

        def walk(s, in_vector):
            if s is None:
                return
            if isinstance(s, ir.Block):
                for c in s.stmts:
                    walk(c, in_vector)
                return
            if isinstance(s, ir.For):
                self.scope.push(s.var, Interval(s.min, simplify(s.min + s.extent - 1)))
                if s.kind == "vectorized":
                    lanes.add(s.var)
                if s.kind != "vectorized":
                    inner.append({s.var})
                walk(s.body, in_vector or s.kind == "vectorized")
                if s.kind != "vectorized":
                    inner.pop()
                self.scope.pop(s.var)
                return
            if isinstance(s, ir.LetStmt):
                self.scope.push(s.var, bounds_of(s.value, self.scope) if s.value.dtype.is_int
                                else Interval(None, None))
                used = ir.expr_vars(s.value)
                if used & lanes:
                    lanes.add(s.var)
                grown = [names for names in inner if used & names and s.var not in names]
                for names in grown:
                    names.add(s.var)
                walk(s.body, in_vector)
                for names in grown:
                    names.discard(s.var)
                self.scope.pop(s.var)
                return
            if isinstance(s, ir.IfThenElse) and s.else_ is None and (in_vector or inner):
                for c in _conjuncts(s.cond):
                    # a condition that differs across lanes stops vectorization; one that
                    # an inner loop re-tests unchanged (a row guard around a reduction
                    # loop) branches in the hot loop and keeps its sums out of registers
                    used = ir.expr_vars(c)
                    if not (used & lanes or _invariant_in(used, inner)):
                        continue
                    t = _threshold(c, loop.var, self.scope)
                    if t is not None:
                        found.append((E.structural_key(c), t))
            for f in s.children:
                walk(getattr(s, f), in_vector)
        walk(loop.body, loop.kind == "vectorized")
        if not found:
            return None
        keys = {k for k, _ in found}
        end = found[0][1]
        for _, t in found[1:]:
            end = E.BinOp("min", end, t)
        hi = simplify(loop.min + loop.extent)
        split = simplify(E.BinOp("max", loop.min, E.BinOp("min", end, hi)))

        def drop(s):
            if isinstance(s, ir.IfThenElse) and s.else_ is None:
                keep = [c for c in _conjuncts(s.cond) if E.structural_key(c) not in keys]
                then = ir.map_stmt(s.then, drop)
                return then if not keep else ir.IfThenElse(_and(keep), then)
            return None
        steady = loop.replace(extent=simplify(split - loop.min),
                              body=ir.map_stmt(loop.body, drop))
        tail = loop.replace(min=split, extent=simplify(hi - split))
        self.scope.push(loop.var, Interval(loop.min, simplify(split - 1)))
        body = self.stmt(steady.body)
        steady = steady.replace(body=body) if body is not None else None
        self.scope.pop(loop.var)
        # a tail is partitioned once more (the whole tiles of a last, partial block), no
        # deeper: each level copies the loop body again. Its range starts at the split, so
        # a guard that fails from there on drops the tail's code
        self.scope.push(loop.var, Interval(split, simplify(hi - 1)))
        self.in_tail += 1
        body = self.stmt(tail.body)
        tail = tail.replace(body=body) if body is not None else None
        self.in_tail -= 1
        self.scope.pop(loop.var)
        return ir.make_block([steady, tail])


def partition_loops(stmt, ctx):
    out = _Partitioner().stmt(stmt)
    return out if out is not None else ir.Evaluate(E.Const(0, T.int32))
