"""Where a Func may be computed and stored: the queries and checks behind ``compute_at``,
``store_at`` and the "Legal locations" of their messages, over a ``Schedule``'s Funcs,
stages and placements (``Placement`` is a base of ``Schedule``).
Example: ``s.legal_locations(g)`` is ``["root", "f.y", "f.x"]`` for a g read by f only.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo.func import Input, all_nodes, cached_on_definition
from ..errors import ScheduleError
from .stage_loops import var_name

# loop kinds whose iterations run at once: storage outside them shared by all is a race
RACING_KINDS = ("parallel", "gpu_block", "gpu_thread")


def refs(d):
    """FuncRefs in a definition's arguments and value (not descending into other Funcs)."""
    return list(cached_on_definition(d, "_refs", lambda: _refs(d)))


def _refs(d):
    out = []
    for e in list(d.args) + [d.value] + ([d.predicate] if d.predicate is not None else []):
        E.walk_expr(e, lambda n: out.append(n) if isinstance(n, E.FuncRef) else None)
    return out



class Placement:
    """The placement half of ``Schedule``: it reads ``funcs``, ``stages``, ``fsched``,
    ``outputs`` and the definitions of the Schedule it is a base of."""

    def _uses(self, consumer, f, seen=None):
        """Does ``consumer`` read ``f``, directly or through other Funcs?"""
        seen = seen if seen is not None else set()
        if id(consumer) in seen or isinstance(consumer, Input):
            return False
        seen.add(id(consumer))
        for d in self.definitions(consumer):
            for r in refs(d):
                if r.func is f or self._uses(r.func, f, seen):
                    return True
        return False

    def _loop_level(self, f, consumer, v, directive):
        """The level ("at", consumer, stage index, loop name) that ``directive(consumer, v)``
        on ``f`` names. ``v`` is a loop of the consumer, or a loop spelled as the legal
        locations list it, qualified by its stage (``g.x``, ``g.update(0).r``); with a
        stage's schedule as ``consumer`` (``s[g].update(0)``), a loop of that stage."""
        stage = None
        if hasattr(consumer, "dims") and hasattr(consumer, "index") and \
                hasattr(consumer, "func"):
            # s[h].compute_at(s[g].update(0), r): the stage names itself
            stage, consumer = consumer, consumer.func
            if stage.schedule is not self:
                raise ScheduleError(f"{directive}({stage.name}, {var_name(v, directive, f.name)}) "
                                    f"on {f.name}: {stage.name} is a stage of another schedule; "
                                    f"pass a stage of this one (s[{stage.func.name}]...) or the "
                                    f"Func {stage.func.name} itself")
        g = self.lookup(consumer, f"{directive} on {f.name}")
        name = var_name(v, directive, f.name)
        if isinstance(g, Input):
            raise ScheduleError(f"{directive}({g.name}, {name}) on {f.name}: {g.name} is an "
                                f"Input, which has no loops; name a loop of a Func that reads "
                                f"{f.name}. Legal locations for {f.name} are: "
                                f"{', '.join(self.legal_locations(f))}")
        if g is f:
            done = "stored" if directive == "store_at" else "computed"
            raise ScheduleError(f"{directive}({g.name}, {name}) on {f.name}: a Func cannot be "
                                f"{done} inside its own loops; name a loop of a Func that reads "
                                f"{f.name}, or 'root'")
        if not self._uses(g, f):
            raise ScheduleError(f"{directive}({g.name}, {name}) on {f.name}: {g.name} does not use "
                                f"{f.name}. Legal locations for {f.name} are: "
                                f"{', '.join(self.legal_locations(f))}")
        if stage is not None:
            if any(dm.name == name for dm in stage.dims):
                return ("at", g, stage.index, name)
            loops = ", ".join(dm.name for dm in stage.dims) or "none"
            raise ScheduleError(f"{directive}({stage.name}, {name}) on {f.name}: {stage.name} "
                                f"has no loop named {name}; its loops are: {loops}. Legal "
                                f"locations for {f.name} are: "
                                f"{', '.join(self.legal_locations(f))}")
        index = self._stage_of_loop(f, g, name)
        if index is not None:
            return ("at", g, index, name)
        for st in self.stages[id(g)]:
            prefix = f"{st.name}."
            if name.startswith(prefix) and any(dm.name == name[len(prefix):] for dm in st.dims):
                return ("at", g, st.index, name[len(prefix):])
        elsewhere = [h.name for h in self.funcs if h is not g and h is not f and any(
            dm.name == name for st in self.stages[id(h)] for dm in st.dims)]
        copies = [d.kwargs.get("name") for d in self.trace
                  if d.op == "cache_write" and d.func == g.name]
        hint = "" if not elsewhere else (
            f" ({elsewhere[0]} has one: cache_write gave its copy the loops split before it)"
            if elsewhere[0] in copies else f" ({elsewhere[0]} has one)")
        raise ScheduleError(f"{directive}({g.name}, {name}) on {f.name}: {g.name} has no loop "
                            f"named {name}{hint}. Legal locations for {f.name} are: "
                            f"{', '.join(self.legal_locations(f))}")

    def _stage_reads(self, st, f):
        """Does stage ``st`` read ``f``, directly or through other Funcs? Its reads of its own
        Func (an update's ``g[x] + ...``) do not count: they are the earlier stages'
        values, read where they were stored."""
        g = st.func
        return any(r.func is f or (r.func is not g and self._uses(r.func, f))
                   for r in refs(st.definition))

    def _stage_of_loop(self, f, g, name):
        """The stage of ``g`` whose loop a bare loop ``name`` means for producer ``f``: the
        last one with that loop that reads ``f``, else the last one with that loop."""
        stages = [st for st in reversed(self.stages[id(g)])
                  if any(dm.name == name for dm in st.dims)]
        for st in stages:
            if self._stage_reads(st, f):
                return st.index
        return stages[0].index if stages else None

    def _check_one_stage_reads(self, f, level, directive, name):
        """A loop of one stage of ``g`` cannot enclose the reads of ``f`` that another stage
        of ``g`` makes itself (each stage is a loop nest of its own)."""
        _, g, index, _ = level
        others = [st for st in self.stages[id(g)] if st.index != index
                  and any(r.func is f for r in refs(st.definition))]
        if others:
            raise ScheduleError(
                f"{directive} on {name}: {others[0].name} reads {f.name} too, outside "
                f"{self._level_text(level)}; no loop of one stage of {g.name} encloses every "
                f"use of {f.name}. Legal locations for {f.name} are: "
                f"{', '.join(self.legal_locations(f))}")
        # an output's reads stay where they are whatever comes later in the schedule
        target = self.stages[id(g)][index]
        for o in self.outputs:
            for st in self.stages[id(o)]:
                if st is not target and any(r.func is f for r in refs(st.definition)):
                    raise ScheduleError(
                        f"{directive} on {name}: the output {o.name} reads {f.name}"
                        f"{'' if st.index == 0 else ' in ' + st.name}, outside "
                        f"{self._level_text(level)}, so that loop cannot "
                        f"hold every use of {f.name}. Legal locations for {f.name} are: "
                        f"{', '.join(self.legal_locations(f))}")

    def _level_spelling(self, f, level):
        """How the trace writes ``level``: its bare loop name when that names the same stage
        on replay, else qualified by the stage (``g.update(0).x``)."""
        _, g, index, name = level
        if self._stage_of_loop(f, g, name) == index:
            return name
        return f"{self.stages[id(g)][index].name}.{name}"

    def _check_double_buffer_loop(self, f, level, directive, where):
        """A double-buffered Func must be computed at a serial loop (two copies alternate by
        the iteration's parity); refused at the directive, not at lowering."""
        if level[0] != "at" or not self.fsched[id(f)].double_buffer:
            return
        _, g, index, loop = level
        kind = next((d.kind for d in self.stages[id(g)][index].dims if d.name == loop), "serial")
        if kind not in ("serial", "unrolled"):
            raise ScheduleError(f"{directive} on {where}: {f.name} would be double-buffered and "
                                f"computed at {self._level_text(level)}, a {kind} loop; double "
                                f"buffering needs a serial loop (compute {f.name} at a serial "
                                "loop, or keep that loop serial)")

    def _level_text(self, level):
        """A compute / store level as the user spells it: root, g.x or g.update(0).r."""
        if level[0] != "at":
            return level[0]
        _, g, index, loop = level
        return f"{self.stages[id(g)][index].name}.{loop}"

    def _placement_conflict(self, f, store, compute, loops=None):
        """Why ``f`` cannot be stored at level ``store`` and computed at level ``compute``,
        as far as the compute level's stage shows (its current loops, or ``loops``: (name,
        kind) pairs, outermost first); '' when it may. Where the two levels lie in different
        consumers, it depends on where those are placed, which compile checks."""
        if store is None or compute is None or compute[0] != "at" or store == compute:
            return ""
        _, g, stage, compute_loop = compute
        st = self.stages[id(g)][stage]
        loops = loops if loops is not None else [(d.name, d.kind) for d in st.dims]
        names = [name for name, _ in loops]
        if compute_loop not in names:
            return ""
        inner = names.index(compute_loop)
        outer = 0
        if store[0] == "at":
            if store[1] is not g:
                return ""
            if store[2] != stage:
                return (f"{self._level_text(store)} and {self._level_text(compute)} are loops "
                        f"of different stages of {g.name}, so neither encloses the other; store "
                        "and compute it in loops of one stage")
            if store[3] not in names:
                return ""
            outer = names.index(store[3])
            if outer > inner:
                return (f"{g.name}'s loop {store[3]} is inside its loop {compute_loop} (the loops "
                        f"of {st.name} are {', '.join(names)}); the store level must be at or "
                        "outside the compute level")
            outer += 1
        for name, kind in loops[outer:inner + 1]:
            if kind in RACING_KINDS:
                return (f"{st.name}'s loop {name} is {kind} and lies between the two, so its "
                        f"iterations would share {f.name}'s storage (a race); store it at or "
                        f"inside {name}, or keep {name} serial")
        return ""

    def _check_placement(self, f, store, compute, directive, where):
        """Raise the ScheduleError of ``directive`` on ``where`` if ``f`` cannot be stored at
        ``store`` and computed at ``compute`` (see ``_placement_conflict``)."""
        why = self._placement_conflict(f, store, compute)
        if why:
            raise ScheduleError(f"{directive} on {where}: {f.name} would be stored at "
                                f"{self._level_text(store)} and computed at "
                                f"{self._level_text(compute)}, but {why}")

    def placed_in(self, g):
        """The Funcs computed or stored in a loop of ``g``, as (Func, level, "computed" or
        "stored") triples; a level is ``("at", g, stage, loop)``.
        Example: ``s.placed_in(h)`` after ``s[f].compute_at(h, y)``."""
        out = []
        for f in self.funcs:
            fs = self.fsched[id(f)]
            for level, how in ((fs.compute, "computed"), (fs.store, "stored")):
                if level is not None and level[0] == "at" and level[1] is g:
                    out.append((f, level, how))
        return out

    def _check_placements_in(self, st, loops, directive):
        """Changing stage ``st``'s loops to ``loops`` ((name, kind) pairs, outermost first:
        a split, fuse, reorder, a parallel or GPU mark) must keep legal every Func computed
        or stored in them: its loop must still exist, and a double-buffered one stay serial."""
        names = dict(loops)
        for f, level, how in self.placed_in(st.func):
            if level[2] == st.index and level[3] not in names:
                place = "compute_at" if how == "computed" else "store_at"
                raise ScheduleError(
                    f"{directive} on {st.name}: {f.name} is {how} at {self._level_text(level)} "
                    f"({place}), a loop this directive removes (the loops would be "
                    f"{', '.join(names)}); change {st.func.name}'s loops before placing "
                    f"{f.name}, or place it again at one of the new loops")
        for f in self.funcs:
            fs = self.fsched[id(f)]
            compute = fs.compute
            if compute[0] != "at" or compute[1] is not st.func or compute[2] != st.index:
                continue
            if fs.double_buffer and names[compute[3]] not in ("serial", "unrolled"):
                raise ScheduleError(
                    f"{directive} on {st.name}: {f.name} is double-buffered and computed at "
                    f"{self._level_text(compute)}, which would become {names[compute[3]]}; "
                    "double buffering needs a serial loop (keep it serial, or compute "
                    f"{f.name} at another loop)")
            why = self._placement_conflict(f, fs.store, compute, loops)
            if why:
                raise ScheduleError(f"{directive} on {st.name}: {f.name} is stored at "
                                    f"{self._level_text(fs.store)} and computed at "
                                    f"{self._level_text(compute)}, and after this directive "
                                    f"{why}")
        why = self._gpu_nesting_problem({(id(st.func), st.index): list(loops)})
        if why:
            raise ScheduleError(f"{directive} on {st.name}: {why}")

    def _gpu_nesting_problem(self, override=None):
        """Why some Func's loops cannot run where it is computed, or '': a gpu_blocks loop
        inside another GPU loop (a kernel inside a kernel), a gpu_threads loop inside a
        gpu_threads loop, or a parallel loop (CPU threads) inside GPU code. ``override``
        maps (id(Func), stage index) to a stage's loops as a directive would leave them
        ((name, kind) pairs, outermost first)."""
        override = override or {}

        def loops_of(st):
            return override.get((id(st.func), st.index)) or [(d.name, d.kind) for d in st.dims]
        gpu = {"gpu_block": "gpu_blocks", "gpu_thread": "gpu_threads"}
        for f in self.funcs:
            level = self.fsched[id(f)].compute
            own = {}
            for st in self.stages[id(f)]:
                for name, kind in loops_of(st):
                    own.setdefault(kind, name if st.index == 0 else f"{st.name}.{name}")
            if level[0] != "at" or not {"gpu_block", "gpu_thread", "parallel"} & set(own):
                continue
            computed = self._level_text(level)
            around = []         # the GPU loops around f, innermost first
            while level[0] == "at":
                _, g, index, loop = level
                st = self.stages[id(g)][index]
                loops = loops_of(st)
                names = [n for n, _ in loops]
                if loop not in names:
                    break
                around += [(kind, f"the {gpu[kind]} loop {st.name}.{name}") for name, kind in
                           reversed(loops[:names.index(loop) + 1]) if kind in gpu]
                level = self.fsched[id(g)].compute
            if not around:
                continue
            kind, inner = around[0]
            threads = next((text for k, text in around if k == "gpu_thread"), None)
            where = f"({f.name} is computed at {computed})"
            if "gpu_block" in own:
                fix = (f"bind {f.name}'s loops with gpu_threads there" if kind == "gpu_block"
                       else f"leave {f.name}'s loops serial there")
                return (f"{f.name}'s gpu_blocks loop {own['gpu_block']} would run inside {inner} "
                        f"{where}, a kernel inside a kernel; {fix}, or compute {f.name} outside "
                        "the GPU loops")
            if "gpu_thread" in own and threads is not None and \
                    self.fsched[id(f)].memory != "shared":
                # a Func in shared memory is filled by the block's threads together (each
                # thread's loops wait at barriers around the fill); any other would be
                # computed by each thread alone
                return (f"{f.name}'s gpu_threads loop {own['gpu_thread']} would run inside "
                        f"{threads} {where}, where each GPU thread runs {f.name}'s loops "
                        f"itself; leave them serial, compute {f.name} at a loop outside the "
                        "thread loops, or stage it in shared memory (cache_read(..., "
                        "memory='shared')), which the block's threads fill together")
            if "parallel" in own:
                return (f"{f.name}'s parallel loop {own['parallel']} would run inside {inner} "
                        f"{where}, in GPU code, which has no CPU threads; leave it serial (or "
                        f"bind it with gpu_threads), or compute {f.name} outside the GPU loops")
        return ""

    def legal_locations(self, f):
        """``root`` and every loop ``consumer.loop`` that encloses every read of ``f``, as
        the schedule stands: the loops of the one stage that reads ``f`` (directly, or
        through Funcs inlined into it), and the loops around that stage's compute level."""
        common = None
        for st in self._materialized_readers(f):
            around = self._enclosing_loops(st)
            common = around if common is None else [x for x in common if x in around]
        return ["root"] + (common or [])

    def _materialized_readers(self, f, seen=None):
        """The stages that read ``f`` where its values are used: a Func inlined into its
        consumers reads ``f`` at its consumers' stages."""
        seen = seen if seen is not None else set()
        out = []
        for g in self.funcs:
            if g is f or id(g) in seen:
                continue
            for st in self.stages[id(g)]:
                if not any(r.func is f for r in refs(st.definition)):
                    continue
                if self.fsched[id(g)].compute[0] == "inline":
                    seen.add(id(g))
                    out += [x for x in self._materialized_readers(g, seen) if x not in out]
                elif st not in out:
                    out.append(st)
        return out

    def _enclosing_loops(self, st):
        """``stage.loop`` names of the loops that run ``st``: its own, then those around its
        Func's compute level (outermost first within each stage)."""
        out = [f"{st.name}.{d.name}" for d in st.dims]
        level = self.fsched[id(st.func)].compute
        while level[0] == "at":
            _, g, index, loop = level
            outer = self.stages[id(g)][index]
            names = [d.name for d in outer.dims]
            if loop not in names:
                break
            out += [f"{outer.name}.{n}" for n in names[:names.index(loop) + 1]]
            level = self.fsched[id(g)].compute
        return out

    def _order_sensitive(self, st):
        """Why the order of a stage's reduction loops matters, or '' when it does not."""
        d = st.definition
        if d.index == 0:
            ops = {r.op for r in d.reductions}
            bad = ops & {"argmax", "argmin"}
            return f"{sorted(bad)[0]} keeps the first extreme it visits" if bad else ""
        f = st.func
        selfrefs = [r for r in refs(d) if r.func is f]
        if not selfrefs:
            if _writes_once_per_iteration(d):
                return ""
            return (f"the update of {f.name} may write one element of {f.name} at several "
                    "iterations, and the last write wins")
        v = d.value
        if (isinstance(v, E.BinOp) and v.op in ("add", "mul", "min", "max")
                and isinstance(v.a, E.FuncRef) and v.a.func is f and len(selfrefs) == 1
                and all(E.same(x, y) for x, y in zip(v.a.args, d.args))):
            return ""
        return f"the update of {f.name} reads {f.name} at indices it also writes"


