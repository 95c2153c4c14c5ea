"""Pass: build the loop nest of every stage from its StageSchedule (splits, fuses, order,
loop kinds, tails), with ``Provide`` statements at the bottom.

A pure definition with inline reductions becomes three nests sharing the outer loops:
init of the accumulators, the update over the reduction loops, and the finalize step
that evaluates the definition from the accumulators. Example: for
``C[i, j] = sum(A[i, k] * B[k, j])`` the default nest is
``for i: for j: { C = 0; for k: C += A*B }``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..algo.func import reduce_identity, within_arg_range
from ..errors import ScheduleError
from . import ir
from .context import AccFunc
from .gpu_kernels import is_gpu_target
from .prove import prove
from .simplify import const_value, difference, simplify

I64 = T.int64
# split factors above this bound their guarded inner loop by the extent split as well
HUGE_FACTOR = 1 << 16


def _v(name):
    return E.Var(name, I64)


def _c(v):
    return E.Const(v, I64)


class StageLoops:
    """The loops of one stage after its splits and fuses, and the value of every
    original variable in terms of them."""

    def __init__(self, ctx, func, st, definition):
        self.ctx, self.func, self.st, self.defn = ctx, func, st, definition
        self.index = st.index
        info = {}          # name -> (min, extent) Exprs (int64)
        for v in definition.pure_vars:
            # a pure Var loops over the computed region of the dimension it indexes
            d = next(i for i, a in enumerate(definition.args)
                     if isinstance(a, E.Var) and a.name == v.name)
            info[v.name] = ctx.region(func, d)
        for rv in definition.rvars:
            lo, ext = rv.rdom.bounds[rv.dim]
            info[rv.name] = (simplify(E.cast(I64, lo)), simplify(E.cast(I64, ext)))
        self.orig = [v.name for v in definition.loop_vars]
        self.rvar_names = {v.name for v in definition.rvars}
        self.defs = {}     # name -> ("split", outer, inner, factor, tail, min) | ("fuse", fused, ...)
        self.guards = []   # (name, bound expression): guard value(name) < bound
        has_red = bool(definition.reductions) if definition.index == 0 else False
        for sp in st.splits:
            if sp.kind == "split":
                m, e = info[sp.old]
                f = sp.factor
                tail = self._resolve_tail(sp, e, f, has_red)
                info[sp.outer] = (_c(0), simplify((e + (f - 1)) // f) if f > 1 else e)
                info[sp.inner] = (_c(0), _c(f))
                if tail == "guard" and f > HUGE_FACTOR:
                    # a factor far past any extent would run its guarded inner loop f times
                    # (2**40 iterations for split(x, 2**40)); no iteration past e is live
                    info[sp.inner] = (_c(0), simplify(E.binary("min", _c(f), e)))
                self.defs[sp.old] = ("split", sp.outer, sp.inner, f, tail, m, e)
                if tail == "guard":
                    self.guards.append((sp.old, simplify(m + e)))
            else:
                (mo, eo), (mi, ei) = info[sp.outer], info[sp.inner]
                # an empty region may have a negative extent (a producer computed inside
                # a guarded tail): two of them must not multiply into a positive one
                eo_, ei_ = (e if prove(E.binary("ge", self._known(e), 0), ctx.facts)
                            else E.binary("max", e, _c(0)) for e in (eo, ei))
                fused_extent = simplify(eo_ * ei_)
                # region sizes known to be constants (a cache_write's staged Func computed
                # over an output's shape): a constant trip count, so that the divide and
                # modulo of the fused-away indices are bounded where the region's Lets are
                # out of scope (a producer computed inside this stage's loops)
                known = const_value(self._known(fused_extent))
                info[sp.old] = (_c(0), _c(known) if known is not None else fused_extent)
                self.defs[sp.outer] = ("fuse_outer", sp.old, mo, ei, eo)
                self.defs[sp.inner] = ("fuse_inner", sp.old, mi, ei, eo)
        self.info = info
        self.loops = []
        for d in st.dims:
            m, e = info[d.name]
            self.loops.append((d, ctx.loop_var(func, self.index, d.name), m, e))
        self.loop_of = {d.name: lv for d, lv, _, _ in self.loops}

    def _resolve_tail(self, sp, e, f, has_red):
        if f == 1:
            return "exact"
        facts = self.ctx.facts
        e = self._known(e)
        divisible = prove(E.binary("eq", e % f, 0), facts)
        if sp.tail == "auto":
            if divisible:
                return "exact"
            # shifted tiles recompute points of a pure stage inside its region (computed or
            # bound), giving the same values again
            pure_ok = self.index == 0 and sp.old not in self.rvar_names and not has_red
            if pure_ok and prove(E.binary("ge", e, f), facts):
                return "shift"
            return "shift_guarded" if pure_ok and self._shifts_guarded(sp, e) else "guard"
        if sp.tail == "shift":
            if has_red:
                raise ScheduleError(f"split({sp.old}, {f}, tail='shift') on {self.st.name}: "
                                    "shifting recomputes points, which a reduction would count "
                                    "twice; use tail='guard'")
            if divisible:
                return "exact"
            if not prove(E.binary("ge", e, f), facts):
                # the extent may be shorter than one split: shifted while it is not, else
                # one guarded piece; a constant shorter extent is simply guarded (the same
                # values, partitioned into a vector loop and a short tail)
                return "shift_guarded" if self._shifts_guarded(sp, e) else "guard"
            return "shift"
        if sp.tail == "pad":
            return "exact" if divisible else "pad"
        return "exact" if divisible else "guard"

    def _shifts_guarded(self, sp, e):
        """True when split ``sp`` of a loop of extent ``e`` that may be shorter than one
        piece is shifted inward while it is not (``shift_guarded``): when ``e`` is symbolic
        and the inner loop and every loop split or fused from it run in order. Its tiles
        are then full whenever the extent allows, and ``specialize_tiles`` makes their
        regions constant. A vectorized or unrolled piece keeps the guard, which
        ``partition_loops`` turns into a vector loop and a short tail."""
        if const_value(e) is not None or is_gpu_target(self.ctx.target):
            return False    # GPU tiles take their storage's constant upper bound instead
        kinds = {d.name: d.kind for d in self.st.dims}
        todo = [sp.inner]
        while todo:
            n = todo.pop()
            if n in kinds:
                if kinds[n] in ("vectorized", "unrolled"):
                    return False
                continue
            for x in self.st.splits:
                if x.kind == "split" and x.old == n:
                    todo += [x.outer, x.inner]
                elif x.kind == "fuse" and n in (x.outer, x.inner):
                    todo.append(x.old)
        return True

    def _known(self, e):
        """Replace region Vars by the values they will be bound to (for proofs only)."""
        mapping = {}
        for d in range(len(self.func.definitions[0].args)):
            vals = self.ctx.region_values.get((id(self.func), d))
            if vals is not None:
                vmin, vext = self.ctx.region_vars(self.func, d)
                mapping[vmin.name], mapping[vext.name] = vals
        return simplify(ir.substitute(e, mapping)) if mapping else e

    def ref(self, name):
        """The variable holding ``name``: its loop variable, or its Let."""
        if name in self.loop_of:
            return _v(self.loop_of[name])
        return _v(self.let_name(name))

    def shallow(self, name):
        """The value of a split / fused-away variable from the variables it was split into."""
        d = self.defs[name]
        if d[0] == "split":
            _, outer, inner, f, tail, m, e = d
            o, i = self.ref(outer), self.ref(inner)
            if tail in ("shift", "shift_guarded"):
                base = E.binary("min", o * f, e - f)
                if tail == "shift_guarded":
                    base = E.binary("max", base, 0)
                return simplify(m + base + i)
            return simplify(m + o * f + i)
        _, fused, m, ei, eo = d
        raw = self.fused_raw(name)
        if raw is None:
            # plain div / mod by the constant: interval arithmetic gives bounds inference
            # the exact range, and ``y * W + x`` folds back into the fused variable
            known_ei = const_value(self._known(ei))
            p = self.ref(fused)
            return simplify(m + (p // known_ei if d[0] == "fuse_outer" else p % known_ei))
        hi = m + (eo if d[0] == "fuse_outer" else ei) - 1
        # the clamp is the identity on every iteration that runs; it tells bounds
        # inference the range where interval arithmetic cannot (symbolic sizes, tails).
        # Left unsimplified on top so that bounds inference finds ``raw`` in it
        return E.clamp(raw, simplify(m), simplify(hi))

    def fused_raw(self, name):
        """The unclamped value of a fused-away variable whose Let clamps it (see
        ``shallow``), or None when its value is exact or it is not fused away."""
        d = self.defs[name]
        if d[0] not in ("fuse_outer", "fuse_inner"):
            return None
        _, fused, m, ei, eo = d
        if const_value(self._known(ei)) is not None and self._fused_in_range(fused, eo):
            return None
        p = self.ref(fused)
        return simplify(m + (p // ei if d[0] == "fuse_outer" else p % ei))

    def _fused_in_range(self, fused, outer_extent):
        """True when fused variable ``fused`` has a constant ``outer_extent`` (its inner
        one is checked by the caller) and every split of it (and of its parts) keeps its
        values inside its range (exact or shifted tails)."""
        if const_value(self._known(outer_extent)) is None:
            return False
        todo = [fused]
        while todo:
            name = todo.pop()
            sd = self.defs.get(name)
            if sd is not None and sd[0] == "split":
                if sd[4] not in ("exact", "shift"):
                    return False
                todo += [sd[1], sd[2]]
            elif sd is not None and sd[0] in ("fuse_outer", "fuse_inner"):
                return False      # fused again: keep it simple, keep the clamp
        return True

    def deps(self, name):
        d = self.defs.get(name)
        if d is None or name in self.loop_of:
            return []
        return [d[1], d[2]] if d[0] == "split" else [d[1]]

    def needed(self, names):
        """The non-loop variables defining ``names``, dependencies first."""
        order, seen = [], set()

        def visit(n):
            if n in seen or n in self.loop_of:
                return
            seen.add(n)
            for dep in self.deps(n):
                visit(dep)
            order.append(n)
        for n in names:
            visit(n)
        return order

    def guard_bound(self, name):
        for g, bound in self.guards:
            if g == name:
                return bound
        d = self.defs.get(name)
        if d is not None and d[0] == "split" and d[4] == "shift_guarded":
            return simplify(d[5] + d[6])
        return None

    def let_name(self, var):
        return f"{self.func.name}.s{self.index}.{var}"

    def bind(self, body, names):
        """Wrap ``body`` in the Lets defining original variables ``names`` (and the split
        pieces between them and the loops), each followed by its tail guard."""
        for n in reversed(self.needed(names)):
            bound = self.guard_bound(n)
            if bound is not None:
                body = ir.IfThenElse(E.binary("lt", _v(self.let_name(n)), bound), body)
            in_range = self.fused_raw(n)
            if in_range is not None and not self._pieces_in_range(self.defs[n][1]):
                # a tail='pad' split of the fused loop runs past it, and the clamp brings
                # those iterations back onto real points: it is no identity there
                in_range = None
            if in_range is None:
                in_range = self.split_range(n)
            body = ir.LetStmt(self.let_name(n), self.shallow(n), body, in_range)
        return body

    def split_range(self, name):
        """``(min, max)`` of a split-away variable whose tail keeps it inside its region
        (exact or shifted), when that region is not constant; else None. Bounded apart, the
        split's loops overshoot a per-tile region: ``x.o * 32 + x.i.o * 16 + x.i.i`` with
        ``x.i.o < (min(x.o * 32 + 31, 79) - x.o * 32 + 16) // 16`` reaches 143, not 79."""
        d = self.defs.get(name)
        if d is None or d[0] != "split" or d[4] not in ("exact", "shift"):
            return None
        m, e = d[5], d[6]
        if isinstance(m, E.Const) and isinstance(e, E.Const):
            return None
        if not self._pieces_in_range(name):
            return None
        return (m, simplify(m + e - 1))

    def _pieces_in_range(self, name):
        """True when no split of ``name``'s pieces (its outer and inner variables, and
        theirs) runs past its own range unguarded: a tail='pad' split of ``x.o`` rounds
        ``x.o`` up, and ``x`` with it, whatever the split of ``x`` was."""
        todo = [name]
        while todo:
            sd = self.defs.get(todo.pop())
            if sd is not None and sd[0] == "split":
                if sd[4] == "pad":
                    return False
                todo += [sd[1], sd[2]]
        return True

    def subst(self, names):
        """Map original variable names -> int32 Exprs of their variables."""
        return {n: E.Cast(T.int32, self.ref(n)) for n in names}

    def shifted_subst(self, names, var, distance):
        """Like ``subst``, with the value every variable takes when variable ``var`` (a loop,
        or a variable a split or fuse consumed) is ``distance`` further on; in terms of the
        loop variables alone, so it needs none of the stage's Lets."""
        vals = {}

        def value(n):
            if n not in vals:
                if n in self.loop_of:
                    v = _v(self.loop_of[n])
                else:
                    v = ir.substitute(self.shallow(n), {self.ref(d).name: value(d)
                                                        for d in self.deps(n)})
                vals[n] = v + distance if n == var else v
            return vals[n]
        return {n: E.Cast(T.int32, simplify(value(n))) for n in names}

    def wrap_loops(self, body, loops):
        for d, lv, m, e in reversed(loops):
            body = ir.For(lv, m, e, d.kind, body, d.gpu_dim)
        return body


