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
from .bounds_inference import func_box, require_bounded, thread_scope
from .interval import Interval, Scope, bounds_of, min_branches, union
from .loop_nests import build_func, build_stage
from .prove import prove
from .simplify import simplify
from .sliding_window import slide_region


def count_calls(s, func):
    """How many reads of ``func`` statement ``s`` holds (parts without one are skipped)."""
    if s is None or id(func) not in ir.funcs_mentioned(s):
        return 0
    n = [0]

    def fn(x):
        if isinstance(x, E.FuncRef) and x.func is func:
            n[0] += 1
    for e in ir.stmt_exprs(s):
        E.walk_expr(e, fn)
    return n[0] + sum(count_calls(c, func) for c in ir.child_stmts(s))


def _demand(ctx, f, demand_stmt, scope=None):
    """The region of ``f`` its consumers in ``demand_stmt`` need: [(min, extent)] per
    dimension (a ``bound()`` replaces the inferred one), or None when nothing reads f.
    ``scope``: loops around ``demand_stmt`` whose every iteration's need counts.
    Records it in ``ctx.region_values`` so tail decisions can use the real sizes."""
    box, sites = func_box(demand_stmt, f, kinds=("call",), scope=scope)
    if box is None:
        return None
    require_bounded(box, sites, f, "needed by its consumers")
    box = _with_update_accesses(ctx, f, box)
    st0 = ctx.schedule.stage_schedules(f)[0]
    region = []
    for d, iv in enumerate(box):
        lo, ext = simplify(iv.lo), simplify(iv.hi - iv.lo + 1)
        name = f.definitions[0].args[d].name
        check = None
        if name in st0.bounds:
            blo, bext = st0.bounds[name]
            check = simplify(E.binary("and", E.binary("ge", lo, blo),
                                      E.binary("le", lo + ext, blo + bext)))
            if isinstance(check, E.Const) and not check.value:
                # known now (static sizes): every call would fail, so the schedule is refused
                raise ScheduleError(
                    f"{st0.bound_text(name)}: {f.name} is needed over [{lo}, "
                    f"{simplify(lo + ext)}) along {name}, which the bound [{blo}, "
                    f"{blo + bext}) does not cover; widen the bound or remove it")
            lo, ext = E.Const(blo, T.int64), E.Const(bext, T.int64)
        if check is not None:
            code = 100 + len(ctx.assert_messages)
            ctx.assert_messages[code] = (
                f"{st0.bound_text(name)}: these sizes need {f.name} along {name} "
                f"outside the bound's region [{blo}, {blo + bext}); widen the bound or "
                "remove it")
            check = (check, code)
        region.append((lo, ext, check))
        ctx.region_values[(id(f), d)] = (lo, ext)
    return region


def _with_update_accesses(ctx, f, box):
    """Widen a demanded region by what f's update stages read and write of f itself
    (a scan reads f over its whole RDom), so the pure stage initializes all of it."""
    defs = ctx.defs[id(f)]
    if len(defs) < 2:
        return box
    stages = ctx.schedule.stage_schedules(f)
    updates = ir.make_block([build_stage(ctx, f, st, d) for st, d in zip(stages[1:], defs[1:])])
    ubox, usites = func_box(updates, f)
    if ubox is None:
        return box
    require_bounded(ubox, usites, f, "accessed by its update stages")
    mapping = {}
    for d, iv in enumerate(box):
        vmin, vext = ctx.region_vars(f, d)
        mapping[vmin.name] = simplify(iv.lo)
        mapping[vext.name] = simplify(iv.hi - iv.lo + 1)
    out = []
    for iv, uv in zip(box, ubox):
        lo = simplify(ir.substitute(uv.lo, mapping))
        hi = simplify(ir.substitute(uv.hi, mapping))
        out.append(union(iv, Interval(lo, hi)))
    return out


