"""``cache_read`` and ``cache_write``: staged copies of a Func (SPEC section 2).

A staged Func is a new Func of the schedule: ``cache_read`` copies a producer for one
consumer, whose reads are redirected to the copy; ``cache_write`` computes a Func into
the copy and leaves the Func itself a copy-out. Both are then scheduled like any Func.
Example: ``Bp = s[B].cache_read(C, memory="global"); s[Bp].compute_at(C, jo)``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo.func import Definition, Input
from ..errors import ScheduleError
from .schedule import MEMORIES, InputSchedule, refs
from .stage import StageSchedule


def cache_read(s, st, consumer, memory, name):
    """``s[src].cache_read(consumer)``: a staged Func copying ``st``'s Func, which the
    consumer reads instead. Returns it. Example: ``cache_read(s, s[B], C, "global", None)``."""
    src = st.func
    if st.index != 0:
        raise ScheduleError(f"cache_read on {st.name}: call it on s[{src.name}]")
    g = s.lookup(consumer, f"cache_read on {src.name}")
    if memory not in MEMORIES:
        raise ScheduleError(f"cache_read({g.name}) on {src.name}: memory must be one of "
                            f"{', '.join(MEMORIES)}, got {memory!r}")
    if isinstance(g, Input) or g is src:
        raise ScheduleError(f"cache_read({g.name}) on {src.name}: the consumer must be a Func "
                            f"that reads {src.name}")
    reads = [r for d in s.definitions(g) for r in refs(d) if r.func is src]
    if not reads:
        users = [h.name for h in s.funcs if any(r.func is src for d in s.definitions(h)
                                                   for r in refs(d))]
        who = (f"the Funcs that do are: {', '.join(users)}" if users else
               f"no Func reads {src.name} (is it the output, or the Func that reads "
               f"{g.name}? cache_read stages a producer of the consumer you name)")
        raise ScheduleError(f"cache_read({g.name}) on {src.name}: {g.name} does not read "
                            f"{src.name} directly; {who}")
    ndim = len(src.shape) if isinstance(src, Input) else src.ndim
    first = reads[0].args
    names = [a.name for a in first if isinstance(a, E.Var)]
    if len(names) != ndim or len(set(names)) != ndim:
        names = [f"{src.name}_{c}" for c in "ijklmnop"[:ndim]]
    vs = [E.Var(n) for n in names]
    staged = s._new_func(name, f"{src.name}_{g.name}", f"cache_read({g.name}) on {src.name}")
    defn = Definition(staged, 0, vs, E.FuncRef(src, vs), vs, [], None)
    s._install(staged, [defn])
    s.fsched[id(staged)].memory = memory
    for cst in s.stages[id(g)]:
        cst.definition = redirect(cst.definition, src, staged)
    if isinstance(st, InputSchedule):
        st.staged.append(staged)
    s.user_funcs.discard(staged.name)
    s._record(st, "cache_read", [g.name], {"memory": memory, "name": staged.name})
    return staged


def cache_write(s, st, memory, name):
    """``s[f].cache_write()``: ``st``'s Func is computed (all its stages) into a staged Func,
    then copied out; producers placed in its loops feed the staged Func. Returns it.
    Example: ``acc = cache_write(s, s[C], "local", None)``."""
    f = st.func
    if st.index != 0:
        raise ScheduleError(f"cache_write on {st.name}: call it on s[{f.name}]")
    if memory not in MEMORIES:
        raise ScheduleError(f"cache_write on {f.name}: memory must be one of "
                            f"{', '.join(MEMORIES)}, got {memory!r}")
    staged = s._new_func(name, f"{f.name}_cache", f"cache_write on {f.name}")
    old_stages = s.stages[id(f)]
    new_defs = []
    for d in s.definitions(f):
        nd = redirect(d, f, staged)
        nd = Definition(staged, d.index, nd.args, nd.value, nd.pure_vars, nd.rvars, nd.predicate)
        new_defs.append(nd)
        # an update stage reads the staged Func, whose type is its first definition's
        staged.definitions = list(new_defs)
    s._install(staged, new_defs)
    is_output = st._is_output()
    for old, new in zip(old_stages, s.stages[id(staged)]):
        new.dims, new.splits = old.dims, old.splits
        # an output's bound() states its own extent (checked at the call): it stays
        new.bounds = {} if is_output else old.bounds
        new.bounds_given_on = old.bounds_given_on or f.name
        new.tensorized = old.tensorized
    # producers placed in f's loops now feed the staged Func, which took those loops
    for fs in s.fsched.values():
        for attr in ("compute", "store"):
            level = getattr(fs, attr)
            if level is not None and level[0] == "at" and level[1] is f:
                setattr(fs, attr, ("at", staged) + tuple(level[2:]))
    vs = list(s.definitions(f)[0].args)
    copy = Definition(f, 0, vs, E.FuncRef(staged, vs), vs, [], None)
    s.defs[id(f)] = [copy]
    fresh = StageSchedule(s, f, 0, copy)
    if is_output:
        fresh.bounds = dict(old_stages[0].bounds)
    # a handle taken before (st = s[f]) goes on naming f's stage, now the copy-out
    old_stages[0]._become(fresh)
    for gone in old_stages[1:]:
        gone._retire(f"cache_write on {f.name} moved its update stages to {staged.name}")
    if len(old_stages) > 1:
        s.moved_updates[id(f)] = staged.name
    s.stages[id(f)] = [old_stages[0]]
    s.fsched[id(staged)].memory = memory
    s.user_funcs.discard(staged.name)
    s._record(st, "cache_write", [], {"memory": memory, "name": staged.name})
    return staged


def redirect(d, src, dst):
    """A copy of definition ``d`` whose reads of ``src`` read ``dst`` instead."""
    def fn(n):
        return E.FuncRef(dst, n.args) if isinstance(n, E.FuncRef) and n.func is src else None

    def go(e):
        return None if e is None else E.map_expr(e, fn)
    return Definition(d.func, d.index, tuple(go(a) for a in d.args), go(d.value), d.pure_vars,
                      d.rvars, go(d.predicate))