def _writes_once_per_iteration(d):
    """True when update definition ``d`` writes a different element at every iteration of
    its reduction loops: each reduction variable is, plus a loop-invariant offset, an
    index of its own (``f[r] = g[r]``, ``f[r.y, r.x + 1] = ...``). Then the order of the
    iterations cannot change the result; with a repeated or data-dependent index
    (``h[0] = A[r]``, ``h[idx[r]] = r``) the last write wins."""
    rnames = {v.name for v in d.rvars}
    pure = {v.name for v in d.pure_vars}
    claimed = set()
    for a in d.args:
        used = E.expr_vars(a) & rnames
        if len(used) != 1:
            continue
        (name,) = used
        if _unit_offset_of(a, name, rnames | pure):
            claimed.add(name)
    return claimed == rnames


def _unit_offset_of(e, name, loop_vars):
    """Whether ``e`` is the Var ``name`` plus or minus an offset that no loop variable
    (``loop_vars``) and no read of data changes, or such an offset minus it."""
    while isinstance(e, E.Cast) and e.dtype.is_int:
        e = e.value
    if isinstance(e, E.Var) and e.name == name:
        return True
    if not (isinstance(e, E.BinOp) and e.op in ("add", "sub")):
        return False
    for this, other in ((e.a, e.b), (e.b, e.a)):     # c - r is one-to-one as r + c is
        invariant = not (E.expr_vars(other) & loop_vars) and not all_nodes(other, E.FuncRef)
        if invariant and _unit_offset_of(this, name, loop_vars):
            return True
    return False
