"""Walks over expression trees: rebuild (``map_expr``), substitute Vars (``substitute``),
visit (``walk_expr``), and the summaries cached on each node (``structural_key``, the Var
names, ``node_flags``). Re-exported by ``expr``, where the compiler reaches them as ``E.*``.
Example: ``substitute(x + 1, {"x": y})`` is ``y + 1``.
"""
from __future__ import annotations

import math

from .expr import BinOp, Const, FuncRef, Param, Reduce, RVar, Var


def map_expr(e, fn):
    """Rebuild ``e`` bottom-up; ``fn(node)`` returns a replacement or None to keep it.
    A sub-expression shared by several parents is rebuilt once (expressions are DAGs)."""
    memo = {}

    def go(n):
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        kids = n.kids()
        if kids:
            n2 = n.with_kids(tuple(go(k) for k in kids))
        else:
            n2 = n
        r = fn(n2)
        out = n2 if r is None else r
        memo[id(n)] = out
        return out
    return go(e)


def substitute(e, mapping: dict):
    """Replace Vars by name: ``mapping`` maps var name -> Expr. Parts that mention none
    of them are kept as they are, without a walk (see ``_var_names``)."""
    if not mapping:
        return e
    names = mapping.keys()
    memo = {}

    def go(n):
        if names.isdisjoint(_var_names(n)):
            return n
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        if isinstance(n, Var):
            out = mapping[n.name]
        else:
            out = n.with_kids(tuple(go(k) for k in n.kids()))
        memo[id(n)] = out
        return out
    return go(e)


def _var_names(n):
    """The names of the Vars (not Params) anywhere in ``n``, cached on each node."""
    try:
        return n._vars
    except AttributeError:
        pass
    if isinstance(n, Var):
        out = frozenset() if isinstance(n, Param) else frozenset((n.name,))
    else:
        kids = n.kids()
        if not kids:
            out = frozenset()
        elif len(kids) == 1:
            out = _var_names(kids[0])
        else:
            out = frozenset().union(*(_var_names(k) for k in kids))
    n._vars = out
    return out


# bits of node_flags: kinds of node the compiler's passes look for, so that a pass can skip
# an expression without walking it
INT_MINMAX = 1      # a scalar integer min / max (a clamp of index arithmetic)
FUNC_READ = 2       # a read of a Func or Input (FuncRef)


def node_flags(n):
    """The ``INT_MINMAX`` / ``FUNC_READ`` bits of the nodes anywhere in ``n``, cached on each
    node. Example: ``node_flags(sl.min(x, 3) + 1) & INT_MINMAX`` is true."""
    try:
        return n._flags
    except AttributeError:
        pass
    out = 0
    for k in n.kids():
        out |= node_flags(k)
    if isinstance(n, BinOp):
        if n.op in ("min", "max") and n.dtype.is_int and n.dtype.lanes == 1:
            out |= INT_MINMAX
    elif isinstance(n, FuncRef):
        out |= FUNC_READ
    n._flags = out
    return out


def walk_expr(e, fn):
    """Call ``fn`` on every distinct node of ``e`` (pre-order; shared nodes once)."""
    stack, seen = [e], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        fn(n)
        stack.extend(n.kids())


def expr_vars(e) -> set:
    """Names of the Vars (not Params) an expression mentions."""
    out = set()
    walk_expr(e, lambda n: out.add(n.name) if isinstance(n, Var) else None)
    return out


def structural_key(e):
    """A hashable key equal for structurally identical expressions."""
    try:
        return e._key
    except AttributeError:
        pass
    if isinstance(e, Const):
        # 0.0 == -0.0, but they are different constants (1 / x tells them apart)
        sign = math.copysign(1.0, e.value) if isinstance(e.value, float) else None
        k = ("C", e.value, sign, e.weak, e.dtype.name, e.dtype.lanes)
    elif isinstance(e, RVar):
        # two RDoms may name their variables alike; as for a FuncRef, identity tells them apart
        k = ("V", "RVar", e.name, e.dtype.name, id(e.rdom), e.dim)
    elif isinstance(e, Var):
        k = ("V", type(e).__name__, e.name, e.dtype.name)
    elif isinstance(e, FuncRef):
        k = ("F", e.func.name, id(e.func)) + tuple(structural_key(a) for a in e.args)
    else:
        extra = tuple(getattr(e, s) for s in ("op", "name", "buffer", "lanes") if hasattr(e, s))
        if isinstance(e, Reduce):
            extra += (id(e.rdom),)
        k = (type(e).__name__, e.dtype.name, e.dtype.lanes) + extra + tuple(
            structural_key(c) for c in e.kids())
    object.__setattr__(e, "_key", k)
    return k


def same(a, b) -> bool:
    return a is b or structural_key(a) == structural_key(b)