def build_stage(ctx, func, st, definition):
    """The statement computing one stage of ``func`` (Provides at the bottom)."""
    sl = StageLoops(ctx, func, st, definition)
    reds = definition.reductions if definition.index == 0 else []
    if not reds:
        return _simple_nest(sl, func, definition)
    return _reduction_nest(ctx, sl, func, definition, reds)


def _lhs(definition, mapping):
    return [ir.substitute(a, mapping) for a in definition.args]


def _prefetches(sl, exprs, names):
    """The ``Prefetch`` statements of the stage's prefetch directives for the reads in
    ``exprs`` (over original variables ``names``): each read of the source, at the
    variables' values ``distance`` iterations of the directive's variable further on."""
    out = []
    for g, var, distance in sl.st.prefetches:
        reads = []
        for e in exprs:
            E.walk_expr(e, lambda n: reads.append(n)
                        if isinstance(n, E.FuncRef) and n.func is g else None)
        for r in reads:
            inner = []
            for a in r.args:
                E.walk_expr(a, lambda n: inner.append(n.func) if isinstance(n, E.FuncRef) else None)
            if inner:
                raise ScheduleError(f"prefetch({g.name}, {var}) on {sl.st.name}: the read of "
                                    f"{g.name} has an index that reads {inner[0].name}, and "
                                    "fetching ahead would read it past its end; prefetch reads "
                                    "indexed by loop variables only")
        if not reads:
            continue

        indices = [[_unclamped(a, names) for a in r.args] for r in reads]

        def at(shift):
            mapping = sl.shifted_subst(names, var, shift)
            return [[ir.substitute(a, mapping) for a in idx] for idx in indices]

        def comparable(indices):
            return [[_uncast(a) for a in idx] for idx in indices]
        ahead = at(distance)
        # an earlier iteration's prefetch already fetched what another read touches then
        earlier = comparable(idx for e in range(1, _PREFETCH_LOOKBACK + 1)
                             for idx in at(distance - e))
        kept, kept_args = [], []
        for args, key in zip(ahead, comparable(ahead)):
            if any(_same_index(key, other) for other in earlier + kept):
                continue
            if any(_same_line(key, other, g.dtype.bytes) for other in kept):
                continue
            kept.append(key)
            kept_args.append(args)
        out.extend(ir.Prefetch(g, args) for args in kept_args)
    return out


