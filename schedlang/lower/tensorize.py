"""Lowering pass ``tensorize``: replace the loop nest under a tensorized loop by one
``TensorOp`` (a hardware dot-product instruction from ``schedlang.intrinsics``).

The match is checked, not assumed: the nest must be exactly two loops of constant extent
(the instruction's lanes and its reduction depth), its body one store ``out[i] = out[i] +
cast(a) * cast(b)`` that is the instruction's semantics update with the same operand
dtypes, the output contiguous along the lane loop and unchanged along the reduction loop,
and every operand index affine in both loops. Anything else raises ``ScheduleError`` naming
the loop and the instruction. Runs after guards are removed, so a nest that still holds a
tail guard of its own loops is rejected rather than silently computing extra points; a guard
that does not depend on them (a loop outside, or a where() on outer loops) encloses the
instruction.
Example: ``stmt = tensorize(stmt, ctx)``.
"""
from __future__ import annotations

import re

from ..algo import expr as E
from ..algo.printer import expr_to_str, user_text
from ..errors import ScheduleError
from ..intrinsics import lookup
from . import ir
from .simplify import difference, linear, simplify
from .symbolic import to_sympy


def tensorize(stmt, ctx):
    """Replace each tensorized loop nest by a ``TensorOp``; see the module docstring."""
    wanted = {}
    for f in ctx.schedule.funcs:
        for st in ctx.schedule.stage_schedules(f):
            if st.tensorized is not None:
                v, iname = st.tensorized
                wanted[f"{f.name}.s{st.index}.{v}"] = (st, v, lookup(iname))
    if not wanted:
        return stmt
    done, with_init, with_storage = set(), set(), {}

    def visit(s):
        if isinstance(s, ir.For) and s.var in wanted and _has_inner_loop(s):
            st, v, intr = wanted[s.var]
            done.add(s.var)
            return _Match(ctx, st, v, intr, s).tensor_op()
        if isinstance(s, ir.For) and s.var in wanted and _holds_init_and_loop(s):
            with_init.add(s.var)
        if isinstance(s, ir.For) and s.var in wanted:
            stored = _allocated(s.body)
            if stored:
                with_storage[s.var] = stored
        return None
    out = ir.map_stmt(stmt, visit)
    for var, (st, v, intr) in wanted.items():
        if var in with_storage and var not in done:
            raise ScheduleError(f"tensorize({v}, {intr.name}) on {st.name}: "
                                + _storage_inside(v, intr, with_storage[var]))
        if var in with_init and var not in done:
            f = st.name.split(".update(")[0]
            raise ScheduleError(
                f"tensorize({v}, {intr.name}) on {st.name}: the loop {v} holds both the "
                f"initial value of {f}'s inline reduction and the reduction loop under it; "
                f"{intr.name} replaces the update alone: write the sum as {f}[...] = 0 and "
                f"{f}[...] += ..., and tensorize s[{f}].update(0), or move a reduction loop "
                f"outside {v} (reorder) so that the initial value is stored before it")
        if var not in done:
            raise ScheduleError(f"tensorize({v}, {intr.name}) on {st.name}: no reduction loop "
                                f"is nested under {v}; {intr.name} needs {intr.shape_text()} "
                                f"under it (the lane loop {v} itself, then the reduction loop)")
    _check_no_vector_loop_around(out, ctx)
    return out


def _has_inner_loop(s):
    """The update nest has a loop under the tensorized one; the init nest (same loop
    names, a plain store of the initial value) does not and is left as it is."""
    body = s.body
    while isinstance(body, ir.LetStmt):
        body = body.body
    return isinstance(body, ir.For)


def _allocated(s):
    """The buffers (Funcs) allocated anywhere in ``s``, in order."""
    found = []
    ir.walk_stmt(s, lambda x: found.append(x.buffer) if isinstance(x, ir.Allocate) and
                 x.buffer not in found else None)
    return found


def _storage_inside(v, intr, buffers):
    """Why a tensorized nest that holds the storage of other Funcs cannot be replaced."""
    names = ", ".join(buffers)
    return (f"the loop nest under {v} also stores and computes {names} (placed inside it by "
            f"compute_at / store_at), but {intr.name} replaces {v} and its reduction loop "
            f"alone; compute_at {names} at a loop outside {v}, or compute_root")


def _holds_init_and_loop(s):
    """The loop's body stores (an inline reduction's initial value) and then loops: the
    nest of a pure stage's ``sl.sum``, where the lane loop encloses the init."""
    body = s.body
    while isinstance(body, (ir.LetStmt, ir.Realize)):
        body = body.body
    return isinstance(body, ir.Block) and any(isinstance(c, ir.For) for c in body.stmts)


