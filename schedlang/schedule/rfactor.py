"""``rfactor``: split an inline reduction into an intermediate Func that keeps one
reduction loop as a pure (parallel / vectorizable) dimension, and a final reduction
over that dimension (Halide's rfactor).

Example::

    ko, ki = s[f].split(k, 8)
    intm = s[f].rfactor(ki)       # intm[i, k.i] = sum over k.o;  f[i] = sum over k.i
    s[intm].compute_at(f, i).vectorize("k.i")
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..algo.func import Definition, RDom, all_nodes
from ..errors import ScheduleError
from .stage import StageSchedule
from .stage_loops import var_name

COMBINE = ("sum", "product", "maximum", "minimum")


def _loop_domain(st, rv_name):
    """How loop ``rv_name`` relates to an original reduction variable: returns
    (original RVar, kind, split) with kind "whole", "inner" or "outer"."""
    d = st.definition
    by_name = {v.name: v for v in d.rvars}
    if rv_name in by_name:
        return by_name[rv_name], "whole", None
    for sp in st.splits:
        if sp.kind == "split" and rv_name in (sp.outer, sp.inner) and sp.old in by_name:
            return by_name[sp.old], ("inner" if rv_name == sp.inner else "outer"), sp
    return None, None, None


def rfactor(schedule, st: StageSchedule, rv, name):
    directive = "rfactor"
    rv_name = var_name(rv, directive, st.name)
    f = st.func
    d = st.definition
    if st.tensorized is not None:
        lane, intr = st.tensorized
        raise ScheduleError(f"rfactor({rv_name}) on {st.name}: {st.name} is tensorized "
                            f"(tensorize({lane}, {intr})), and {intr} replaces its reduction "
                            "loop, which rfactor would move into a new Func; rfactor before "
                            "tensorize, or build the schedule without one of them")
    if d.index == 0:
        reds = d.reductions
        if len(reds) != 1:
            raise ScheduleError(f"rfactor({rv_name}) on {st.name}: rfactor applies to a pure "
                                "definition with one inline reduction (sl.sum, sl.product, "
                                f"sl.maximum, sl.minimum), or to an update {f.name}[...] = "
                                f"{f.name}[...] + e (or *, sl.min, sl.max)")
        (red,) = reds
        if red.op not in COMBINE:
            raise ScheduleError(f"rfactor({rv_name}) on {st.name}: {red.op} keeps the position "
                                "of its extreme and cannot be factored; use maximum / minimum")
        op, body, dtype = red.op, red.body, red.dtype
        rd = red.rdom
        # bounds by position in the reduction's domain: a reduction over several RDoms has
        # one domain over all of them, where a variable's own .dim does not index
        rvars, pred, pure_vars = list(rd.vars), rd.predicate, list(d.args)
        bounds = dict(zip((id(x) for x in rd.vars), rd.bounds))
    else:
        op, body, self_ref, binop = update_combine(st, rv_name)
        dtype = f.dtype
        rvars, pred, pure_vars = list(d.rvars), d.predicate, list(d.pure_vars)
        bounds = {id(x): x.rdom.bounds[x.dim] for x in rvars}
    orig, kind, sp = _loop_domain(st, rv_name)
    if orig is None:
        rloops = [dm.name for dm in st.dims if dm.is_rvar]
        if rv_name in rloops:
            # a loop split out of a split: rfactor follows one split of an original variable
            direct = [n for sp in st.splits if sp.kind == "split" and sp.old in
                      {v.name for v in d.rvars} for n in (sp.outer, sp.inner)]
            raise ScheduleError(f"rfactor({rv_name}) on {st.name}: {rv_name} comes from "
                                "splitting a loop that was itself split; rfactor takes a "
                                "reduction variable or one half of a single split of one ("
                                f"{', '.join(direct + [v.name for v in d.rvars]) or 'none'}): "
                                "rfactor that half, then split further in the new Func")
        raise ScheduleError(f"rfactor({rv_name}) on {st.name}: {rv_name} is not a reduction loop "
                            f"of {st.name} (or a split of one); its reduction loops are: "
                            f"{', '.join(rloops) or 'none'}")
    if sp is not None and sp.tail in ("shift", "pad"):
        raise ScheduleError(f"rfactor({rv_name}) on {st.name}: the split of {orig.name} must "
                            "use tail='guard' or 'auto'")
    if any(a.name == rv_name for a in pure_vars):
        raise ScheduleError(f"rfactor({rv_name}) on {st.name}: the new dimension's name "
                            f"{rv_name} is already a dimension of {f.name}")
    intm, v_extent = _intermediate(schedule, f, name, rv_name, orig, kind, sp, rvars, bounds,
                                   pred, body, op, dtype, pure_vars, rd_name=(
                                       rvars[0].rdom.name if d.index else rd.name))
    # the final reduction over the factored dimension
    fin_rd = RDom((E.Const(0, T.int64), v_extent), name=f"{rv_name}.rf")
    fin_rd.vars[0].name = rv_name
    part = E.FuncRef(intm, pure_vars + [fin_rd.vars[0]])
    if d.index == 0:
        new_value = _replace(d.value, red, E.Reduce(op, part, fin_rd, dtype))
        fdef = Definition(f, 0, d.args, new_value, d.pure_vars, list(fin_rd.vars), None)
    else:
        new_value = E.binary(binop, self_ref, part)
        fdef = Definition(f, d.index, d.args, new_value, d.pure_vars, list(fin_rd.vars), None)
    schedule.defs[id(f)][d.index] = fdef
    fresh = StageSchedule(schedule, f, d.index, fdef)
    _keep_pure_loops(st, fresh)
    st._become(fresh)       # the caller's handle stays s[f] (or s[f].update(n))
    schedule.stages[id(f)][d.index] = st
    schedule.user_funcs.discard(intm.name)
    schedule._record(st, "rfactor", [rv_name], {"name": intm.name})
    return intm


# an update f[x] = f[x] <op> e is a reduction of e by the matching combiner
_UPDATE_COMBINE = {"add": "sum", "mul": "product", "min": "minimum", "max": "maximum"}


def update_combine(st, rv_name=None):
    """For an update stage ``f[args] = f[args] <op> e`` (or ``e <op> f[args]``) with an
    associative, commutative ``op`` (+, *, min, max), the left-hand side free of reduction
    variables and ``e`` free of ``f``: returns (reduction op, e, the self-reference, op).
    Raises ScheduleError naming rfactor when the update has another form (a scan, a
    scatter, ...), or returns None when ``rv_name`` is None and it does not apply."""
    d = st.definition
    f = d.func
    why = None
    v = d.value
    if isinstance(v, E.Cast) and v.dtype == f.dtype and isinstance(v.value, E.BinOp):
        v = v.value
    if any(all_nodes(E.to_expr(a), E.RVar) for a in d.args):
        why = ("its left-hand side depends on the reduction variables (a scan or a scatter), "
               "so the order of the updates matters")
    elif not isinstance(v, E.BinOp) or v.op not in _UPDATE_COMBINE:
        why = "its value combines them by another operation"
    else:
        key = [E.structural_key(E.to_expr(a)) for a in d.args]
        is_self = [isinstance(x, E.FuncRef) and x.func is f
                   and [E.structural_key(a) for a in x.args] == key for x in (v.a, v.b)]
        if is_self[0] == is_self[1]:
            why = (f"its value must read {f.name} exactly once, at the left-hand side's "
                   "position, combined with the rest by +, *, sl.min or sl.max")
        else:
            self_ref, e = (v.a, v.b) if is_self[0] else (v.b, v.a)
            if any(r.func is f for r in all_nodes(e, E.FuncRef)):
                why = f"the rest of its value reads {f.name} again"
            else:
                if e.dtype != f.dtype:
                    e = E.cast(f.dtype, e)
                return _UPDATE_COMBINE[v.op], e, self_ref, v.op
    if rv_name is None:
        return None
    raise ScheduleError(f"rfactor({rv_name}) on {st.name}: rfactor applies to an update of the "
                        f"form {f.name}[...] = {f.name}[...] + e (or *, sl.min, sl.max), and "
                        f"{why}")


def _intermediate(schedule, f, name, rv_name, orig, kind, sp, rvars, bounds, pred, body, op,
                  dtype, pure_vars, rd_name):
    """The intermediate Func of rfactor: ``intm[pure..., rv] = op-reduction of body`` over
    the reduction variables other than ``rv``. Returns it and the extent of ``rv``."""
    lo, ext = bounds[id(orig)]
    lo, ext = E.cast(T.int64, lo), E.cast(T.int64, ext)
    # the dimension that becomes pure, and what stays a reduction in the intermediate
    v = E.Var(rv_name)
    keep_bounds, keep_names = [], []
    for other in rvars:
        if other is not orig:
            keep_bounds.append(bounds[id(other)])
            keep_names.append(other.name)
    if kind == "whole":
        v_extent = ext
        lo0 = bounds[id(orig)][0]
        if isinstance(lo0, E.Const) and lo0.value == 0:
            sub_value = v       # as the user wrote it, for messages that print the reads
        else:
            sub_value = E.cast(T.int32, lo + E.cast(T.int64, v))
    else:
        F = sp.factor
        n_outer = (ext + (F - 1)) // F
        other_name = sp.outer if kind == "inner" else sp.inner
        keep_bounds.append((E.Const(0, T.int64), E.Const(F, T.int64) if kind == "outer"
                            else n_outer))
        keep_names.append(other_name)
        v_extent = E.Const(F, T.int64) if kind == "inner" else n_outer
    new_rd = RDom(*[(b[0], b[1]) for b in keep_bounds], name=f"{rd_name}.rf") if keep_bounds \
        else None
    if new_rd is not None:
        for rv_new, nm in zip(new_rd.vars, keep_names):
            rv_new.name = nm
    by_old = {}
    idx = 0
    for other in rvars:
        if other is not orig:
            by_old[other.name] = new_rd.vars[idx]
            idx += 1
    if kind != "whole":
        w = new_rd.vars[-1]
        inner = v if kind == "inner" else w
        outer = w if kind == "inner" else v
        k_value = lo + E.cast(T.int64, outer) * sp.factor + E.cast(T.int64, inner)
        sub_value = E.cast(T.int32, k_value)
        inside = E.binary("lt", k_value, lo + ext)
        pred = inside if pred is None else E.binary("and", E.substitute(pred, {
            orig.name: sub_value, **by_old}), inside)
    elif pred is not None:
        pred = E.substitute(pred, {orig.name: sub_value, **by_old})
    sub = {orig.name: sub_value, **by_old}
    body = E.substitute(body, sub)
    if new_rd is not None:
        new_rd.predicate = pred
    pure = pure_vars + [v]
    if new_rd is None and pred is not None:
        # a guarded split's last reduction loop: one point that exists only where the
        # guard holds, so the reads happen under an if (a select would read every operand)
        new_rd = RDom((E.Const(0, T.int64), E.Const(1, T.int64)), name=f"{rd_name}.rf")
        new_rd.vars[0].name = f"{rv_name}.rf"
        new_rd.predicate = pred
    intm = schedule._new_func(name, f"{f.name}_intm", f"rfactor({rv_name}) on {f.name}")
    if new_rd is None:
        value = body          # no guard: a guarded last loop got its one-point domain above
        idef = Definition(intm, 0, pure, value, pure, [], None)
    else:
        value = E.Reduce(op, body, new_rd, dtype)
        idef = Definition(intm, 0, pure, value, pure, list(new_rd.vars), new_rd.predicate)
    schedule._install(intm, [idef])
    return intm, v_extent


def _keep_pure_loops(st, fresh):
    """Carry what was already scheduled on the pure dimensions of ``st`` (splits, fuses,
    order, parallel / vectorize / unroll marks, bounds) over to ``fresh``, the stage after
    rfactor, whose new reduction loop goes innermost. Only the reduction loops are rebuilt:
    a user who wrote ``s[f].parallel(i)`` before ``rfactor`` keeps a parallel ``i``."""
    pure = {v.name for v in st.definition.pure_vars}
    splits = []
    for sp in st.splits:       # fuse never joins a pure loop with a reduction loop
        if sp.kind == "split" and sp.old in pure:
            pure |= {sp.outer, sp.inner}
            splits.append(sp)
        elif sp.kind == "fuse" and {sp.outer, sp.inner} <= pure:
            pure.add(sp.old)
            splits.append(sp)
    fresh.splits = splits
    kept = [d.copy() for d in st.dims if not d.is_rvar]
    fresh.dims = kept + [d for d in fresh.dims if d.is_rvar]
    fresh.bounds = dict(st.bounds)


def _replace(e, old, new):
    if e is old:
        return new
    kids = e.kids()
    if not kids:
        return e
    return e.with_kids(tuple(_replace(k, old, new) for k in kids))