# How many iterations back a prefetch looks for one that already fetched its data: a
# stencil's rows are a few iterations apart.
_PREFETCH_LOOKBACK = 8
_LINE_BYTES = 64


def _unclamped(e, names):
    """A read's index without the clamps of a boundary condition (``min(max(y - 1, 0),
    55)`` becomes ``y - 1``): a min or max of a stage variable's expression and a bound that
    has none. Its prefetch then fetches the lines the unclamped reads will touch, which a
    neighbouring read's prefetch covers (a clamp hides that the two are on one line); a
    fetch outside the data does nothing."""
    def strip(n):
        if isinstance(n, E.BinOp) and n.op in ("min", "max"):
            a_var, b_var = (_reads_variable(x, names) for x in (n.a, n.b))
            if a_var != b_var:
                return n.a if a_var else n.b
        return None
    return E.map_expr(e, strip)


def _reads_variable(e, names):
    found = []
    E.walk_expr(e, lambda n: found.append(n) if isinstance(n, E.Var) and n.name in names
                else None)
    return bool(found)


def _uncast(e):
    """``e`` without its integer-to-integer casts, to compare indices (a loop's ``int32(y +
    2)`` and ``int32(y + 1) + 1`` are the same row)."""
    return simplify(E.map_expr(e, lambda n: n.value if isinstance(n, E.Cast)
                               and n.dtype.is_int and n.value.dtype.is_int else None))