def _check_no_vector_loop_around(stmt, ctx):
    def walk(s, vec):
        if s is None:
            return
        if isinstance(s, ir.TensorOp) and vec is not None:
            stage, dim = ctx.loop_names.get(vec, ("", vec))
            raise ScheduleError(f"vectorize({dim}) on {stage} encloses a tensorized loop nest "
                                f"({s.intrinsic.name}); the instruction is already a vector "
                                f"operation: unroll {dim} instead")
        if isinstance(s, ir.Block):
            for c in s.stmts:
                walk(c, vec)
        if isinstance(s, ir.For) and s.kind == "vectorized":
            vec = s.var
        for f in s.children:
            walk(getattr(s, f), vec)
    walk(stmt, None)


class _Match:
    """Match one loop nest against an intrinsic's semantics and build its TensorOp."""

    def __init__(self, ctx, st, v, intr, loop):
        self.ctx, self.st, self.v, self.intr, self.loop = ctx, st, v, intr, loop
        self.where = f"tensorize({v}, {intr.name}) on {st.name}"
        self.guards = []

    def fail(self, why):
        raise ScheduleError(f"{self.where}: {why}")

    def user(self, var):
        return self.ctx.loop_names.get(var, ("", var))[1]

    def tensor_op(self):
        loops, lets, body, prefetches = self.nest()
        extents = []
        for lp in loops:
            ext = simplify(lp.extent)
            if not isinstance(ext, E.Const):
                self.fail(f"the loop {self.user(lp.var)} has no constant extent; split it by "
                          f"the instruction's size ({self.intr.shape_text()})")
            if lp.kind not in ("serial", "unrolled"):
                self.fail(f"the loop {self.user(lp.var)} is marked {lp.kind}; the instruction "
                          "replaces it, so leave it serial")
            extents.append(int(ext.value))
        value, index = _inline_lets(body.value, lets), _inline_lets(body.index, lets)
        found = self.match_semantics(value, body.buffer)
        out_load = found["out"]
        if out_load.buffer != body.buffer or difference(simplify(out_load.index), simplify(index)) != 0:
            self.fail(f"the update reads {out_load.buffer} at another point than it writes "
                      f"{body.buffer}; the instruction accumulates in place")
        lane, red = self.lane_and_reduction(loops, extents, index)
        ops = {}
        for role in ("out", "a", "b"):
            load = found[role]
            idx = index if role == "out" else load.index
            if role != "out" and load.buffer == body.buffer:
                self.fail(f"operand {role} reads {body.buffer}, the buffer being accumulated")
            strides = tuple(self.stride(idx, lp, role, load.buffer) for lp in (lane, red))
            base = simplify(E.substitute(idx, {lane.var: lane.min, red.var: red.min}))
            ops[role] = ir.TensorOperand(load.buffer, load.dtype, base, strides)
        op = ir.TensorOp(self.intr, ops["out"], ops["a"], ops["b"])
        if not prefetches:
            return self.guarded(op)
        # a prefetch beside the update's reads is a hint: it goes before the instruction,
        # fetching what the first iteration of the replaced loops reads
        firsts = {lp.var: lp.min for lp in loops}
        hoisted = []
        for p in prefetches:
            index = E.substitute(_inline_lets(p.index, lets), firsts)
            hoisted.append(p.replace(index=simplify(index)))
        return self.guarded(ir.make_block(hoisted + [op]))

    def guarded(self, s):
        for cond in reversed(self.guards):
            s = ir.IfThenElse(cond, s)
        return s

    def nest(self):
        """The loops (outermost first), lets and the single store under the tensorized loop,
        and the prefetches beside that store. A guard that does not depend on the nest's
        loops (the tail of a loop outside it, placed innermost) is kept in ``self.guards``,
        to enclose the instruction instead."""
        loops, lets, s = [], [], self.loop
        while True:
            if isinstance(s, ir.For):
                loops.append(s)
                s = s.body
            elif isinstance(s, ir.LetStmt):
                lets.append((s.var, s.value))
                s = s.body
            elif isinstance(s, ir.IfThenElse) and s.else_ is None and not (
                    E.expr_vars(_inline_lets(s.cond, lets)) & {lp.var for lp in loops}):
                self.guards.append(_inline_lets(s.cond, lets))
                s = s.then
            else:
                break
        prefetches = []
        if isinstance(s, ir.Block):
            prefetches = [x for x in s.stmts if isinstance(x, ir.FlatPrefetch)]
            rest = [x for x in s.stmts if not isinstance(x, ir.FlatPrefetch)]
            if prefetches and len(rest) == 1:
                s = rest[0]
        pred = self.st.definition.predicate
        if isinstance(s, ir.IfThenElse) and pred is not None:
            self.fail(f"the loop nest under {self.v} holds the condition of the RDom's where() "
                      f"predicate ({user_text(pred)}), not a single update; {self.intr.name} "
                      "computes every reduction step, so tensorize a stage whose RDom has no "
                      "where(), or leave this one untensorized")
        if isinstance(s, ir.Allocate):
            self.fail(_storage_inside(self.v, self.intr, _allocated(s)))
        if isinstance(s, ir.IfThenElse):
            self.fail(self._guarded(s, lets, loops))
        if not isinstance(s, ir.Store):
            self.fail(f"the loop nest under {self.v} holds {type(s).__name__} statements, "
                      "not a single update")
        if len(loops) != 2:
            names = ", ".join(self.user(lp.var) for lp in loops)
            self.fail(f"{self.intr.name} replaces exactly 2 loops ({self.intr.shape_text()}), "
                      f"but {self.v} and the loops under it are {names}; reorder or split so "
                      f"that exactly one reduction loop is nested under {self.v}")
        return loops, lets, s, prefetches

    def _guarded(self, s, lets, loops):
        """Why a tail guard inside the nest cannot become the instruction, naming the loops
        whose extents do not divide (the guards' loops among the nest's)."""
        used, lets = set(), list(lets)
        while isinstance(s, (ir.IfThenElse, ir.LetStmt)):
            if isinstance(s, ir.LetStmt):
                lets.append((s.var, s.value))
                s = s.body
            else:
                used |= E.expr_vars(_inline_lets(s.cond, lets))
                s = s.then
        names = [self.user(lp.var) for lp in loops if lp.var in used] or \
            [self.user(lp.var) for lp in loops]
        fixes = []
        if loops[0].var in used or not any(lp.var in used for lp in loops):
            fixes.append(f"make the lanes' extent a multiple of {self.intr.lanes}, or split it "
                         "with tail='pad' where the stage allows it (a cache_write or "
                         "intermediate Func)")
        if any(lp.var in used for lp in loops[1:]):
            fixes.append(f"make the reduction a multiple of {self.intr.depth} (read the "
                         "operands through Funcs over a rounded-up RDom and "
                         "sl.constant_exterior(..., 0))")
        return (f"the loop nest under {self.v} holds a bounds guard on {', '.join(names)}: "
                f"an extent does not divide evenly by its split factor, and "
                f"{self.intr.name} computes whole tiles ({self.intr.shape_text()}); "
                + "; ".join(fixes))

    def match_semantics(self, value, out_buffer):
        sem = self.intr.semantics()
        pattern = sem.definitions[1].value
        found = _match(pattern, value, sem, {})
        if found is None:
            reads = []
            ir.walk_expr(value, lambda n: reads.append(f"{n.buffer} ({n.dtype.name})")
                         if isinstance(n, ir.Load) else None)
            acc, a, b = (self.intr.acc_dtype.name, self.intr.a_dtype.name,
                         self.intr.b_dtype.name)
            self.fail(f"the update stores {expr_to_str(self.st.definition.value)} into "
                      f"{out_buffer}, reading {', '.join(sorted(set(reads)))}; "
                      f"{self.intr.name} computes "
                      f"out = out + {acc}(a) * {acc}(b) with out {acc}, a {a} and b {b}. "
                      "Write the update in that form, with those dtypes"
                      + self._inlined_operands(value))
        return found

    def _inlined_operands(self, value):
        """Advice when the definition reads Funcs that are inlined into the loop nest: the
        instruction's operands are reads of memory, not values computed in place."""
        loaded, named = set(), []
        ir.walk_expr(value, lambda n: loaded.add(n.buffer) if isinstance(n, ir.Load) else None)
        E.walk_expr(self.st.definition.value, lambda n: named.append(n.func.name)
                    if isinstance(n, E.FuncRef) and n.func.name not in loaded
                    and n.func.name not in named else None)
        if not named:
            return ""
        names = ", ".join(named)
        return (f"; {names} {'is' if len(named) == 1 else 'are'} inlined, so an operand is "
                f"computed in place (e.g. a boundary condition's select) rather than read: "
                f"compute_root or compute_at {names}")

    def lane_and_reduction(self, loops, extents, out_index):
        outs = [self.stride(out_index, lp, "out", "the output") for lp in loops]
        if sorted(outs) != [0, 1]:
            self.fail(f"the output index must step by 1 along the lane loop and stay fixed "
                      f"along the reduction loop; along {', '.join(self.user(lp.var) for lp in loops)} "
                      f"it steps by {', '.join(map(str, outs))}. Tensorize the loop over the "
                      "output's last (contiguous) dimension, split to the instruction's lanes, "
                      "with one reduction loop of its depth under it")
        lane_i = outs.index(1)
        lane, red = loops[lane_i], loops[1 - lane_i]
        if extents[lane_i] != self.intr.lanes or extents[1 - lane_i] != self.intr.depth:
            self.fail(f"{self.intr.name} needs {self.intr.shape_text()}, but the lane loop "
                      f"{self.user(lane.var)} has extent {extents[lane_i]} and the reduction "
                      f"loop {self.user(red.var)} has extent {extents[1 - lane_i]}; split them "
                      f"by {self.intr.lanes} and {self.intr.depth}")
        return lane, red

    def stride(self, index, loop, role, buffer):
        """The constant step of ``index`` along ``loop``; the index must be affine in it."""
        terms, _ = linear(simplify(index))
        step = 0
        for coeff, term in terms.values():
            if isinstance(term, E.Var) and term.name == loop.var:
                step += coeff
            elif loop.var in E.expr_vars(term):
                self.fail(self._not_constant_step(index, loop, role, buffer))
        return step

    def _not_constant_step(self, index, loop, role, buffer):
        import sympy     # on first use: see symbolic.py
        where = f"the index of {buffer} (operand {role})"
        s = to_sympy(index)
        v = sympy.Symbol(loop.var, integer=True)
        step = None if s is None else sympy.expand(s.subs(v, v + 1) - s)
        if step is None or v in step.free_symbols:
            return f"{where} is not affine in the loop {self.user(loop.var)}"
        if step.is_number:
            return (f"{where} steps by {step} along the loop {self.user(loop.var)}; "
                    f"{self.intr.name} reads each operand forward in memory. Copy {buffer} "
                    f"into a Func laid out for the instruction (for a matrix product, "
                    f"packed[ko, j, ki] = {buffer}[{self.intr.depth} * ko + ki, j]) and read "
                    "that")
        regions = sorted({m.group(1, 2) for m in (_REGION.match(x.name) for x in
                                                  step.free_symbols) if m})
        if regions:
            # the extent of an intermediate Func's computed region: not a size the user named
            f, d = regions[0]
            return (f"{where} steps along the loop {self.user(loop.var)} by the size of "
                    f"{f}'s computed region in its dimension {d}, which varies with the loop "
                    f"{f} is computed at (a guarded tail); {self.intr.name} needs a constant "
                    f"step. compute_root {f}, or compute it at a loop split with tail='shift' "
                    f"or 'pad' so that its region has a constant size")
        return (f"{where} steps by {step} along the loop {self.user(loop.var)}, "
                f"a size known only at run time; {self.intr.name} needs a constant step. Copy "
                f"{buffer} into a Func laid out for the instruction (for a matrix product, "
                f"packed[ko, j, ki] = {buffer}[{self.intr.depth} * ko + ki, j]) and read that, "
                "or give the size a constant")