def _region_lets(ctx, f, region, body):
    """Wrap ``body`` (f's stage nests) in the Lets of f's computed region."""
    for d in reversed(range(len(region))):
        vmin, vext = ctx.region_vars(f, d)
        lo, ext, _ = region[d]
        body = ir.LetStmt(vmin.name, lo, ir.LetStmt(vext.name, ext, body))
    for _, _, check in region:
        if check is not None:
            body = ir.make_block([ir.Assert(check[0], check[1]), body])
    return body


def _output_nest(ctx, f):
    if f.shape is None:
        raise AlgorithmError(f"the output Func {f.name} needs a shape: Func({f.name!r}, "
                             "shape=(...))")
    body = build_func(ctx, f)
    for d in reversed(range(len(f.shape))):
        vmin, vext = ctx.region_vars(f, d)
        _, ext = ctx.region(f, d)   # the shape, or the constant a bound() states (checked)
        body = ir.LetStmt(vmin.name, E.Const(0, T.int64), ir.LetStmt(vext.name, ext, body))
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
    where = g.name if stage == 0 else f"{g.name}.update({stage - 1})"
    why = (f"{where}'s loop {dim} does not enclose every use of {f.name}" if cands else
           f"{where} has no loop {dim} where {f.name} is used (is {g.name} inlined?)")
    if len(cands) > 1 and ctx.schedule.func_schedule(g).double_buffer:
        why += (f": {g.name} is double-buffered, so it is computed in two places (the first "
                f"iteration's copy and each next one's), each with its own loop {dim}; place "
                f"{f.name} where both see it, or leave {g.name} single-buffered")
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
    memory = fs.memory or "global"
    if fs.double_buffer and fs.compute[0] != "at":
        raise ScheduleError(f"double_buffer on {f.name}: it must be computed inside a serial "
                            "loop of a consumer; add compute_at(consumer, loop)")
    if fs.compute[0] == "root":
        if fs.store is not None and fs.store[0] == "at":
            raise ScheduleError(f"store_at({fs.store[1].name}, {fs.store[3]}) on {f.name}: "
                                f"{f.name} is computed at the root (compute_root, or a "
                                "reduction's default), outside every loop, so no loop can "
                                f"hold its storage; add compute_at({fs.store[1].name}, a loop "
                                f"inside {fs.store[3]}), or remove the store_at")
        region = _demand(ctx, f, stmt)
        if region is None:
            return stmt
        nest = _region_lets(ctx, f, region, build_func(ctx, f))
        return ir.Realize(f, [], memory, ir.make_block([nest, stmt]))
    loop = _target_loop(ctx, stmt, f, fs.compute, "compute_at")
    scope = None
    if memory == "shared":
        # the block's threads fill a shared Func together: its region is what all the
        # gpu_threads loops around it read, not one thread's part
        scope = thread_scope([s for s in ir.path_to(stmt, loop) or []
                              if isinstance(s, ir.For) and s.kind == "gpu_thread"])
    region = _demand(ctx, f, loop.body, scope)
    if region is None:
        return stmt
    if fs.double_buffer:
        return double_buffered(ctx, stmt, f, loop, region, memory)
    stored_here = fs.store is None or fs.store == fs.compute
    # stored outside the loop: what earlier iterations computed is kept, so compute only
    # the part of the region that is new
    computed = region if stored_here else slide_region(ctx, f, loop, region)
    nest = _region_lets(ctx, f, computed, build_func(ctx, f))
    stmt, loop = _replace_loop(stmt, loop, ir.make_block([nest, loop.body]))
    if stored_here:
        return _replace_loop(stmt, loop, ir.Realize(f, [], memory, loop.body))[0]
    store = None if fs.store[0] == "root" else _target_loop(ctx, stmt, f, fs.store, "store_at")
    racing = _parallel_between(stmt if store is None else store.body, loop.var)
    if racing:
        where = "root" if store is None else f"{fs.store[1].name}, {fs.store[3]}"
        raise ScheduleError(f"store_at({where}) on {f.name}: {f.name} is computed inside the "
                            f"{racing.kind} loop {_pretty(ctx, racing.var)} but stored outside it, "
                            f"so its iterations would share {f.name}'s storage (a race); store "
                            "it inside that loop, or make the loop serial")
    if store is None:
        return ir.Realize(f, [], memory, stmt)
    inside = []
    _find_loops(store.body, loop.var, inside)
    if not inside:
        raise ScheduleError(f"store_at({fs.store[1].name}, {fs.store[3]}) on {f.name}: the store "
                            f"level must be outside the compute level "
                            f"({fs.compute[1].name}.{fs.compute[3]})")
    return _replace_loop(stmt, store, ir.Realize(f, [], memory, store.body))[0]


