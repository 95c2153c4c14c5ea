"""The search space: named actions on the stages of a schedule.

An action is a schedule primitive on a named stage and named loops (never a positional
axis): append ``split``, ``reorder``, ``vectorize``, ``unroll``, ``parallel``,
``compute_root`` / ``compute_inline`` / ``compute_at`` / ``store_at``, ``cache_read``,
``cache_write`` or ``rfactor`` to the trace; or edit a directive already in the trace
(a split, vector or unroll factor doubled or halved, a ``compute_at`` moved one loop
out or in, a directive dropped). Every child is therefore again a plain trace, i.e. an
``sl.Schedule`` that prints as Python and serializes to JSON. Children are proposed
without checking; ``realize`` replays one and a ScheduleError rejects it.
Example::

    for child in children(s, ["C"]):   # the algorithm's own Func names
        s2 = realize(child, [C])      # an sl.Schedule, or raises sl.ScheduleError
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import math

from ..algo import expr as E
from ..algo.evaluate import Unbound, evaluate
from ..algo.func import Input
from ..errors import SchedlangError
from ..lower.context import LowerContext
from ..lower.lower import PASSES
from ..schedule.schedule import Directive, Schedule

SPLIT_FACTORS = (4, 8, 16, 32, 64)
VECTOR_WIDTHS = (4, 8, 16)
UNROLL_FACTORS = (2, 4)
# A loop at most this long may be unrolled or vectorized whole.
FULL_UNROLL_MAX = 8
FULL_VECTOR_MAX = 16
MAX_COMPUTE_AT_LOCATIONS = 8
COMBINE_OPS = ("sum", "product", "maximum", "minimum")


class Child:
    """A proposed candidate: its directives (dicts as in ``Schedule.to_json``), the action
    that made it (as text), the output names, and ``kind``: "append" (a new directive) or
    "edit" (a directive of the parent changed or dropped)."""

    __slots__ = ("directives", "action", "outputs", "kind")

    def __init__(self, directives, action, outputs, kind="append"):
        self.directives, self.action, self.outputs = directives, action, outputs
        self.kind = kind

    def to_json(self):
        return json.dumps({"schedlang_schedule": 1, "outputs": self.outputs,
                           "directives": self.directives})

    @property
    def key(self):
        """Equal for equal traces (the search never proposes a trace twice)."""
        return json.dumps(self.directives, sort_keys=True)


def reads(definition):
    """The FuncRefs (reads of Funcs and Inputs) in a definition's arguments and value.
    Example: ``[r.func.name for r in reads(C.definitions[0])]``."""
    out = []
    for e in list(definition.args) + [definition.value]:
        E.walk_expr(e, lambda n: out.append(n) if isinstance(n, E.FuncRef) else None)
    return out


def trace_dicts(s):
    """The trace of Schedule ``s`` as a list of directive dicts.
    Example: ``trace_dicts(s)[0]["op"]``."""
    return json.loads(s.to_json())["directives"]


def realize(child, outputs):
    """Replay a Child onto ``outputs``: the Schedule, or a ScheduleError when an action
    turned out illegal. Example: ``realize(children(s)[0], [C])``."""
    return Schedule.from_json(child.to_json(), *outputs)


# ------------------------------------------------------------------ loop extents

_REGIONS = {}
# Values of symbolic sizes the search assumes (the sizes it tunes at, given or estimated):
# the templates and actions size tiles and splits by them; the schedules still run at any
# size. None: symbolic extents stay unknown.
SIZE_ESTIMATES = contextvars.ContextVar("schedlang_size_estimates", default=None)


@contextlib.contextmanager
def size_estimates(sizes):
    """Within the block, symbolic sizes count as ``sizes`` (a dict, or None) for
    ``extents_of``. Example: ``with size_estimates({"N": 1024}): seed_schedules([C], 2)``."""
    token = SIZE_ESTIMATES.set(dict(sizes) if sizes else None)
    try:
        yield
    finally:
        SIZE_ESTIMATES.reset(token)


def _extent_value(x):
    """An extent as an int: a constant, or one computed from ``SIZE_ESTIMATES``; else None."""
    if isinstance(x, E.Const):
        return int(x.value)
    estimates = SIZE_ESTIMATES.get()
    if not estimates or not isinstance(x, E.Expr):
        return None
    try:
        return int(evaluate(x, estimates))
    except (Unbound, ArithmeticError, TypeError, ValueError):
        return None


def stored_regions(outputs):
    """``{func name: [extent or None per dimension]}``: the region of every Func of the
    pipeline but its outputs (an output's region is its shape) when all of them are
    stored (compute_root), from bounds inference, so that a producer indexed differently
    from the output (a padded input, transposed weights) has its true extents. Cached per
    pipeline. Example: ``stored_regions([C])["Bp"]`` for a ``C`` that reads a Func ``Bp``."""
    estimates = SIZE_ESTIMATES.get()
    key = (tuple(id(o) for o in outputs), tuple(sorted(estimates.items())) if estimates else ())
    hit = _REGIONS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], outputs)):
        return hit[1]
    s = Schedule(*outputs)
    for f in s.funcs:
        if f not in s.outputs and not isinstance(f, Input):
            s[f].compute_root()
    regions = {}
    try:
        ctx = LowerContext(s, "llvm")
        stmt = None
        for name, fn in PASSES:
            stmt = fn(stmt, ctx)
            if name == "schedule_functions":
                break
        names = {id(f): f.name for f in s.funcs}
        for (fid, d), (_, ext) in ctx.region_values.items():
            if fid in names:
                row = regions.setdefault(names[fid], {})
                row[d] = _extent_value(ext)
    except SchedlangError:
        regions = {}
    regions = {n: [row.get(d) for d in range(max(row) + 1)] for n, row in regions.items()}
    if len(_REGIONS) > 64:
        _REGIONS.clear()
    _REGIONS[key] = (list(outputs), regions)
    return regions


def extents_of(s):
    """``{stage name: {loop name: extent or None}}`` for every stage of Schedule ``s``:
    each Func's stored region (``stored_regions``) and the RDoms' extents, carried through
    splits and fuses. Example: ``extents_of(s)["C"]["i"] == 64``."""
    by_var = {}
    for o in s.outputs:
        for a, x in zip(o.definitions[0].args, o.shape or ()):
            if (n := _extent_value(x)) is not None:
                by_var[a.name] = n
    regions = stored_regions(s.outputs)
    out = {}
    for f in s.funcs:
        region = regions.get(f.name, [])
        for st in s.stage_schedules(f):
            base = {}
            pure = [a.name for a in f.definitions[0].args] if not isinstance(f, Input) else []
            for v in st.definition.loop_vars:
                if isinstance(v, E.RVar):
                    ext = v.rdom.bounds[v.dim][1]
                    base[v.name] = _extent_value(ext)
                elif v.name in pure and pure.index(v.name) < len(region) and \
                        region[pure.index(v.name)] is not None:
                    base[v.name] = region[pure.index(v.name)]
                else:
                    base[v.name] = by_var.get(v.name)
            for sp in st.splits:
                if sp.kind == "split":
                    old = base.get(sp.old)
                    base[sp.inner] = sp.factor
                    base[sp.outer] = None if old is None else max(1, math.ceil(old / sp.factor))
                else:
                    a, b = base.get(sp.outer), base.get(sp.inner)
                    base[sp.old] = None if a is None or b is None else a * b
            out[st.name] = {d.name: base.get(d.name) for d in st.dims}
    return out


def split_depth(st, name):
    """How many splits made loop ``name`` of stage ``st`` (0 for an original loop).
    Example: ``split_depth(s[C], "i.o.i") == 2``."""
    parent = {sp.inner: sp.old for sp in st.splits if sp.kind == "split"}
    parent.update({sp.outer: sp.old for sp in st.splits if sp.kind == "split"})
    n = 0
    while name in parent and n < 16:
        name, n = parent[name], n + 1
    return n


# ------------------------------------------------------------------ proposing

def _append(s, base, func, stage, op, args, kwargs=None):
    d = {"func": func, "stage": stage, "op": op, "args": list(args), "kwargs": kwargs or {}}
    text = Directive(func, stage, op, args, kwargs or {}).to_python(s.user_funcs)
    return Child(base + [d], text, [o.name for o in s.outputs])


def _stage_actions(s, f, st, ext, base):
    out = []
    fname, idx = f.name, st.index
    dims = st.dims
    serial = [d for d in dims if d.kind == "serial"]
    for d in serial:
        n = ext.get(d.name)
        if split_depth(st, d.name) >= 2:
            continue
        for fac in SPLIT_FACTORS:
            if n is None or fac < n:
                out.append(_append(s, base, fname, idx, "split", [d.name, fac],
                                   {"tail": "auto", "names": [f"{d.name}.o", f"{d.name}.i"]}))
    for a, b in zip(dims, dims[1:]):
        out.append(_append(s, base, fname, idx, "reorder", [b.name, a.name]))
    pure = [d for d in dims if not d.is_rvar]
    if pure and pure[-1].kind == "serial":
        d, n = pure[-1], ext.get(pure[-1].name)
        if n is not None and n <= FULL_VECTOR_MAX and split_depth(st, d.name) > 0:
            out.append(_append(s, base, fname, idx, "vectorize", [d.name]))
        for w in VECTOR_WIDTHS:
            if n is None or w <= n:
                out.append(_append(s, base, fname, idx, "vectorize", [d.name, w]))
    for d in serial[-3:]:
        n = ext.get(d.name)
        if n is not None and n <= FULL_UNROLL_MAX:
            out.append(_append(s, base, fname, idx, "unroll", [d.name]))
        elif split_depth(st, d.name) < 2:
            for fac in UNROLL_FACTORS:
                out.append(_append(s, base, fname, idx, "unroll", [d.name, fac]))
    placed = s.func_schedule(f).compute
    if placed == ("root",) and not any(d.kind == "parallel" for d in dims):
        for d in [d for d in dims if not d.is_rvar and d.kind == "serial"][:2]:
            n = ext.get(d.name)
            if n is None or n >= 2:
                out.append(_append(s, base, fname, idx, "parallel", [d.name]))
    return out


def _locations(s, f):
    """Loops (consumer Func name, loop name) where ``f`` may be computed, outermost first."""
    legal = set(s.legal_locations(f))
    locs = []
    for g in s.funcs:
        if g is f:
            continue
        for st in s.stage_schedules(g):
            for d in st.dims:
                if f"{st.name}.{d.name}" in legal and d.kind in ("serial", "parallel"):
                    locs.append((g.name, d.name))
    return locs


def _traced(base, func, op, arg0=None):
    return any(d["func"] == func and d["op"] == op and (arg0 is None or d["args"][:1] == [arg0])
               for d in base)


def _func_actions(s, f, base, original):
    out = []
    fname = f.name
    is_output = any(f is o for o in s.outputs)
    fs = s.func_schedule(f)
    d0 = s.definitions(f)[0]
    reductions = d0.reductions
    if not is_output:
        if fs.compute != ("root",):
            out.append(_append(s, base, fname, 0, "compute_root", []))
        if fs.compute != ("inline",) and len(s.definitions(f)) == 1 and not reductions:
            out.append(_append(s, base, fname, 0, "compute_inline", []))
        locs = _locations(s, f)
        step = max(1, len(locs) // MAX_COMPUTE_AT_LOCATIONS)
        for g, loop in locs[::step][:MAX_COMPUTE_AT_LOCATIONS]:
            if fs.compute[:1] == ("at",) and fs.compute[1].name == g and fs.compute[3] == loop:
                continue
            out.append(_append(s, base, fname, 0, "compute_at", [g, loop]))
        if fs.compute[:1] == ("at",):
            g, loop = fs.compute[1], fs.compute[3]
            names = [d.name for d in s.stage_schedules(g)[fs.compute[2]].dims]
            if loop in names:
                for outer in names[:names.index(loop)][-3:]:
                    out.append(_append(s, base, fname, 0, "store_at", [g.name, outer]))
    if reductions and fname in original and not _traced(base, fname, "cache_write"):
        out.append(_append(s, base, fname, 0, "cache_write", [], {"memory": "local",
                                                                  "name": f"{fname}_acc"}))
    if reductions:
        for src in {id(r.func): r.func for r in reads(d0)}.values():
            if src is f or _traced(base, src.name, "cache_read", fname):
                continue
            if isinstance(src, Input) or src.shape is not None or src.name in original:
                out.append(_append(s, base, src.name, 0, "cache_read", [fname],
                                   {"memory": "global", "name": f"{src.name}_{fname}_copy"}))
    if len(reductions) == 1 and reductions[0].op in COMBINE_OPS and not _traced(base, fname,
                                                                                "rfactor"):
        st = s.stage_schedules(f)[0]
        rdims = [d.name for d in st.dims if d.is_rvar and d.kind == "serial"]
        for rv in rdims[-2:]:
            out.append(_append(s, base, fname, 0, "rfactor", [rv], {"name": f"{fname}_rf"}))
    return out


def _edits(s, base):
    """Children that change one directive already in the trace."""
    out = []
    names = [o.name for o in s.outputs]
    stage_dims = {}
    for f in s.funcs:
        for st in s.stage_schedules(f):
            stage_dims[(f.name, st.index)] = [d.name for d in st.dims]

    def edited(n, d, what):
        new = [dict(x) for x in base]
        new[n] = d
        return Child(new, what, names, "edit")

    for n, d in enumerate(base):
        op, args = d["op"], d["args"]
        numeric = {"split": [1], "vectorize": [1] if len(args) == 2 else [],
                   "unroll": [1] if len(args) == 2 else [], "tile": [2, 3]}.get(op, [])
        for pos in numeric:
            v = args[pos]
            for new_v in (v * 2, v // 2):
                if new_v < 2 or new_v > 512 or (op == "vectorize" and new_v > 64):
                    continue
                nd = dict(d, args=list(args))
                nd["args"][pos] = new_v
                out.append(edited(n, nd, f"#{n} {op} {v} -> {new_v}"))
        if op == "compute_at":
            g, loop = args
            dims = next((v for (fn, _), v in stage_dims.items() if fn == g and loop in v), None)
            if dims:
                k = dims.index(loop)
                for j in (k - 1, k + 1):
                    if 0 <= j < len(dims):
                        out.append(edited(n, dict(d, args=[g, dims[j]]),
                                          f"#{n} compute_at {loop} -> {dims[j]}"))
        if op in ("vectorize", "unroll", "parallel", "compute_at", "store_at", "compute_root",
                  "compute_inline", "reorder") and not (op in ("vectorize", "unroll")
                                                        and len(args) == 2):
            out.append(Child(base[:n] + base[n + 1:], f"drop #{n} {op}", names, "edit"))
    return out


def children(s, original_names=()):
    """Every child of Schedule ``s`` one action away (see the module docstring), unchecked.
    ``original_names`` are the algorithm's own Func names (cache_write applies to those).
    Example: ``len(children(sl.Schedule(C)))``."""
    base = trace_dicts(s)
    exts = extents_of(s)
    original = set(original_names)
    out = []
    for f in s.funcs:
        placed = s.func_schedule(f).compute
        if placed != ("inline",):
            for st in s.stage_schedules(f):
                out += _stage_actions(s, f, st, exts.get(st.name, {}), base)
        out += _func_actions(s, f, base, original)
    out += _edits(s, base)
    return out


__all__ = ["Child", "children", "realize", "extents_of", "trace_dicts", "split_depth", "reads"]