# the Vars storage flattening gives an intermediate Func's region: ``<func>.b<dim>.extent``
_REGION = re.compile(r"^(.+)\.b(\d+)\.(?:extent|min)$")


def _inline_lets(e, lets):
    """``e`` with the nest's lets (outermost first) replaced by their values."""
    for var, val in reversed(lets):
        e = E.substitute(e, {var: val})
    return e


def _match(pattern, e, sem, found):
    """Bind the semantics' reads (``out``, ``a``, ``b``) to the Loads of ``e``, or None.
    Additions and multiplications match either operand order."""
    if isinstance(pattern, E.FuncRef):
        role = "out" if pattern.func is sem else pattern.func.name
        if not isinstance(e, ir.Load) or e.dtype != pattern.dtype or role in found:
            return None
        return {**found, role: e}
    if isinstance(pattern, E.Cast):
        if not isinstance(e, E.Cast) or e.dtype != pattern.dtype:
            return None
        return _match(pattern.value, e.value, sem, found)
    if isinstance(pattern, E.BinOp):
        if not isinstance(e, E.BinOp) or e.op != pattern.op:
            return None
        orders = [(e.a, e.b)] + ([(e.b, e.a)] if e.op in ("add", "mul") else [])
        for x, y in orders:
            got = _match(pattern.a, x, sem, found)
            got = _match(pattern.b, y, sem, got) if got is not None else None
            if got is not None:
                return got
        return None
    return None