def _parallel_between(s, var):
    """A parallel / GPU loop on the path from ``s`` down to the loop named ``var``."""
    if s is None:
        return None
    if isinstance(s, ir.For):
        if s.var == var:
            return s if s.kind in ("parallel", "gpu_block", "gpu_thread") else None
        below = _parallel_between(s.body, var)
        if below is not None:
            return below
        found = []
        _find_loops(s.body, var, found)
        if found and s.kind in ("parallel", "gpu_block", "gpu_thread"):
            return s
        return None
    kids = list(s.stmts) if isinstance(s, ir.Block) else [getattr(s, f) for f in s.children]
    for c in kids:
        r = _parallel_between(c, var)
        if r is not None:
            return r
    return None


def double_buffered(ctx, stmt, f, loop, region, memory):
    """Compute ``f`` for iteration t+1 of the serial ``loop`` before iteration t uses the
    copy computed one iteration earlier: two copies of f's per-iteration region, selected
    by the iteration's parity, with a prologue filling the first one."""
    where = f"double_buffer on {f.name}"
    if loop.kind not in ("serial", "unrolled"):
        raise ScheduleError(f"{where}: it is computed inside {_pretty(ctx, loop.var)}, a "
                            f"{loop.kind} loop; double buffering needs a serial loop")
    t = loop.var
    tv = E.Var(t, loop.min.dtype)

    def at(e, it):
        return simplify(ir.substitute(e, {t: it}))
    nxt = simplify(tv + 1)
    # each copy is indexed relative to its iteration's region; storage inference sizes the
    # copies for the largest region any iteration needs
    def slot(it):
        return E.cast(T.int32, (it - loop.min) % 2)

    def rebase(node, it):
        """Accesses of f in ``node`` go to copy slot(it), relative to the region at it."""
        los = [at(lo, it) for lo, _, _ in region]

        def fn(n):
            if isinstance(n, E.FuncRef) and n.func is f and len(n.args) == len(los):
                return E.FuncRef(f, [slot(it)] + [E.cast(T.int32, E.cast(T.int64, a) - lo)
                                                  for a, lo in zip(n.args, los)])
            return None

        def sfn(x):
            if isinstance(x, ir.Provide) and x.func is f:
                v = E.map_expr(x.value, fn)
                args = [E.cast(T.int32, E.cast(T.int64, a) - lo) for a, lo in zip(x.args, los)]
                return ir.Provide(f, [slot(it)] + args, v)
            return None
        return ir.map_stmt(node, sfn, lambda e: E.map_expr(e, fn))
    nest = _region_lets(ctx, f, region, build_func(ctx, f))
    produce_next = rebase(ir.map_stmt(nest, None, lambda e: ir.substitute(e, {t: nxt})), nxt)
    last = simplify(loop.min + loop.extent)
    # t < last - 1 rather than t + 1 < last: bounds inference narrows t itself, so the
    # next iteration's reads (of a producer computed further out) stay inside the loop's range
    body = ir.make_block([ir.IfThenElse(E.binary("lt", tv, simplify(last - 1)), produce_next),
                          rebase(loop.body, tv)])
    prologue = rebase(ir.map_stmt(nest, None, lambda e: ir.substitute(e, {t: loop.min})),
                      loop.min)
    new_loop = loop.replace(body=body)
    guarded = ir.IfThenElse(E.binary("gt", loop.extent, 0), prologue)
    # two copies, each as large as the largest region any iteration needs, or as what
    # its producer writes there (a tail='pad' split rounds the region up)
    scope = Scope()
    scope.push(t, Interval(loop.min, simplify(loop.min + loop.extent - 1)))
    bounds = [(E.Const(0, T.int64), E.Const(2, T.int64))]
    written, _ = func_box(ir.make_block([prologue, produce_next]), f, kinds=("provide",))
    for d, (lo, ext, _) in enumerate(region):
        hi = _tight_hi(ext, scope)
        if written is not None:
            w = written[d + 1]
            w_lo = None if w.lo is None else bounds_of(simplify(w.lo), scope).lo
            w_hi = None if w.hi is None else _tight_hi(simplify(w.hi + 1), scope)
            if w_lo is None or w_hi is None or not prove(E.binary("ge", w_lo, 0), ctx.facts):
                hi = None
            elif hi is not None:
                hi = E.binary("max", hi, w_hi)
        if hi is None:
            raise ScheduleError(f"{where}: cannot bound the size of dimension {d} of its "
                                f"region ({ext}) or of what its producer writes there")
        bounds.append((E.Const(0, T.int64), simplify(E.binary("max", hi, 0))))
    replacement = ir.Realize(f, bounds, memory, ir.make_block([guarded, new_loop]))

    def fn(x):
        return replacement if x is loop else None
    return ir.map_stmt(stmt, fn)


