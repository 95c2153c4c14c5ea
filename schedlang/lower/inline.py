"""Pass: inline the Funcs scheduled ``compute_inline`` into their consumers and fix the
realization order (producers first) of the rest.

Example: with ``bx`` inline, ``by[y, x] = bx[y - 1, x] + bx[y, x]`` becomes an expression
of the input directly.
"""
from __future__ import annotations

from ..algo import expr as E
from ..errors import AlgorithmError, ScheduleError
from ..algo.func import Definition
from ..schedule.stage_loops import loop_directives


def _expand(ctx, e, inline, memo):
    """``e`` with reads of inline Funcs replaced by their definitions. ``memo`` keeps each
    Func's expanded body and each expansion at given indices, so that two reads of
    ``g[i]`` (``h[i] = g[i] * g[i]``) share one expression: expanded apart, a chain of N
    such Funcs grew to 2**N nodes."""
    def fn(n):
        if isinstance(n, E.FuncRef) and id(n.func) in inline:
            g = n.func
            key = (id(g),) + tuple(E.structural_key(a) for a in n.args)
            hit = memo.get(key)
            if hit is not None:
                return hit
            d = ctx.schedule.definitions(g)[0]
            body = memo.get(id(g))
            if body is None:
                body = _expand(ctx, d.value, inline, memo)
                body = memo[id(g)] = E.map_expr(body, lambda r: E.FuncRef(
                    r.func, r.args, r.via or g) if isinstance(r, E.FuncRef) and r.via is None
                    else None)
            out = memo[key] = E.substitute(body, {a.name: v for a, v in zip(d.args, n.args)})
            return out
        return None
    return E.map_expr(e, fn)


def _check_no_loop_directives(s, f):
    looped = loop_directives(s, f)
    if looped:
        explicit = any(d.func == f.name and d.op == "compute_inline" for d in s.trace)
        why = "compute_inline()" if explicit else "the default for a pure Func"
        # double buffering needs a loop of a consumer: compute_root would not do
        place = "compute_at(consumer, loop)" if looped.startswith("double_buffer") else \
            f"s[{f.name}].compute_root() or compute_at(...)"
        raise ScheduleError(f"{looped} on {f.name}: {f.name} is computed inline ({why}), so "
                            f"it has no loops of its own; add {place} first")


def inline_functions(stmt, ctx):
    """Set ``ctx.defs`` (definitions with inline Funcs expanded) and ``ctx.order``."""
    s = ctx.schedule
    inline = {id(f) for f in s.funcs if s.func_schedule(f).compute == ("inline",)
              and not ctx.is_output(f)}
    memo = {}
    for f in s.funcs:
        if id(f) in inline:
            _check_no_loop_directives(s, f)
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
            raise AlgorithmError(f"the pipeline has a cycle through {f.name}: {f.name} reads, "
                                 f"directly or through other Funcs, a Func that reads "
                                 f"{f.name}; a Func may only read itself in its own update "
                                 "definitions, so give the values a new Func")
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