def _same_index(a, b):
    return all(difference(x, y) == 0 for x, y in zip(a, b))


def _same_line(a, b, elem_bytes):
    """``a`` and ``b`` differ only in the contiguous index, by less than a cache line (the
    neighbouring reads of a stencil row): one prefetch covers both, and the line after it
    is the next vector iteration's."""
    if not _same_index(a[:-1], b[:-1]):
        return False
    d = difference(a[-1], b[-1])
    return d is not None and abs(d) * elem_bytes < _LINE_BYTES


def _check_prefetches_found(sl, found):
    for g, var, _ in sl.st.prefetches:
        if not any(p.func is g for p in found):
            schedule = sl.st.schedule
            if g in schedule.funcs and schedule.func_schedule(g).compute == ("inline",):
                raise ScheduleError(f"prefetch({g.name}, {var}) on {sl.st.name}: {g.name} is "
                                    f"computed inline (the default for a pure Func), so it has "
                                    f"no storage to fetch from; store it first "
                                    f"(s[{g.name}].compute_root() or compute_at), or prefetch "
                                    f"what {g.name} reads")
            raise ScheduleError(f"prefetch({g.name}, {var}) on {sl.st.name}: {sl.st.name} does "
                                f"not read {g.name} where it is computed (it may read it "
                                f"through a Func that is stored, or a cache_read copy); put "
                                f"the prefetch on the stage that reads {g.name}")