def _tight_hi(e, scope):
    """An upper bound of ``e`` over ``scope``, keeping what interval arithmetic loses: a
    tile's extent ``min(t*8 + 7, K - 1) - t*8 + 1`` is at most 8 (a GPU sizes shared
    memory from this), not K."""
    if isinstance(e, E.BinOp) and e.op in ("min", "max"):
        a, b = _tight_hi(e.a, scope), _tight_hi(e.b, scope)
        if a is None or b is None:
            return (a if b is None else b) if e.op == "min" else None
        return simplify(E.binary(e.op, a, b))
    if isinstance(e, E.BinOp) and e.op in ("add", "sub") and isinstance(e.b, E.Const):
        a = _tight_hi(e.a, scope)
        return None if a is None else simplify(E.binary(e.op, a, e.b))
    hi = bounds_of(e, scope).hi
    branches = min_branches(e)
    if len(branches) > 1:
        for x in branches:
            h = bounds_of(simplify(x), scope).hi
            if h is not None:
                hi = h if hi is None else simplify(E.binary("min", hi, h))
    return hi


def schedule_functions(stmt, ctx):
    """Build the whole pipeline statement (``stmt`` is ignored: this pass starts it).

    The outputs' loop nests run one after another, producers first. Their top-level
    statements are kept as a list of segments, so that a Func computed at root runs just
    before the first segment that reads it, never before an output it reads itself (with
    outputs C and D = C - max(C), the max must follow C's nest)."""
    outs = [f for f in ctx.order if ctx.is_output(f)]
    segments = [_output_nest(ctx, f) for f in outs]
    for f in reversed(ctx.order):
        if ctx.is_output(f):
            continue
        # f is not built yet, so a segment that mentions it reads it
        users = [k for k, seg in enumerate(segments) if id(f) in ir.funcs_mentioned(seg)]
        if not users:
            continue
        first = users[0]
        if ctx.schedule.func_schedule(f).compute[0] == "root" or len(users) > 1:
            # a compute_at whose uses span segments fails in inject with its message
            segments = segments[:first] + [inject(ctx, ir.make_block(segments[first:]), f)]
        else:
            segments[first] = inject(ctx, segments[first], f)
    return ir.make_block(segments)
