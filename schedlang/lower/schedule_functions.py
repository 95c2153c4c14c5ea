"""Pass: place every Func at its compute and store level.

Outputs are produced at the top; then each other Func, consumers before producers, is
injected: its stage nests go just inside the loop named by ``compute_at`` (or at the top
for ``compute_root``), preceded by Lets giving the region its consumers need there, and
its storage (``Realize``) goes at the store level. A location that does not enclose every
use is rejected with the list of legal locations, as Halide does.
Example: ``s[bx].compute_at(by, yo)`` puts ``bx``'s loops inside ``by``'s ``yo`` loop.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..errors import AlgorithmError, ScheduleError
from . import ir
from .bounds_inference import func_box, require_bounded
from .loop_nests import build_func
from .simplify import simplify


def count_calls(s, func):
    n = [0]

    def fn(x):
        if isinstance(x, E.FuncRef) and x.func is func:
            n[0] += 1
    ir.walk_stmt(s, lambda st: [E.walk_expr(e, fn) for e in ir.stmt_exprs(st)])
    return n[0]


def _region_lets(ctx, f, demand_stmt, body):
    """Wrap ``body`` (f's stage nests) in the Lets of f's computed region."""
    box, sites = func_box(demand_stmt, f, kinds=("call",))
    if box is None:
        return None
    require_bounded(box, sites, f, "needed by its consumers")
    st0 = ctx.schedule.stage_schedules(f)[0]
    asserts = []
    for d in reversed(range(len(box))):
        vmin, vext = ctx.region_vars(f, d)
        lo, ext = simplify(box[d].lo), simplify(box[d].hi - box[d].lo + 1)
        name = f.definitions[0].args[d].name
        if name in st0.bounds:
            blo, bext = st0.bounds[name]
            asserts.append(E.binary("and", E.binary("ge", lo, blo),
                                    E.binary("le", lo + ext, blo + bext)))
            lo, ext = E.Const(blo, T.int64), E.Const(bext, T.int64)
        body = ir.LetStmt(vmin.name, lo, ir.LetStmt(vext.name, ext, body))
    for a in asserts:
        body = ir.make_block([ir.Assert(simplify(a), 3), body])
    return body


def _output_nest(ctx, f):
    if f.shape is None:
        raise AlgorithmError(f"the output Func {f.name} needs a shape: Func({f.name!r}, "
                             "shape=(...))")
    body = build_func(ctx, f)
    st0 = ctx.schedule.stage_schedules(f)[0]
    for d in reversed(range(len(f.shape))):
        vmin, vext = ctx.region_vars(f, d)
        name = f.definitions[0].args[d].name
        if name in st0.bounds:
            raise ScheduleError(f"bound({name}) on {f.name}: {f.name} is an output; its region "
                                "is its shape")
        body = ir.LetStmt(vmin.name, E.Const(0, T.int64),
                          ir.LetStmt(vext.name, simplify(E.cast(T.int64, f.shape[d])), body))
    return body


def _find_loops(s, name, out):
    if s is None:
        return
    if isinstance(s, ir.For) and s.var == name:
        out.append(s)
    if isinstance(s, ir.Block):
        for c in s.stmts:
            _find_loops(c, name, out)
    for f in s.children:
        _find_loops(getattr(s, f), name, out)


def legal_locations(stmt, f):
    """``root`` and every loop whose body holds every use of ``f``."""
    total = count_calls(stmt, f)
    out = ["root"]

    def go(s):
        if s is None:
            return
        if isinstance(s, ir.For) and count_calls(s.body, f) == total:
            out.append(s.var)
        if isinstance(s, ir.Block):
            for c in s.stmts:
                go(c)
        for fld in s.children:
            go(getattr(s, fld))
    go(stmt)
    return out


def _pretty(ctx, loopvar):
    if loopvar in ctx.loop_names:
        stage, dim = ctx.loop_names[loopvar]
        return f"{stage}.{dim}"
    return loopvar


def _target_loop(ctx, stmt, f, level, directive):
    _, g, stage, dim = level
    lv = f"{g.name}.s{stage}.{dim}"
    cands = []
    _find_loops(stmt, lv, cands)
    total = count_calls(stmt, f)
    for loop in cands:
        if count_calls(loop.body, f) == total:
            return loop
    legal = ", ".join(_pretty(ctx, x) for x in legal_locations(stmt, f))
    why = (f"{g.name}'s loop {dim} does not enclose every use of {f.name}" if cands else
           f"{g.name} has no loop {dim} where {f.name} is used (is {g.name} inlined?)")
    raise ScheduleError(f"{directive}({g.name}, {dim}) on {f.name}: {why}. Legal locations for "
                        f"{f.name} are: {legal}")


def _replace_loop(stmt, loop, new_body):
    """``stmt`` with ``loop``'s body replaced; returns (new stmt, the new loop)."""
    made = []

    def fn(s):
        if s is loop:
            made.append(loop.replace(body=new_body))
            return made[-1]
        return None
    return ir.map_stmt(stmt, fn), made[0]


def inject(ctx, stmt, f):
    fs = ctx.schedule.func_schedule(f)
    produce = build_func(ctx, f)
    memory = fs.memory or "global"
    if fs.compute[0] == "root":
        nest = _region_lets(ctx, f, stmt, produce)
        if nest is None:
            return stmt
        return ir.Realize(f, [], memory, ir.make_block([nest, stmt]))
    loop = _target_loop(ctx, stmt, f, fs.compute, "compute_at")
    nest = _region_lets(ctx, f, loop.body, produce)
    if fs.double_buffer:
        return double_buffered(ctx, stmt, f, loop, nest, memory)
    stmt, loop = _replace_loop(stmt, loop, ir.make_block([nest, loop.body]))
    if fs.store is None or fs.store == fs.compute:
        return _replace_loop(stmt, loop, ir.Realize(f, [], memory, loop.body))[0]
    if fs.store[0] == "root":
        return ir.Realize(f, [], memory, stmt)
    store = _target_loop(ctx, stmt, f, fs.store, "store_at")
    inside = []
    _find_loops(store.body, loop.var, inside)
    if not inside:
        raise ScheduleError(f"store_at({fs.store[1].name}, {fs.store[3]}) on {f.name}: the store "
                            f"level must be outside the compute level "
                            f"({fs.compute[1].name}.{fs.compute[3]})")
    return _replace_loop(stmt, store, ir.Realize(f, [], memory, store.body))[0]


def double_buffered(ctx, stmt, f, loop, nest, memory):
    """Compute ``f`` for iteration t+1 of the serial ``loop`` while iteration t uses the copy
    made one iteration earlier: two copies, selected by the iteration's parity."""
    raise ScheduleError(f"double_buffer on {f.name}: not supported on this target yet")


def schedule_functions(stmt, ctx):
    """Build the whole pipeline statement (``stmt`` is ignored: this pass starts it)."""
    outs = [f for f in ctx.order if ctx.is_output(f)]
    stmt = ir.make_block([_output_nest(ctx, f) for f in outs])
    for f in reversed(ctx.order):
        if not ctx.is_output(f):
            stmt = inject(ctx, stmt, f)
    return stmt
