"""Pass: inline the Funcs scheduled ``compute_inline`` into their consumers and fix the
realization order (producers first) of the rest.

Example: with ``bx`` inline, ``by[y, x] = bx[y - 1, x] + bx[y, x]`` becomes an expression
of the input directly.
"""
from __future__ import annotations

from ..algo import expr as E
from ..errors import AlgorithmError
from ..algo.func import Definition


def _expand(ctx, e, inline, memo):
    def fn(n):
        if isinstance(n, E.FuncRef) and id(n.func) in inline:
            g = n.func
            d = ctx.schedule.definitions(g)[0]
            body = _expand(ctx, d.value, inline, memo)
            return E.substitute(body, {a.name: v for a, v in zip(d.args, n.args)})
        return None
    return E.map_expr(e, fn)


def inline_functions(stmt, ctx):
    """Set ``ctx.defs`` (definitions with inline Funcs expanded) and ``ctx.order``."""
    s = ctx.schedule
    inline = {id(f) for f in s.funcs if s.func_schedule(f).compute == ("inline",)
              and not ctx.is_output(f)}
    memo = {}
    live = [f for f in s.funcs if id(f) not in inline]
    for f in live:
        defs = []
        for d in s.definitions(f):
            ex = (lambda e: None if e is None else _expand(ctx, e, inline, memo))
            defs.append(Definition(d.func, d.index, tuple(ex(a) for a in d.args), ex(d.value),
                                   d.pure_vars, d.rvars, ex(d.predicate)))
        ctx.defs[id(f)] = defs
    order, state = [], {}

    def visit(f):
        st = state.get(id(f))
        if st == 2:
            return
        if st == 1:
            raise AlgorithmError(f"the pipeline has a cycle through {f.name}")
        state[id(f)] = 1
        for d in ctx.defs[id(f)]:
            for e in list(d.args) + [d.value] + ([d.predicate] if d.predicate is not None else []):
                refs = []
                E.walk_expr(e, lambda n: refs.append(n.func) if isinstance(n, E.FuncRef) else None)
                for g in refs:
                    if g is not f and id(g) in ctx.defs:
                        visit(g)
        state[id(f)] = 2
        order.append(f)
    for o in ctx.outputs:
        visit(o)
    ctx.order = order
    return stmt
