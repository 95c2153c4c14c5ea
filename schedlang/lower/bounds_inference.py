"""Pass: bounds inference. Fills in the region of every ``Realize`` from what its body
reads and writes, and provides ``func_box`` (the box of a Func's accesses in a
statement) for the scheduling pass that computes each producer's demanded region.
Example: if ``g[x] = f[x - 1] + f[x + 1]`` for x in [0, N), ``f``'s box is [-1, N].
"""
from __future__ import annotations

import re

from ..algo import expr as E
from ..errors import AlgorithmError
from . import ir
from .interval import Interval, Scope, bounds_of, intersect_hi, intersect_lo, union
from .simplify import simplify



def _first_store(s):
    """The Func of the first Provide in statement ``s``, or None."""
    if isinstance(s, ir.Provide):
        return s.func
    for c in ir.child_stmts(s):
        found = None if c is None else _first_store(c)
        if found is not None:
            return found
    return None


class AccessBoxes:
    """Walks a statement, keeping the ranges of the loops and lets it passes through, and
    calls ``visit(kind, func, args, scope, site)`` for every read ("call") and write
    ("provide"). ``site`` is the Func of the enclosing Provide (who reads)."""

    def __init__(self, visit, scope=None, track_facts=False, only=None):
        self.visit, self.scope = visit, scope or Scope()
        # with ``only`` (a Func), statements that do not mention it are skipped
        self.only = None if only is None else id(only)
        # with track_facts, ``facts`` holds what is known on the current path (loop ranges,
        # let definitions, if conditions) for exact reasoning with z3
        self.track, self.facts = track_facts, []
        self.lets = {}      # the let definitions in scope, for relational loop bounds

    def _fact(self, e):
        if self.track:
            self.facts.append(simplify(e))
            return 1
        return 0

    def _drop(self, n):
        for _ in range(n):
            self.facts.pop()

    def stmt(self, s, site=None):
        if s is None or (self.only is not None and self.only not in ir.funcs_mentioned(s)):
            return
        sc = self.scope
        if isinstance(s, ir.Block):
            for c in s.stmts:
                self.stmt(c, site)
        elif isinstance(s, ir.For):
            self.expr(s.min, site)
            self.expr(s.extent, site)
            lo = bounds_of(s.min, sc)
            hi = self._loop_max(s, sc)
            sc.push(s.var, Interval(lo.lo, hi))
            v = E.Var(s.var, s.min.dtype)
            n = self._fact(E.BinOp("ge", v, s.min)) + self._fact(
                E.BinOp("lt", v, simplify(E.BinOp("add", s.min, s.extent))))
            self.stmt(s.body, site)
            self._drop(n)
            sc.pop(s.var)
        elif isinstance(s, ir.LetStmt):
            # a let ahead of the stores that use it (an argmax's comparison) reads for them
            self.expr(s.value, site or _first_store(s.body))
            iv = _promised_bounds(s.value, s.in_range, sc, self._clamp_bound) \
                if s.in_range is not None and not isinstance(s.in_range, tuple) \
                else bounds_of(s.value, sc) if (s.value.dtype.is_int or s.value.dtype.is_bool) \
                else Interval(None, None)
            if isinstance(s.in_range, tuple):
                # a promised [lo, hi] (a split variable whose tail stays in its region):
                # tighter than its loops bounded apart when the region's min and extent
                # move together
                lo, hi = (self._clamp_bound(b, sc, side) for b, side in
                          zip(s.in_range, ("lo", "hi")))
                iv = iv if lo is None else intersect_lo(iv, lo)
                iv = iv if hi is None else intersect_hi(iv, hi)
            sc.push(s.var, iv)
            n = self._fact(E.BinOp("eq", E.Var(s.var, s.value.dtype), s.value)) \
                if s.value.dtype.is_int and s.value.dtype.lanes == 1 else 0
            outer = self.lets.get(s.var)
            self.lets[s.var] = s.value
            self.stmt(s.body, site)
            if outer is None:
                del self.lets[s.var]
            else:
                self.lets[s.var] = outer
            self._drop(n)
            sc.pop(s.var)
        elif isinstance(s, ir.IfThenElse):
            self.expr(s.cond, site)
            pushed, pushed_exprs = self._refine(s.cond)
            n = self._fact(s.cond)
            self.stmt(s.then, site)
            self._drop(n)
            for name in pushed:
                sc.pop(name)
            for e in pushed_exprs:
                sc.pop_expr(e)
            n = self._fact(E.UnOp("not", s.cond)) if s.else_ is not None else 0
            self.stmt(s.else_, site)
            self._drop(n)
        elif isinstance(s, ir.Provide):
            for a in s.args:
                self.expr(a, s.func)
            self.expr(s.value, s.func)
            self.visit("provide", s.func, s.args, sc, s.func)
        elif isinstance(s, (ir.Realize, ir.Allocate)):
            self.stmt(s.body, site)
        else:
            for e in ir.stmt_exprs(s):
                self.expr(e, site)
            for f in s.children:
                self.stmt(getattr(s, f), site)

    def _loop_max(self, loop, sc):
        """The largest value of ``loop``'s variable: the bound of ``min + extent - 1`` both as
        written and with the lets that define min and extent substituted, whichever is
        tighter. A region computed per tile is ``let m = x.o * 4; let e = min(x.o * 4 + 3,
        12) - m + 1``: bounded apart, m + e - 1 reaches 12 + 4 - 1; together, 12."""
        last = simplify(ir.as_int64(loop.min) + ir.as_int64(loop.extent) - 1)
        hi = bounds_of(last, sc).hi
        e = ir.substitute_lets(last, self.lets)
        if e is last:
            return hi
        return _tighter(hi, bounds_of(simplify(e), sc).hi, "min")

    def _clamp_bound(self, e, sc, side):
        """The ``side`` ("lo" / "hi") bound of a clamp bound ``e``, as written and with the
        lets in scope substituted, whichever is tighter: a fused loop's index is clamped to
        ``m + e - 1`` of a per-tile region (``let m = x.o * 3; let e = min(x.o * 3 + 2, W - 2)
        - m + 1``), which bounded apart overshoots by a tile."""
        b = getattr(bounds_of(e, sc), side)
        sub = ir.substitute_lets(e, self.lets)
        if sub is e:
            return b
        return _tighter(b, getattr(bounds_of(simplify(sub), sc), side),
                        "min" if side == "hi" else "max")

    def expr(self, e, site):
        if not E.node_flags(e) & E.FUNC_READ:
            return

        def fn(n):
            if isinstance(n, E.FuncRef):
                self.visit("call", n.func, n.args, self.scope, n.via or site)
        E.walk_expr(e, fn)

    def _refine(self, cond):
        """Narrow the ranges of let/loop variables compared against a bound in ``cond``, and
        record the bound of a compared expression (``k.o * 4 + k.i < K``: a guarded split's
        index) for reads at exactly that index. Returns (variables, expressions) pushed."""
        pushed, pushed_exprs = [], []
        conj = []

        def split(c):
            if isinstance(c, E.BinOp) and c.op == "and":
                split(c.a)
                split(c.b)
            else:
                conj.append(c)
        split(cond)
        for c in conj:
            if not (isinstance(c, E.BinOp) and c.op in ("lt", "le", "gt", "ge")):
                continue
            a, b, op = c.a, c.b, c.op
            if not isinstance(a, E.Var):
                if isinstance(b, E.Var):
                    a, b, op = b, a, {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[op]
                else:
                    if a.dtype.is_int and a.dtype.lanes == 1:
                        pushed_exprs += self._refine_expr(a, op, b)
                    continue
            cur = self.scope.get(a.name)
            if cur is None:
                continue
            iv = self._bound_by(op, b)
            if iv is None:
                continue
            new = intersect_hi(cur, iv.hi) if iv.hi is not None else intersect_lo(cur, iv.lo)
            self.scope.push(a.name, new)
            pushed.append(a.name)
        return pushed, pushed_exprs

    def _bound_by(self, op, b):
        """The one-sided Interval ``x op b`` gives x (``x < b``: at most b's max - 1), or
        None when b is unbounded on that side."""
        bb = bounds_of(b, self.scope)
        whole = ir.substitute_lets(b, self.lets)
        if whole is not b:
            # a tile's ``min + extent`` bounded apart overshoots (see _loop_max): take the
            # tighter of the two on each side
            wb = bounds_of(simplify(whole), self.scope)
            bb = Interval(_tighter(bb.lo, wb.lo, "max"), _tighter(bb.hi, wb.hi, "min"))
        if op in ("lt", "le") and bb.hi is not None:
            return Interval(None, simplify(bb.hi - 1) if op == "lt" else bb.hi)
        if op in ("gt", "ge") and bb.lo is not None:
            return Interval(simplify(bb.lo + 1) if op == "gt" else bb.lo, None)
        return None

    def _refine_expr(self, a, op, b):
        """Record ``a op b`` as a bound of expression ``a``; returns [a] when recorded."""
        iv = self._bound_by(op, b)
        if iv is None:
            return []
        self.scope.push_expr(a, iv)
        return [a]


def _promised_bounds(value, raw, sc, clamp_bound=None):
    """The range of ``value``, clamps (``min`` / ``max``) of ``raw`` that are the identity
    wherever the value is used: raw's range intersected with what the clamps allow. Plain
    interval arithmetic gives ``min(max(p // W, 0), H - 1)`` one row at -1 when H is 0 (the
    fused loop is empty); this gives an empty range. Falls back to the plain range when a
    later rewrite has hidden ``raw``."""
    raw_key = E.structural_key(raw)
    los, his = [], []

    def peel(v):
        if E.structural_key(v) == raw_key:
            return True
        if isinstance(v, E.BinOp) and v.op in ("min", "max"):
            for inner, bound in ((v.a, v.b), (v.b, v.a)):
                if peel(inner):
                    (his if v.op == "min" else los).append(bound)
                    return True
        return False
    if not peel(value):
        return bounds_of(value, sc)
    if clamp_bound is None:
        def clamp_bound(b, sc, side):
            return getattr(bounds_of(b, sc), side)
    iv = bounds_of(raw, sc)
    for b in los:
        lo = clamp_bound(b, sc, "lo")
        iv = iv if lo is None else intersect_lo(iv, lo)
    for b in his:
        hi = clamp_bound(b, sc, "hi")
        iv = iv if hi is None else intersect_hi(iv, hi)
    return iv


def _tighter(a, b, op):
    """The tighter of two bounds (``op`` "min" for upper bounds, "max" for lower), either of
    which may be None (unbounded)."""
    if a is None or b is None:
        return b if a is None else a
    return simplify(E.binary(op, a, b))


_STAGE_VAR = re.compile(r"^.+\.s\d+\.(.+)$")


def user_text(e):
    """An index as the user wrote it: stage-qualified loop names back to the user's Vars."""
    return str(user_names(e))


def user_names(e):
    """``e`` with stage-qualified loop names back to the user's Vars and integer casts of
    a variable dropped, for messages."""
    def fn(n):
        if isinstance(n, E.Var):
            m = _STAGE_VAR.match(n.name)
            if m:
                return E.Var(m.group(1), n.dtype)
        if isinstance(n, E.Cast) and isinstance(n.value, E.Var) and n.dtype.is_index and \
                n.value.dtype.is_signed:
            return n.value      # lowering's own index casts, not a user's uint32(x)
        return None
    return E.map_expr(e, fn)


def thread_scope(loops):
    """A Scope in which the gpu_thread loops ``loops`` range over all their iterations
    (None when there are none)."""
    if not loops:
        return None
    scope = Scope()
    for t in loops:
        scope.push(t.var, Interval(t.min, simplify(t.min + t.extent - 1)))
    return scope


def func_box(stmt, func, kinds=("call", "provide"), scope=None):
    """The union box (one Interval per dimension) of the accesses to ``func`` in ``stmt``,
    or None when there are none. ``scope``: ranges of variables bound outside ``stmt``
    over which the box is taken too (others are fixed symbols)."""
    box = [None]
    sites = []

    def visit(kind, f, args, scope, site):
        if f is not func or kind not in kinds:
            return
        ivs = [bounds_of(ir.as_int64(a), scope) for a in args]
        sites.append(args)
        box[0] = ivs if box[0] is None else [union(x, y) for x, y in zip(box[0], ivs)]
    AccessBoxes(visit, scope=scope, only=func).stmt(stmt)
    return box[0], sites


def require_bounded(box, sites, func, what):
    for d, iv in enumerate(box):
        if not iv.bounded:
            idx = ", ".join(user_text(a) for a in sites[0]) if sites else "?"
            raise AlgorithmError(
                f"cannot infer the region of {func.name} that is {what}: dimension {d} is "
                f"accessed at an index with no bound ({func.name}[{idx}]); clamp the index "
                "with sl.clamp(...) or read through a boundary condition")


def bounds_inference(stmt, ctx):
    """Fill the bounds of every Realize from the accesses inside it. A Func in shared memory
    stored inside gpu_threads loops is filled by all the block's threads together, so its
    region is what every thread of those loops reads, not one thread's part."""
    threads = []        # the gpu_thread loops around the statement being rewritten

    def stmt_fn(s):
        if isinstance(s, ir.For) and s.kind == "gpu_thread":
            threads.append(s)
            body = ir.map_stmt(s.body, stmt_fn)
            threads.pop()
            return s.replace(body=body)
        if isinstance(s, ir.Realize):
            body = ir.map_stmt(s.body, stmt_fn)
            if s.bounds:     # sized by the pass that made it (double buffering)
                return ir.Realize(s.func, s.bounds, s.memory, body)
            box, sites = func_box(body, s.func, scope=thread_scope(threads)
                                  if s.memory == "shared" else None)
            if box is None:
                return body
            require_bounded(box, sites, s.func, "stored")
            bounds = [(simplify(iv.lo), simplify(iv.hi - iv.lo + 1)) for iv in box]
            return ir.Realize(s.func, bounds, s.memory, body)
        return None
    return ir.map_stmt(stmt, stmt_fn)