def _simple_nest(sl, func, definition):
    names = sl.orig
    mapping = sl.subst(names)
    body = ir.Provide(func, _lhs(definition, mapping), ir.substitute(definition.value, mapping))
    if definition.predicate is not None:
        body = ir.IfThenElse(ir.substitute(definition.predicate, mapping), body)
    fetch = _prefetches(sl, [definition.value], names)
    _check_prefetches_found(sl, fetch)
    body = ir.make_block(fetch + [body])
    body = sl.bind(body, names)
    return sl.wrap_loops(body, sl.loops)


def _reduction_nest(ctx, sl, func, definition, reds):
    pure = [v.name for v in definition.pure_vars]
    k = next(i for i, (d, _, _, _) in enumerate(sl.loops) if d.is_rvar)
    outer, inner = sl.loops[:k], sl.loops[k:]
    inner_pure = [lp for lp in inner if not lp[0].is_rvar]
    pmap = sl.subst(pure)
    full = sl.subst(sl.orig)
    pargs = _lhs(definition, pmap)
    direct = (len(reds) == 1 and definition.value is reds[0]
              and reds[0].op not in ("argmax", "argmin"))
    accs, inits, updates, finals, fin_checks = [], [], [], {}, []
    for n, red in enumerate(reds):
        body = ir.substitute(red.body, full)
        if direct:
            acc = func
        else:
            acc = AccFunc(f"{func.name}.{red.op}{n}" if len(reds) > 1 else f"{func.name}.{red.op}",
                          red.body.dtype if red.op in ("argmax", "argmin") else red.dtype,
                          len(pargs), func)
            accs.append(acc)
        cur = E.FuncRef(acc, pargs)
        inits.append(ir.Provide(acc, pargs, reduce_identity(red.op, acc.dtype)))
        if red.op in ("argmax", "argmin"):
            idx = AccFunc(f"{acc.name}.index", T.int32, len(pargs), func)
            accs.append(idx)
            lo = simplify(E.cast(I64, red.rdom.bounds[0][0]))
            # Under where() a point may see no element, or only ones equal to the identity:
            # the index starts one below the domain (no element yet) and the first element
            # taken is always taken, so the result is an index where() admits.
            unseen = (simplify(E.cast(T.int32, lo - 1)) if definition.predicate is not None
                      else None)
            inits.append(ir.Provide(idx, pargs, unseen if unseen is not None
                                    else E.cast(T.int32, lo)))
            cname = f"{acc.name}.better"
            better = E.Var(cname, T.bool_)
            cmp = E.BinOp("gt" if red.op == "argmax" else "lt", body, cur)
            if body.dtype.is_float:
                # the first NaN wins, as numpy's argmax / argmin (and as maximum propagates)
                cmp = E.BinOp("or", cmp, E.BinOp("and", E.BinOp("ne", body, body),
                                                 E.BinOp("eq", cur, cur)))
            if unseen is not None:
                cmp = E.BinOp("or", cmp, E.BinOp("eq", E.FuncRef(idx, pargs), unseen))
                fin_checks.append(_arg_found_check(ctx, func, red, E.FuncRef(idx, pargs),
                                                   unseen))
            rv = full[red.rdom.vars[0].name]
            updates.append(ir.LetStmt(cname, cmp, ir.make_block([
                ir.Provide(idx, pargs, E.Select(better, rv, E.FuncRef(idx, pargs))),
                ir.Provide(acc, pargs, E.Select(better, body, cur))])))
            finals[id(red)] = simplify(within_arg_range(E.FuncRef(idx, pargs), red.rdom))
        else:
            op = {"sum": "add", "product": "mul", "maximum": "max", "minimum": "min"}[red.op]
            updates.append(ir.Provide(acc, pargs, E.BinOp(op, cur, body)))
            finals[id(red)] = cur
    update_body = ir.make_block(updates)
    if definition.predicate is not None:
        update_body = ir.IfThenElse(ir.substitute(definition.predicate, full), update_body)
    value = None if direct else _replace_reduces(definition.value, finals)
    fetch = _prefetches(sl, [red.body for red in reds], sl.orig)
    fin_fetch = [] if direct else _prefetches(sl, [value], pure)
    _check_prefetches_found(sl, fetch + fin_fetch)
    update_body = ir.make_block(fetch + [update_body])
    update = sl.wrap_loops(sl.bind(update_body, sl.orig), inner)
    init = sl.wrap_loops(sl.bind(ir.make_block(inits), pure), inner_pure)
    parts = [init, update]
    if not direct:
        fin = ir.make_block(fin_fetch + fin_checks
                            + [ir.Provide(func, pargs, ir.substitute(value, pmap))])
        parts.append(sl.wrap_loops(sl.bind(fin, pure), inner_pure))
    body = ir.make_block(parts)
    for acc in reversed(accs):
        body = ir.Realize(acc, [], "local", body)
    return sl.wrap_loops(body, outer)


def _arg_found_check(ctx, func, red, index, unseen):
    """The Assert that an argmax / argmin under where() found an element at this point:
    with none there is no index to give (numpy and torch raise on an empty argmax)."""
    user = func.helper_of[0] if getattr(func, "helper_of", None) else func
    code = 100 + len(ctx.assert_messages)
    ctx.assert_messages[code] = (
        f"{user.name}: sl.{red.op} over {red.rdom.name}, whose where() predicate admits no "
        "element at some point of the output for these arguments; an arg-reduction of "
        "nothing has no index (numpy and torch raise too): pass data for which where() "
        "keeps at least one element, or reduce with sl.maximum / sl.minimum, which give "
        "the identity there")
    return ir.Assert(E.BinOp("ne", index, unseen), code)


def _replace_reduces(e, finals):
    def go(n):
        if isinstance(n, E.Reduce):
            return finals[id(n)]
        kids = n.kids()
        return n.with_kids(tuple(go(c) for c in kids)) if kids else n
    return go(e)


def build_func(ctx, func):
    """All stages of ``func``, in order."""
    stages = ctx.schedule.stage_schedules(func)
    return ir.make_block([build_stage(ctx, func, st, d)
                          for st, d in zip(stages, ctx.defs[id(func)])])

